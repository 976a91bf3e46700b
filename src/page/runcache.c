/* runcache.c — the shared run cache: freed medium runs parked whole, per
 * length, instead of going back to the buddy lists (lazy coalescing, as
 * the kernel's per-CPU page lists hold pages back from the buddy).
 *
 * A medium run that leaves a thread's page cache (a drain, a thread's
 * exit, a free with no cache) is parked here under the page heap lock,
 * and a later request of its length, or a little shorter (the run at
 * most a quarter longer than asked for, PCACHE_FIT_DIV), takes it back
 * whole: the same pages, at the same address, already faulted in, with
 * no buddy split or merge. Given back to the buddy instead, a run's pages
 * come out again at other offsets of other chunks, so a program that
 * replaces buffers of varied sizes touches (faults in) its whole
 * footprint over time.
 *
 * Invariants (page heap lock; checked by runcache_check):
 *   - a parked run is an allocated run of the buddy's (head PG_RUN, run.req
 *     0: not live, run.parked set) of at most RC_MAX_PAGES pages, in a
 *     block of type PB_RUN (any type with SLUICE_ANTIFRAG=0), on exactly
 *     one length list (newest first) and on the age list;
 *   - its pages count neither as active nor as the buddy's free pages; they
 *     are dirty free memory for the purge layer: they count against the
 *     dirty cap, and decay like dirty pages (purge.c takes them back
 *     oldest first, advises them and gives them to the buddy; one in a
 *     dense hugepage block goes back unadvised, so as not to split it);
 *   - at most the dirty cap (purge_dirty_cap) less the page caches'
 *     budgets beyond their least (page_heap.pcache_extra) is parked: past
 *     it the oldest run goes back to the buddy lists, still dirty;
 *   - before a type short of room takes a whole free pageblock, a new one
 *     or another type's piece, parked runs go back to the buddy lists,
 *     oldest first, until one merges into a chunk that fits (page.c,
 *     find_block): parked runs never cause a fragmentation event. A run
 *     that grows in place takes back the parked runs in its way
 *     (page_resize); a boost, sl_purge and a refused mapping take back all.
 */
#include "../base/drain.h"
#include "../base/fatal.h"
#include "../options/options.h"
#include "../os/os.h"
#include "decay.h"
#include "page_heap.h"

#define RC_WORDS (RC_MAX_PAGES / 64)
/* A take looks at this many runs of the length for the fullest block.
 * Measured against taking the newest: bench_mixed mapped 76 pageblocks
 * instead of 79 (peak RSS 148,920 against 154,616 KiB), and the 32-256
 * KiB band of bench_sizes (2 4) faulted 22,481 pages instead of 25,123
 * (90,808 against 101,304 KiB), for 477 instructions a replacement
 * instead of 459 (callgrind, bench_sizes 0.5 4 less 0.25 4). */
#define RC_TAKE_SCAN 8

static struct {
    struct page *head[RC_MAX_PAGES + 1]; /* by length: newest first */
    uint64_t nonempty[RC_WORDS];         /* bit n - 1: head[n] != NULL */
    struct page *oldest, *newest;        /* every parked run, by age */
    size_t runs;
    _Atomic size_t pages; /* read without the lock by the purge layer */
} rc;

size_t runcache_pages(void) { return ld_relaxed(&rc.pages); }

static void set_nonempty(unsigned n, bool on)
{
    uint64_t bit = 1ull << ((n - 1) % 64);
    rc.nonempty[(n - 1) / 64] = on ? rc.nonempty[(n - 1) / 64] | bit : rc.nonempty[(n - 1) / 64] & ~bit;
}

