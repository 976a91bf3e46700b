/* pcache.c — the per-thread page caches in front of the shared page heap
 * (the kernel's per-CPU page lists): page_alloc and page_free. A cache is
 * owned by one thread (no lock); it parks runs of 1..PCACHE_MAX_PAGES
 * pages per length and kind, up to its budget (from a 64th of the heap,
 * 256 KiB to 2 MiB, up to 16 MiB, grown while the thread reuses what it
 * parks: pcache_budget.h), refilled and drained
 * in batches under one hold of the page heap lock (page.h).
 */
#include "page_heap.h"

#include <errno.h>
#include <string.h>

#include "../os/os.h"

/* Which stack of the page cache a run of head kind `kind` in a block of
 * type `type` belongs on, or -1 if it is not cached. A stack holds one kind
 * and one type only (page.h), so a run handed out from it already carries
 * the kind its new holder asked for, in a block of the type it asked for:
 * the stack is derived from the run itself on the way in, never from what
 * the block was when the run was taken, since a fallback may have re-typed
 * the block meanwhile. A run whose block is no longer of a cached type for
 * its kind goes back to the shared heap instead, so that the cache does
 * not keep pieces of a re-typed block apart from it. */
static int cache_stack(enum pb_type type, enum page_kind kind)
{
    if (kind == PG_RUN)
        return type == PB_RUN || !sl_opt.antifrag ? PCACHE_RUNS : -1;
    if (kind != PG_SLAB)
        return -1;
    if (!sl_opt.antifrag) /* every block is of one type (page_alloc) */
        return PCACHE_SLABS;
    return type == PB_SLAB ? PCACHE_SLABS : type == PB_BUF ? PCACHE_BUF_SLABS : -1;
}

#define FIT_M8(b)                                                                                          \
    PCACHE_FIT_MASK(b), PCACHE_FIT_MASK(b + 1), PCACHE_FIT_MASK(b + 2), PCACHE_FIT_MASK(b + 3),                     \
        PCACHE_FIT_MASK(b + 4), PCACHE_FIT_MASK(b + 5), PCACHE_FIT_MASK(b + 6), PCACHE_FIT_MASK(b + 7)
const uint64_t pcache_fit_mask[PCACHE_MAX_PAGES] = { FIT_M8(0),  FIT_M8(8),  FIT_M8(16), FIT_M8(24),
                                                     FIT_M8(32), FIT_M8(40), FIT_M8(48), FIT_M8(56) };
_Static_assert(PCACHE_MAX_PAGES == 64, "pcache_fit_mask lists 0..63");
#undef FIT_M8

/* A run a little longer than n pages on stack ct (pcache_fit_run), or 0. */
static unsigned pcache_fit(struct page_cache *pc, int ct, unsigned n)
{
    return ct == PCACHE_RUNS && n < PCACHE_MAX_PAGES ? pcache_fit_run(pc, n) : 0;
}

/* The slot of the newest run on the runs' stack of n pages that held a
 * request of q pages (run.seen), or -1. */
sl_inline int seen_find(const struct page_cache *pc, unsigned n, unsigned q)
{
    unsigned d = n - q;
    if (d >= 32)
        return -1;
    for (int i = pc->count[PCACHE_RUNS][n]; i-- > 0;)
        if ((pc->seen[n][i] >> d) & 1)
            return i;
    return -1;
}

/* Take slot i of the runs' stack of n pages out (the newest takes its place). */
sl_inline void *pop_at(struct page_cache *pc, unsigned n, int i)
{
    unsigned top = pc->count[PCACHE_RUNS][n] - 1;
    void *r = pc->runs[PCACHE_RUNS][n][i];
    pc->runs[PCACHE_RUNS][n][i] = pc->runs[PCACHE_RUNS][n][top];
    pc->seen[n][i] = pc->seen[n][top];
    pc->runs[PCACHE_RUNS][n][top] = r;
    return pcache_pop(pc, PCACHE_RUNS, n);
}

void *page_cache_pop_run_slow(struct page_cache *pc, unsigned n, unsigned q)
{
    int i;
    if ((i = seen_find(pc, n, q)) >= 0)
        return pop_at(pc, n, i);
    if (pc->count[PCACHE_RUNS][n])
        return pcache_pop(pc, PCACHE_RUNS, n);
    uint64_t fit = n < PCACHE_MAX_PAGES ? (pc->nonempty[PCACHE_RUNS] >> n) & pcache_fit_mask[n] : 0;
    for (uint64_t w = fit; w; w &= w - 1) {
        unsigned k = n + 1 + (unsigned)__builtin_ctzll(w);
        if ((i = seen_find(pc, k, q)) >= 0)
            return pop_at(pc, k, i);
    }
    return fit ? pcache_pop(pc, PCACHE_RUNS, n + 1 + (unsigned)__builtin_ctzll(fit)) : NULL;
}

