/* purge.c — the purge mechanism for pageblock memory: free pages go dirty
 * -> lazy -> clean (block.h has the per-page states), as purge_decay.c
 * (applying decay.h's policy) asks. It owns the per-block state counts
 * and the purge list (pages_put, pages_take), the advice itself
 * (page_advise) and the purges of free spans and parked runs, one purger
 * at a time (purge_lock); and the reclaim registry's free-block drains.
 *
 *   - Spans: maximal runs of pages in one state, coalesced across buddy
 *     chunks, largest first, one madvise each; a wholly free block is one
 *     span (one call; its clean pages are then counted in the new state).
 *     A wholly free block purged while more than the number kept are free
 *     is unmapped rather than advised (page.c, relink).
 * Mechanism: spans are taken off the free lists under the lock, advised
 *   outside it, and given back in their new state, so madvise never runs
 *   under the page heap lock and never races an allocation.
 */

#include "../base/drain.h"
#include "../options/options.h"
#include "../os/os.h"
#include "page_heap.h"

#define PURGE_BATCH     32  /* spans advised per lock round trip */

/* One purger at a time: spans are off the free lists while it advises
 * them, and fork's prepare handler takes this lock so a child never
 * inherits a span in flight. Order: after heaps_lock and huge_lock,
 * before the page heap lock. */
static SL_LOCK_DEFINE(purge_lock, LOCK_PURGE);

static void purge_list_update(struct block *b)
{
    bool want = b->ndirty || b->nlazy;
    if (want == b->on_purge_list)
        return;
    if (want) {
        b->pprev = NULL;
        b->pnext = page_heap.purge_list;
        if (b->pnext)
            b->pnext->pprev = b;
        page_heap.purge_list = b;
    } else {
        if (b->pprev)
            b->pprev->pnext = b->pnext;
        else
            page_heap.purge_list = b->pnext;
        if (b->pnext)
            b->pnext->pprev = b->pprev;
    }
    b->on_purge_list = want;
}

/* Apply a state change to b and keep the totals and the purge list right. */
static void state_set(struct block *b, unsigned first, unsigned n, enum page_state st)
{
    unsigned d0 = b->ndirty, l0 = b->nlazy;
    block_state_set(b, first, n, st);
    st_relaxed(&page_heap.dirty_pages, ld_relaxed(&page_heap.dirty_pages) + b->ndirty - d0);
    if (b->thp)
        st_relaxed(&page_heap.thp_dirty_pages, ld_relaxed(&page_heap.thp_dirty_pages) + b->ndirty - d0);
    st_relaxed(&page_heap.lazy_pages, ld_relaxed(&page_heap.lazy_pages) + b->nlazy - l0);
    if (st == PS_DIRTY && b->ndirty != d0)
        b->dirty_ms = os_now_ms();
    if (st == PS_LAZY && b->nlazy != l0)
        b->lazy_ms = os_now_ms();
    purge_list_update(b);
}

static bool state_take(struct block *b, unsigned first, unsigned n)
{
    unsigned d0 = b->ndirty, l0 = b->nlazy;
    bool clean = block_state_take(b, first, n);
    st_relaxed(&page_heap.dirty_pages, ld_relaxed(&page_heap.dirty_pages) - (d0 - b->ndirty));
    if (b->thp)
        st_relaxed(&page_heap.thp_dirty_pages, ld_relaxed(&page_heap.thp_dirty_pages) - (d0 - b->ndirty));
    st_relaxed(&page_heap.lazy_pages, ld_relaxed(&page_heap.lazy_pages) - (l0 - b->nlazy));
    st_relaxed(&page_heap.taken_back, ld_relaxed(&page_heap.taken_back) + (l0 - b->nlazy));
    purge_list_update(b);
    return clean;
}

void purge_forget(struct block *b) { state_take(b, BLOCK_HEADER_PAGES, BLOCK_USABLE_PAGES); }

void pages_put(struct block *b, unsigned first, unsigned n, enum page_state st)
{
    st_relaxed(&page_heap.active_pages, ld_relaxed(&page_heap.active_pages) - n);
    state_set(b, first, n, st);
}

bool pages_take(struct block *b, unsigned first, unsigned n)
{
    st_relaxed(&page_heap.active_pages, ld_relaxed(&page_heap.active_pages) + n);
    return state_take(b, first, n);
}