static void unlink_run(struct page *pg)
{
    unsigned n = pg->h.npages;
    if (pg->run.prev)
        pg->run.prev->run.next = pg->run.next;
    else if (!(rc.head[n] = pg->run.next))
        set_nonempty(n, false);
    if (pg->run.next)
        pg->run.next->run.prev = pg->run.prev;
    if (pg->run.younger)
        pg->run.younger->run.older = pg->run.older;
    else
        rc.newest = pg->run.older;
    if (pg->run.older)
        pg->run.older->run.younger = pg->run.younger;
    else
        rc.oldest = pg->run.younger;
    pg->run.parked = false;
    rc.runs--;
    st_relaxed(&rc.pages, ld_relaxed(&rc.pages) - n);
    st_relaxed(&page_heap.active_pages, ld_relaxed(&page_heap.active_pages) + n); /* handed out again */
}

/* A parked run back to the buddy lists, dirty. */
static void give_back(struct page *pg)
{
    unlink_run(pg);
    run_give_locked(page_addr(pg), PS_DIRTY);
    stat_add(stats_global, STAT_runcache_flush, 1);
}

bool runcache_flush_oldest(void)
{
    if (!rc.oldest)
        return false;
    give_back(rc.oldest);
    return true;
}

bool runcache_park(void *run)
{
    struct page *pg = page_of(run);
    unsigned n = pg->h.npages;
    if (pg->h.kind != PG_RUN || n > RC_MAX_PAGES || purge_at_once() ||
        (block_of(run)->type != PB_RUN && sl_opt.antifrag))
        return false;
    /* the cap: of the active pages once this run has left them, less what
     * the page caches may hold beyond their least budget (pcache_budget.h),
     * so that runs parked per thread and here add up to what was parked
     * here alone */
    size_t cap = decay_dirty_cap(ld_relaxed(&page_heap.active_pages) - n);
    ptrdiff_t extra = (ptrdiff_t)ld_relaxed(&page_heap.pcache_extra); /* below 0 only if a fork child caught a move */
    if (extra > 0)
        cap = cap > (size_t)extra ? cap - (size_t)extra : 0;
    while (ld_relaxed(&rc.pages) + n > cap && runcache_flush_oldest())
        ;
    if (ld_relaxed(&rc.pages) + n > cap)
        return false;
    pg->run.parked = true;
    pg->run.parked_ms = os_now_ms();
    pg->run.prev = NULL;
    if ((pg->run.next = rc.head[n]))
        rc.head[n]->run.prev = pg;
    else
        set_nonempty(n, true);
    rc.head[n] = pg;
    pg->run.younger = NULL;
    if ((pg->run.older = rc.newest))
        rc.newest->run.younger = pg;
    else
        rc.oldest = pg;
    rc.newest = pg;
    rc.runs++;
    st_relaxed(&rc.pages, ld_relaxed(&rc.pages) + n);
    st_relaxed(&page_heap.active_pages, ld_relaxed(&page_heap.active_pages) - n);
    return true;
}

/* The shortest non-empty length in [n, hi], or 0. */
static unsigned shortest_from(unsigned n, unsigned hi)
{
    for (unsigned w = (n - 1) / 64; w < RC_WORDS && w * 64 < hi; w++) {
        uint64_t m = rc.nonempty[w];
        if (w == (n - 1) / 64)
            m &= ~0ull << ((n - 1) % 64);
        if (m) {
            unsigned len = w * 64 + (unsigned)__builtin_ctzll(m) + 1;
            return len <= hi ? len : 0;
        }
    }
    return 0;
}

void *runcache_take(unsigned n)
{
    if (!rc.runs || n > RC_MAX_PAGES)
        return NULL;
    unsigned hi = n + n / PCACHE_FIT_DIV;
    unsigned len = shortest_from(n, hi < RC_MAX_PAGES ? hi : RC_MAX_PAGES);
    if (!len)
        return NULL;
    /* of the newest RC_TAKE_SCAN, the one in the fullest block: sparse
     * blocks drain, as the buddy lists' fullest-first order makes them */
    struct page *pg = rc.head[len];
    unsigned k = 0;
    for (struct page *q = pg->run.next; q && ++k < RC_TAKE_SCAN; q = q->run.next)
        if (block_of(q)->free_pages < block_of(pg)->free_pages)
            pg = q;
    unlink_run(pg);
    stat_add(stats_global, STAT_runcache_take, 1);
    return page_addr(pg);
}