/* What the budget's policy reads of the page heap (no lock: counters). */
static struct pcache_heap_view heap_view(void)
{
    size_t active = ld_relaxed(&page_heap.active_pages);
    size_t mapped = __atomic_load_n(&page_heap.nblocks, __ATOMIC_RELAXED) * BLOCK_USABLE_PAGES;
    return (struct pcache_heap_view){ .drops = ld_relaxed(&page_heap.drops), .cap = purge_dirty_cap(),
                                      .active = active, .free = mapped > active ? mapped - active : 0 };
}

/* A budget moved from old to new pages: the page heap's sum of budgets
 * beyond a big heap's least (PCACHE_BUDGET_LEAST) follows (the shared run
 * cache parks that much less). */
static size_t beyond_least(unsigned pages) { return pages > PCACHE_BUDGET_LEAST ? pages - PCACHE_BUDGET_LEAST : 0; }
static void pcache_budget_moved(struct page_cache *pc, unsigned old, unsigned new)
{
    if (new == old)
        return;
    atomic_fetch_add_explicit(&page_heap.pcache_extra, beyond_least(new) - beyond_least(old),
                              memory_order_relaxed); /* wraps for a fall */
    if (pc->stats)
        stat_add(pc->stats, new > old ? STAT_pcache_grow : STAT_pcache_shrink, 1);
}

/* Back to the least budget (a drained or forgotten cache). */
static void pcache_budget_reset(struct page_cache *pc)
{
    unsigned old = pc->budget.pages;
    pcache_budget_init(&pc->budget, heap_view(), os_now_ms());
    pcache_budget_moved(pc, old, pc->budget.pages);
}

/* Refill the cache for (type, n): slabs, whose lengths repeat, with a
 * batch taken under one lock; medium runs, whose lengths vary with the
 * requests, one at a time. Measured (callgrind) on 1000 live runs of
 * 32-256 KiB replaced at random: batches park runs that are rarely asked
 * for. Instructions per replacement, by per-thread budget: 1 MiB 1,607
 * with batches, 1,351 without; 2 MiB 1,178 without; 4 MiB 3,038 with
 * batches, 913 without. 4 MiB also cost bench/realloc 1.6 MB of peak RSS
 * (8.4 -> 10.0 MB); 2 MiB costs 0.6 MB. A
 * cached run keeps its head kind (its stack's, page.h):
 * descriptors are only ever written under the lock or by a live run's
 * owner, so the buddy code of other threads never races with a write. */
static sl_noinline void *pcache_refill_slow(struct page_cache *pc, int ct, enum pb_type type, unsigned n,
                                            enum page_kind kind)
{
    unsigned batch = PCACHE_SLAB_BATCH;
    if (batch * n > pc->budget.pages / 2 || ct == PCACHE_RUNS) /* half the budget at most */
        batch = 1;
    void *first;
    bool clean;
    lock_acquire(&page_heap.lock);
    first = take_locked(type, n, 0, kind, &clean);
    for (unsigned i = 1; first && i < batch; i++) {
        void *r = take_locked(type, n, 0, kind, &clean);
        if (!r)
            break;
        pcache_push(pc, ct, n, r);
    }
    page_heap_unlock();
    purge_growth();
    pcache_budget_miss(&pc->budget);
    if (pc->stats)
        stat_add(pc->stats, STAT_pcache_refill, 1);
    if (unlikely(sl_opt.publish)) /* a program that only allocates still gets its timeline */
        purge_maybe();
    return first;
}

void *page_alloc(struct page_cache *pc, enum pb_type type, size_t npages, size_t align_pages, enum page_kind kind,
                 bool *clean)
{
    bool dummy;
    if (!clean)
        clean = &dummy;
    *clean = false;
    if (!sl_opt.antifrag)
        type = PB_SLAB; /* grouping off: one type for all */
    if (npages > BLOCK_USABLE_PAGES || npages == 0) {
        errno = ENOMEM;
        return NULL;
    }
    int ct = cache_stack(type, kind);
    unsigned n = (unsigned)npages;
    if (pc && ct >= 0 && n <= PCACHE_MAX_PAGES && align_pages <= 1) {
        if (pc->count[ct][n])
            return pcache_pop(pc, ct, n); /* of `kind`: a stack holds one kind (cache_stack) */
        unsigned m = pcache_fit(pc, ct, n);
        if (m)
            return pcache_pop(pc, ct, m);
        int saved = errno; /* a mapping refused on the way (a fallback took over) */
        void *r = pcache_refill_slow(pc, ct, type, n, kind);
        errno = r ? saved : ENOMEM;
        return r;
    }
    int saved = errno;
    lock_acquire(&page_heap.lock);
    void *r = take_locked(type, n, log2_ceil(align_pages ? align_pages : 1), kind, clean);
    page_heap_unlock();
    errno = r ? saved : ENOMEM; /* a success leaves errno alone, whatever failed on the way */
    purge_growth();
    purge_maybe();
    return r;
}

/* Give back, under one lock, half of the (ct, n) stack (all stacks when
 * n == 0), then the largest runs first until at most `budget` pages stay. */