void pages_all_dirty(struct block *b)
{
    struct page *pg = block_pages(b);
    for (unsigned o = 0; o < BLOCK_NORDERS; o++)
        for (unsigned i = b->free_head[o]; i; i = pg[i].free.next)
            state_set(b, i, 1u << o, PS_DIRTY);
}

size_t purgeable_dirty(void)
{
    return ld_relaxed(&page_heap.dirty_pages) - ld_relaxed(&page_heap.thp_dirty_pages) + runcache_pages();
}

/* madvise one range, count it, and say what state its pages are in now:
 * still dirty if the kernel refused the advice. */
enum page_state page_advise(void *p, size_t bytes, enum page_state to)
{
    enum os_purge got = os_purge(p, bytes, to == PS_LAZY ? OS_LAZY : OS_CLEAN);
    if (got == OS_NONE) {
        stat_add_shared(STAT_madv_failed, 1);
        return PS_DIRTY;
    }
    bool lazy = got == OS_LAZY;
    stat_madvise(lazy, bytes);
    return lazy ? PS_LAZY : PS_CLEAN;
}

/* page_advise of k ranges at once (os_purge_many: one system call where
 * the kernel takes it and SLUICE_PURGE_BATCH lets it); got[i]: the state
 * range i's pages are in now.
 * Returns true if the kernel refused any. A drop's purge advises each
 * freed run alone (live runs lie between them): 1,600 madvise calls at
 * the end of bench_sizes 1 4, 1.6 us each on top of the pages' own cost
 * (one TLB flush and one LRU drain a call); a batch of 32 takes one. */
_Static_assert(PURGE_BATCH <= OS_PURGE_MANY, "a purge round's spans fit one batch");
static bool advise_many(const struct os_range *r, unsigned k, enum page_state to, enum page_state *got)
{
    enum os_purge res[PURGE_BATCH];
    enum os_purge how = to == PS_LAZY ? OS_LAZY : OS_CLEAN;
    unsigned batched = 0;
    if (sl_opt.purge_batch)
        batched = os_purge_many(r, k, how, res);
    else
        for (unsigned i = 0; i < k; i++)
            res[i] = os_purge(r[i].p, r[i].size, how);
    if (batched) {
        stat_add_shared(STAT_madv_batched, batched);
        stat_add_shared(STAT_madv_batches, 1);
    }
    bool refused = false;
    for (unsigned i = 0; i < k; i++) {
        if (res[i] == OS_NONE) {
            stat_add_shared(STAT_madv_failed, 1);
            got[i] = PS_DIRTY;
            refused = true;
            continue;
        }
        stat_madvise(res[i] == OS_LAZY, r[i].size);
        got[i] = res[i] == OS_LAZY ? PS_LAZY : PS_CLEAN;
    }
    return refused;
}

enum page_state purge_range(void *p, size_t bytes)
{
    return page_advise(p, bytes, sl_opt.purge == PURGE_FREE ? PS_LAZY : PS_CLEAN);
}

/* Header pages a span leaves idle. The live-object bitmap has one page per
 * 128 pages of the block, all zero where the pages are free; a descriptor
 * page covers 64 pages, and free pages need only their chunk heads'
 * descriptors (a tail's descriptor is read by nothing). So a span gives
 * back, beside its own pages, the bitmap pages it covers whole (before its
 * pages go back on the free lists: nothing reads them meanwhile) and the
 * descriptor pages it covers whole that hold no chunk head once it is back
 * (under the lock: an allocation could write them right after). Without
 * this, 2,048 freed blocks kept 96 MiB of headers resident. */
#define GRAINS_PAGES (SL_PAGE * 8 * SL_GRAIN / SL_PAGE) /* pages one bitmap page covers: 128 */
#define DESC_PAGES   (SL_PAGE / sizeof(struct page))       /* pages one descriptor page covers: 64 */

static unsigned span_start(unsigned first) { return first == BLOCK_HEADER_PAGES ? 0 : first; }

static void trim_bitmap(struct block *b, unsigned first, unsigned n)
{
    for (unsigned j = (span_start(first) + GRAINS_PAGES - 1) / GRAINS_PAGES; (j + 1) * GRAINS_PAGES <= first + n; j++)
        page_advise((uint8_t *)b + BLOCK_BITMAP_OFF + (size_t)j * SL_PAGE, SL_PAGE, PS_CLEAN);
}