bool runcache_unpark_range(struct block *b, unsigned first, unsigned end)
{
    struct page *pg = block_pages(b);
    bool any = false;
    for (unsigned i = first; i < end && i < SL_BLOCK_PAGES;) {
        if (pg[i].h.kind == PG_FREE) {
            i += 1u << pg[i].h.order;
        } else if (pg[i].h.kind == PG_RUN && pg[i].run.parked) {
            unsigned n = pg[i].h.npages;
            give_back(&pg[i]);
            any = true;
            i += n;
        } else {
            break; /* a live run or a slab */
        }
    }
    return any;
}

size_t runcache_flush(void)
{
    size_t n = 0;
    while (runcache_flush_oldest())
        n++;
    return n;
}

unsigned runcache_take_old(uint64_t cutoff_ms, size_t max_pages, void **out, unsigned max)
{
    unsigned k = 0;
    size_t pages = 0;
    while (k < max && rc.oldest && rc.oldest->run.parked_ms <= cutoff_ms && pages < max_pages) {
        struct page *pg = rc.oldest;
        pages += pg->h.npages;
        unlink_run(pg);
        out[k++] = page_addr(pg);
    }
    return k;
}

#define FAIL(what, p, detail, num) sl_fatal("sl_check: " what, (p), (detail), (num))

void runcache_check(size_t parked_seen)
{
    size_t runs = 0, pages = 0;
    struct page *younger = NULL;
    for (struct page *pg = rc.newest; pg; younger = pg, pg = pg->run.older) {
        void *run = page_addr(pg);
        unsigned n = pg->h.npages;
        if (pg->h.kind != PG_RUN || !pg->run.parked || pg->run.req || !n || n > RC_MAX_PAGES ||
            pg->run.younger != younger || ++runs > rc.runs)
            FAIL("shared run cache holds a bad run:", run, "pages", n);
        if (block_of(run)->type != PB_RUN && sl_opt.antifrag)
            FAIL("shared run cache holds a run of a block not typed RUN:", run, "type", block_of(run)->type);
        if (younger && younger->run.parked_ms < pg->run.parked_ms)
            FAIL("shared run cache's age list out of order at", run, NULL, 0);
        pages += n;
    }
    if (runs != rc.runs || pages != ld_relaxed(&rc.pages) || parked_seen != runs)
        FAIL("shared run cache's counts wrong: runs", NULL, "listed", runs);
    for (unsigned n = 1; n <= RC_MAX_PAGES; n++) {
        bool bit = (rc.nonempty[(n - 1) / 64] >> ((n - 1) % 64)) & 1;
        if (bit != !!rc.head[n])
            FAIL("shared run cache's non-empty mask disagrees with a list:", NULL, "pages", n);
        struct page *prev = NULL;
        for (struct page *pg = rc.head[n]; pg; prev = pg, pg = pg->run.next)
            if (pg->h.npages != n || pg->run.prev != prev || !runs--)
                FAIL("shared run cache's length list broken:", page_addr(pg), "pages", n);
    }
    if (runs)
        FAIL("shared run cache: parked runs on no length list", NULL, "runs", runs);
}

/* The reclaim registry's entry (base/drain.h): parked runs go back to the
 * buddy lists, where they may merge into wholly free pageblocks. */
static void drain_run_cache(enum drain_depth depth, size_t want)
{
    (void)depth, (void)want;
    page_runcache_flush();
}
static size_t run_cache_held(void)
{
    struct page_gauges g;
    page_gauges(&g);
    return g.parked_pages << SL_PAGE_SHIFT;
}
DRAIN_REGISTER(run_cache_drain, .name = "run_cache", .order = DRAIN_RUN_CACHE,
               .depths = DRAIN_BOOST | DRAIN_PURGE | DRAIN_ENOMEM, .run = drain_run_cache, .held = run_cache_held);