static void pcache_drain(struct page_cache *pc, int ct, unsigned n, unsigned budget)
{
    lock_acquire(&page_heap.lock);
    if (n) {
        unsigned keep = pc->count[ct][n] / 2;
        while (pc->count[ct][n] > keep)
            release_locked(pcache_pop(pc, ct, n));
    }
    while (pc->pages > budget) { /* the largest parked run of any stack */
        int t = 0;
        for (int u = 1; u < PCACHE_TYPES; u++)
            if (pc->nonempty[u] > pc->nonempty[t]) /* the larger mask has the higher top bit */
                t = u;
        release_locked(pcache_pop(pc, t, log2_floor(pc->nonempty[t]) + 1));
    }
    page_heap_unlock();
    if (pc->stats)
        stat_add(pc->stats, STAT_pcache_drain, 1);
    purge_maybe();
}

/* A drained cache (a thread's exit, a request to give back) starts again
 * at the least budget; an empty one (most threads' at their exit) takes
 * no lock: every path that parked or released pages ran purge_maybe
 * already. */
void page_cache_drain(struct page_cache *pc)
{
    if (pc->pages)
        pcache_drain(pc, 0, 0, 0);
    pcache_budget_reset(pc);
}

void page_cache_forget(struct page_cache *pc)
{
    memset(pc->count, 0, sizeof pc->count);
    memset(pc->nonempty, 0, sizeof pc->nonempty);
    __atomic_store_n(&pc->pages, 0, __ATOMIC_RELAXED);
    pcache_budget_reset(pc);
}

/* pc is zeroed (meta_alloc): its stacks' pages are left untouched */
void page_cache_init(struct page_cache *pc, _Atomic uint64_t *stats)
{
    pcache_budget_init(&pc->budget, heap_view(), os_now_ms());
    pc->stats = stats;
}

/* The cache is over its budget (or a stack is full): the policy
 * (pcache_budget.h) says how much it may keep. A budget that shrank for
 * the cache's own reasons (the heap sparse, the cache idle; not a drop)
 * tells the drop policy that what it drains beyond the new budget was
 * not freed now (purge_cache_shrank): bench_sizes 1.5 4 and longer made
 * a false drop of it mid-run, a regret, and then kept ~200 MiB dirty
 * after its last free (test cache_shrink). */
static unsigned pcache_overflow(struct page_cache *pc)
{
    unsigned old = pc->budget.pages;
    uint32_t drops = pc->budget.drops;
    unsigned now = pcache_budget_overflow(&pc->budget, heap_view(), os_now_ms());
    pcache_budget_moved(pc, old, now);
    if (now < old && drops == pc->budget.drops && pc->pages > now)
        purge_cache_shrank(pc->pages - now);
    return now;
}

/* page_free when the run's stack is full or the cache is over its budget,
 * or the run is not one to cache. */
static sl_noinline void page_free_slow(struct page_cache *pc, void *run, unsigned n, int ct)
{
    /* purging at once (SLUICE_DIRTY_DECAY_MS=0) means no run is parked */
    if (pc && ct >= 0 && n <= PCACHE_MAX_PAGES && !purge_at_once()) {
        unsigned budget = pcache_overflow(pc);
        if (pc->count[ct][n] == PCACHE_DEPTH)
            pcache_drain(pc, ct, n, budget);
        else if (pc->pages + n > budget)
            pcache_drain(pc, ct, 0, budget / 2);
        /* the drain's purge_maybe found a drop: the runs beyond the least
         * go now, while the program is still giving memory up, so that
         * the next drop purge takes them (this free may be its last) */
        if (pc->budget.drops != ld_relaxed(&page_heap.drops) && pc->pages > pcache_budget_least(heap_view()) / 2)
            pcache_drain(pc, ct, 0, pcache_overflow(pc) / 2);
        pcache_push(pc, ct, n, run);
        return;
    }
    /* purging at once (SLUICE_DIRTY_DECAY_MS=0): advise before the pages
     * are free, outside the lock */
    bool at_once = purge_at_once();
    enum page_state st = at_once ? purge_range(run, (size_t)n << SL_PAGE_SHIFT) : PS_DIRTY;
    lock_acquire(&page_heap.lock);
    if (at_once)
        run_give_locked(run, st);
    else
        release_locked(run);
    page_heap_unlock();
    purge_maybe();
}

void page_free(struct page_cache *pc, void *run)
{
    struct page *pg = page_of(run);
    unsigned n = pg->h.npages;
    int ct = cache_stack((enum pb_type)__atomic_load_n(&block_of(run)->type, __ATOMIC_RELAXED),
                         (enum page_kind)pg->h.kind);
    if (likely(pc && ct >= 0 && n <= PCACHE_MAX_PAGES && pc->count[ct][n] < PCACHE_DEPTH &&
               pc->pages + n <= pc->budget.pages && !purge_at_once()))
        return pcache_push(pc, ct, n, run);
    page_free_slow(pc, run, n, ct);
}