static void trim_descriptors_locked(struct block *b, unsigned first, unsigned n)
{
    struct page *pg = block_pages(b);
    for (unsigned d = (span_start(first) + DESC_PAGES - 1) / DESC_PAGES; (d + 1) * DESC_PAGES <= first + n; d++) {
        if (d == 0)
            continue; /* struct block lives there */
        bool heads = false;
        for (unsigned i = d * DESC_PAGES; i < (d + 1) * DESC_PAGES && !heads; i++)
            heads = pg[i].h.kind == PG_FREE;
        if (!heads)
            page_advise(&pg[d * DESC_PAGES], SL_PAGE, PS_CLEAN);
    }
}

struct span {
    struct block *b;
    uint16_t first, n;
};

/* Keep the PURGE_BATCH largest spans, largest first. */
static void span_add(struct span *sp, unsigned *k, struct block *b, unsigned first, unsigned n)
{
    unsigned i = *k;
    if (i == PURGE_BATCH) {
        if (sp[i - 1].n >= n)
            return;
        i--;
    } else {
        ++*k;
    }
    while (i > 0 && sp[i - 1].n < n) {
        sp[i] = sp[i - 1];
        i--;
    }
    sp[i] = (struct span){ b, (uint16_t)first, (uint16_t)n };
}

/* Move up to max_pages pages from state `from` to `to`, largest spans
 * first, in blocks whose pages entered `from` at or before cutoff_ms.
 * Returns the pages moved. wait: false gives up if another thread purges. */
size_t purge_spans(enum page_state from, enum page_state to, uint64_t cutoff_ms, size_t max_pages, bool wait)
{
    size_t done = 0;
    if (wait)
        lock_acquire(&purge_lock);
    else if (!lock_try(&purge_lock))
        return 0;
    while (done < max_pages) {
        struct span sp[PURGE_BATCH];
        unsigned k = 0;
        lock_acquire(&page_heap.lock);
        for (struct block *b = page_heap.purge_list; b; b = b->pnext) {
            unsigned have = from == PS_DIRTY ? b->ndirty : b->nlazy;
            uint64_t stamp = from == PS_DIRTY ? b->dirty_ms : b->lazy_ms;
            if (!have || stamp > cutoff_ms || !hugify_may_purge(b))
                continue;
            if (b->free_pages == BLOCK_USABLE_PAGES) { /* whole: up to its committed part (the rest is clean) */
                span_add(sp, &k, b, BLOCK_HEADER_PAGES, b->committed - BLOCK_HEADER_PAGES);
                continue;
            }
            unsigned first, n;
            for (unsigned at = 0; (n = block_state_next(b, from, at, &first)); at = first + n)
                span_add(sp, &k, b, first, n);
        }
        if (!k) {
            page_heap_unlock();
            break;
        }
        for (unsigned i = 0; i < k; i++) {
            struct block *b = sp[i].b;
            done += sp[i].n;
            bool whole = b->free_pages == BLOCK_USABLE_PAGES && sp[i].first == BLOCK_HEADER_PAGES &&
                         sp[i].n == b->committed - BLOCK_HEADER_PAGES;
            if (whole && page_heap.nfree_blocks > free_blocks_keep() && !b->pinned) {
                block_unmap(b); /* free and not kept: give the mapping back */
                sp[i].b = NULL;
                continue;
            }
            block_take_range(b, sp[i].first, sp[i].n); /* free pages: cannot fail */
            state_take(b, sp[i].first, sp[i].n);
            relink(b);
        }
        page_heap_unlock();
        enum page_state got[PURGE_BATCH], g[PURGE_BATCH];
        struct os_range r[PURGE_BATCH];
        unsigned m = 0;
        for (unsigned i = 0; i < k; i++)
            if (sp[i].b)
                r[m++] = (struct os_range){ (uint8_t *)sp[i].b + ((size_t)sp[i].first << SL_PAGE_SHIFT),
                                            (size_t)sp[i].n << SL_PAGE_SHIFT };
        /* the kernel said no: stop, or the same spans come round again */
        bool refused = m && advise_many(r, m, to, g);
        for (unsigned i = 0, j = 0; i < k; i++) {
            if (!sp[i].b)
                continue;
            got[i] = g[j++];
            trim_bitmap(sp[i].b, sp[i].first, sp[i].n);
        }
        lock_acquire(&page_heap.lock);
        for (unsigned i = 0; i < k; i++) {
            struct block *b = sp[i].b;
            if (!b)
                continue;
            block_give(b, sp[i].first, sp[i].n);
            state_set(b, sp[i].first, sp[i].n, got[i]);
            trim_descriptors_locked(b, sp[i].first, sp[i].n);
            relink(b);
        }
        page_heap_unlock();
        if (refused)
            break;
    }
    lock_release(&purge_lock);
    return done;
}

/* The shared run cache's part: move up to max_pages pages of runs parked
 * at or before cutoff_ms, oldest first, to state `to`, and give them to
 * the buddy lists; returns the pages moved. wait: as purge_spans. */
size_t purge_parked(enum page_state to, uint64_t cutoff_ms, size_t max_pages, bool wait)
{
    size_t done = 0;
    if (wait)
        lock_acquire(&purge_lock);
    else if (!lock_try(&purge_lock))
        return 0;
    while (done < max_pages && runcache_pages()) {
        void *runs[PURGE_BATCH];
        enum page_state got[PURGE_BATCH];
        lock_acquire(&page_heap.lock);
        unsigned k = runcache_take_old(cutoff_ms, max_pages - done, runs, PURGE_BATCH), m = 0;
        for (unsigned i = 0; i < k; i++) /* a dense hugepage is not split: back dirty, advised with its block */
            if (hugify_may_purge(block_of(runs[i])))
                runs[m++] = runs[i];
            else
                run_give_locked(runs[i], PS_DIRTY);
        page_heap_unlock();
        if (!k)
            break;
        k = m;
        struct os_range r[PURGE_BATCH];
        for (unsigned i = 0; i < k; i++) /* the runs are ours until given back */
            r[i] = (struct os_range){ runs[i], (size_t)page_of(runs[i])->h.npages << SL_PAGE_SHIFT };
        bool refused = k && advise_many(r, k, to, got);
        for (unsigned i = 0; i < k; i++) {
            struct page *pg = page_of(runs[i]);
            unsigned first = (unsigned)(pg - block_pages(block_of(runs[i]))), n = pg->h.npages;
            trim_bitmap(block_of(runs[i]), first, n);
            done += n;
        }
        lock_acquire(&page_heap.lock);
        for (unsigned i = 0; i < k; i++)
            run_give_locked(runs[i], got[i]);
        page_heap_unlock();
        if (refused)
            break;
    }
    lock_release(&purge_lock);
    return done;
}

void page_purge_all(void)
{
    hugify_split_all(); /* every free page clean: a dense hugepage's too */
    page_release_free_blocks(true); /* the parked runs too */
    purge_spans(PS_DIRTY, PS_CLEAN, UINT64_MAX, SIZE_MAX, true);
    purge_spans(PS_LAZY, PS_CLEAN, UINT64_MAX, SIZE_MAX, true);
    /* a block whose spans another purger (the reclaimer's decay) had off
     * the free lists at the first release is wholly free again by now:
     * the waits above came after that purger */
    page_release_free_blocks(true);
}

sl_lock *purge_fork_lock(void) { return &purge_lock; }

/* The reclaim registry's entries (base/drain.h). The pageblocks that the
 * drains between these two free (slabs, page caches, parked runs) are
 * gathered and given back together, neighbours as one range; then, for
 * sl_purge, every free page is made clean and every wholly free pageblock
 * unmapped; after a failed allocation, every wholly free pageblock. */
static void drain_gather(enum drain_depth depth, size_t want)
{
    (void)depth, (void)want;
    page_gather_begin();
}
DRAIN_REGISTER(gather_drain, .name = "gather", .order = DRAIN_GATHER, .depths = DRAIN_PURGE | DRAIN_ENOMEM,
               .run = drain_gather, .held = NULL);

static void drain_free_blocks(enum drain_depth depth, size_t want)
{
    (void)want;
    page_gather_end();
    if (depth == DRAIN_PURGE)
        page_purge_all();
    else
        page_release_free_blocks(true);
}
static size_t free_blocks_held(void)
{
    struct page_gauges g;
    page_gauges(&g);
    return g.free_blocks * SL_BLOCK;
}
DRAIN_REGISTER(free_blocks_drain, .name = "free_blocks", .order = DRAIN_FREE_BLOCKS,
               .depths = DRAIN_PURGE | DRAIN_ENOMEM, .run = drain_free_blocks, .held = free_blocks_held);
