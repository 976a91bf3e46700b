/* page.h — the page layer: runs of pages from typed pageblocks, behind
 * small per-thread page caches (the kernel's per-CPU page lists) and, for
 * medium runs, the shared run cache (runcache.c), where runs that leave a
 * thread are parked whole, uncoalesced, for the next request of their
 * length (lazy coalescing).
 *
 * The shared page heap keeps, per pageblock type, lists of blocks bucketed
 * by how many pages they have free; wholly free blocks sit on their own list
 * (type PB_FREE). Allocation order for type t (the fallback table in page.c):
 *   0. a medium run: one parked in the shared run cache
 *   0b. a run of at most 64 pages that needs no alignment, when the
 *      buddy's chunk (step 1) is not resident: n dirty or lazy free pages
 *      in a row in one of t's blocks (place.c: resident_fit)
 *   1. t's own blocks, fullest bucket first (sparse blocks drain); then
 *      the parked runs, oldest first, back to the buddy lists until one
 *      merges into a chunk that fits
 *   2. a whole free pageblock, re-typed to t
 *   2b. a run that needs no alignment: n free pages in a row in one of
 *      t's blocks, across chunks that are not buddies (place.c:
 *      stretch_fit)
 *   3. a new pageblock from the OS, while the heap is within its budget
 *      (page_set_budget: SLUICE_HEAP_LIMIT, or the cgroup's limit)
 *   4. a piece of another type's block, the one with the largest free
 *      chunk: an external fragmentation event (a serious one when a SLAB
 *      or RECLAIM piece lands in a RUN or BUF block: long-lived objects
 *      then pin a block of transient buffers); taking from a block that
 *      is at least half free re-types it
 *   5. past the budget with no piece to take: a new pageblock all the same
 *      (ENOMEM only where the kernel refuses the mapping).
 *
 * Locks: page_heap.lock (LOCK_PAGE_HEAP in the one lock order,
 * base/lock.h). Nothing is unmapped under it: blocks to unmap wait until
 * page_heap_unlock has released it.
 */
#ifndef SL_PAGE_H
#define SL_PAGE_H

#include "../base/lock.h"
#include "../options/options.h"
#include "../stats/stats.h"
#include "block.h"
#include "pcache_budget.h"

#define PCACHE_MAX_PAGES 64 /* runs of 1..64 pages (256 KiB) are cached per thread */
#define PCACHE_DEPTH     16 /* runs parked per length (page.c: pcache_fit) */
#define PCACHE_SLAB_BATCH 4 /* slabs of one length taken per refill (one lock) */
#define PCACHE_FIT_DIV   4   /* a medium request may take a parked run up to 1/4 longer */

/* The stacks of a page cache: each holds runs of one kind from blocks of
 * one type (pcache.c: cache_stack), so that what it hands out goes back
 * where its type would have put it: slabs of SLAB blocks, medium runs,
 * and slabs of BUF blocks (antifrag.h: af_slab_type). */
enum pcache_stack { PCACHE_SLABS, PCACHE_RUNS, PCACHE_BUF_SLABS, PCACHE_TYPES };

/* Per-thread page cache. Owned by one thread; no lock. */
struct page_cache {
    uint8_t count[PCACHE_TYPES][PCACHE_MAX_PAGES + 1];
    void *runs[PCACHE_TYPES][PCACHE_MAX_PAGES + 1][PCACHE_DEPTH];
    uint64_t nonempty[PCACHE_TYPES]; /* bit n - 1: count[t][n] != 0 */
    unsigned pages;          /* pages parked here (owner writes, anyone reads) */
    struct pcache_budget budget; /* owner: budget.pages, the pages it may park (pcache_budget.h) */
    _Atomic uint64_t *stats; /* the owning heap's counters */
    /* PCACHE_RUNS: each parked run's run.seen (block.h), beside its slot,
     * so that a malloc looks for a run of its shape without reading the
     * runs' descriptors. Last: the rows of lengths no medium run has
     * (slabs' 1-8 pages) are never touched, nor is the rest of a small
     * program's heap moved onto another page. */
    uint32_t seen[PCACHE_MAX_PAGES + 1][PCACHE_DEPTH];
};

/* SLUICE_DIRTY_DECAY_MS=0 with purging on: every run is purged as it is
 * freed (purge.c), none is parked. */
sl_inline bool purge_at_once(void) { return sl_opt.purge != PURGE_OFF && sl_opt.dirty_decay_ms == 0; }

/* Park a run of n pages on stack ct (room checked by the caller), and
 * take the last one parked off a non-empty stack. */
sl_inline void pcache_push_seen(struct page_cache *pc, int ct, unsigned n, void *run, uint32_t seen)
{
    if (ct == PCACHE_RUNS)
        pc->seen[n][pc->count[ct][n]] = seen;
    pc->runs[ct][n][pc->count[ct][n]++] = run;
    __atomic_store_n(&pc->pages, pc->pages + n, __ATOMIC_RELAXED); /* the drains' held count reads it */
    pc->nonempty[ct] |= 1ull << (n - 1);
}

sl_inline void pcache_push(struct page_cache *pc, int ct, unsigned n, void *run)
{
    pcache_push_seen(pc, ct, n, run, ct == PCACHE_RUNS ? page_of(run)->run.seen : 0);
}

sl_inline void *pcache_pop(struct page_cache *pc, int ct, unsigned n)
{
    void *r = pc->runs[ct][n][--pc->count[ct][n]];
    __atomic_store_n(&pc->pages, pc->pages - n, __ATOMIC_RELAXED);
    if (!pc->count[ct][n])
        pc->nonempty[ct] &= ~(1ull << (n - 1));
    return r;
}

/* A medium run a little longer than n pages (n < PCACHE_MAX_PAGES) parked
 * on the runs' stack: the shortest of n + 1 .. n + n / PCACHE_FIT_DIV
 * pages, or 0. Medium lengths vary with the requests, so an exact match is
 * rare; handing out a run up to a quarter longer whole (its head keeps its
 * real length: usable size, resize and free all see it) saves a trip to
 * the shared heap and a buddy split and merge. Measured on 1000 live runs
 * of 32-256 KiB replaced at random (callgrind, bench_sizes 0.5 4 less
 * bench_sizes 0.25 4): 1,222 -> 789 instructions per replacement;
 * page-heap refills halved. Runs of 4-7 pages (16-28 KiB) may take one
 * page more too: with PCACHE_DEPTH 16 (was 8), 4-32 KiB objects replaced
 * at random (bench_sizes 0.5 3 less 0.25 3) went from 336 to 282
 * instructions a replacement, page-heap refills from 64,444 to 17,593 and
 * drains from 16,406 to 2,176 (bench_sizes 1 3). */
/* the fit's lengths per n, a table (one load) instead of the bounds' arithmetic */
#define PCACHE_FIT_HI(n)   ((n) + (n) / PCACHE_FIT_DIV > PCACHE_MAX_PAGES ? PCACHE_MAX_PAGES : (n) + (n) / PCACHE_FIT_DIV)
#define PCACHE_FIT_MASK(n) ((1ull << (PCACHE_FIT_HI(n) - (n))) - 1) /* bit i: n + 1 + i pages */
extern const uint64_t pcache_fit_mask[PCACHE_MAX_PAGES]; /* PCACHE_FIT_MASK of 0..63 (pcache.c) */
sl_inline unsigned pcache_fit_run(const struct page_cache *pc, unsigned n)
{
    uint64_t want = (pc->nonempty[PCACHE_RUNS] >> n) & pcache_fit_mask[n]; /* bit 0: n + 1 pages */
    return want ? n + 1 + (unsigned)__builtin_ctzll(want) : 0;
}

/* Which parked run a medium malloc of q pages (a run of n, q rounded up:
 * heap_run_pages) takes: one that held a request of q pages before
 * (run.seen), since the pages its holder wrote are resident. A program
 * that writes its buffers whole, or only their ends, then touches no page
 * it did not touch before; a run that held a longer request is resident
 * as far as its holder wrote, but the program's last page lands in the
 * middle of it. bench_sizes 1 4 (1000 live objects of 32-256 KiB, each
 * new one written at its first and last byte): a run that held another
 * length faulted its last page in one time in 30 (a run of the request's
 * length) and one in 4 (a longer run, the fit below); page faults 16,854
 * -> 14,180 in all (tcmalloc 14,045, whose objects of one size class keep
 * their places), peak RSS 68.1 -> 57.4 MB.
 *
 * The fast path: the newest run of n pages, if it held q pages, or NULL:
 * then page_cache_pop_run_slow. n - q < 4 for n <= PCACHE_MAX_PAGES. */
sl_inline void *page_cache_pop_run(struct page_cache *pc, size_t n, size_t q)
{
    if (n > PCACHE_MAX_PAGES)
        return NULL;
    unsigned c = pc->count[PCACHE_RUNS][n];
    if (!c || !((pc->seen[n][c - 1] >> (n - q)) & 1))
        return NULL;
    return pcache_pop(pc, PCACHE_RUNS, (unsigned)n);
}
/* Past the fast path (n <= PCACHE_MAX_PAGES): the newest run of n pages
 * that held q, else the newest of n pages, else the newest that held q
 * of each longer length up to a quarter longer (pcache_fit_run), shortest
 * first, else the newest of the shortest longer length; or NULL (then
 * page_alloc). A longer run of the request's shape taken before a run of
 * its length that is not (faults 13,480 at bench_sizes 1 4) lets runs
 * grow longer than their requests: at 4 4 the page cache went to the
 * shared heap 62,695 times instead of 33,263, 7% more CPU time than
 * before this choice; this order is within 1% of it at 4 4, 5% below it
 * at 2 4 and 12% below at 1 4 (docs/benchmarks/sizes.md, fifth round). */
void *page_cache_pop_run_slow(struct page_cache *pc, unsigned n, unsigned q);

/* The fast path of a medium run's free: park the run (head pg, PG_RUN) in
 * the thread's page cache if its stack and the budget have room; false
 * otherwise (then page_free). A run whose block was re-typed goes to the
 * shared heap (page.c: cache_stack). */
sl_inline bool page_cache_push_run(struct page_cache *pc, void *run, struct page *pg)
{
    unsigned n = pg->h.npages;
    if (n > PCACHE_MAX_PAGES || pc->count[PCACHE_RUNS][n] >= PCACHE_DEPTH || pc->pages + n > pc->budget.pages ||
        (__atomic_load_n(&block_of(run)->type, __ATOMIC_RELAXED) != PB_RUN && sl_opt.antifrag) || purge_at_once())
        return false;
    pcache_push_seen(pc, PCACHE_RUNS, n, run, pg->run.seen);
    return true;
}

/* A run of npages pages, aligned to align_pages pages (power of two), in a
 * block of `type`, its head descriptor marked `kind`. NULL + ENOMEM.
 * *clean (if clean is not NULL): every page is known to read as zero. */
void *page_alloc(struct page_cache *pc, enum pb_type type, size_t npages, size_t align_pages, enum page_kind kind,
                 bool *clean);
/* Free a run returned by page_alloc (its head descriptor knows the length). */
void page_free(struct page_cache *pc, void *run);
/* Grow or shrink an allocated run in place; false if it cannot grow. */
bool page_resize(void *run, size_t new_npages);
void page_cache_drain(struct page_cache *pc);
/* A new thread heap's cache (zeroed memory): empty, at the least budget. */
void page_cache_init(struct page_cache *pc, _Atomic uint64_t *stats);
/* Give every run parked in the shared run cache (runcache.c) back to the
 * buddy lists, so they may merge (a watermark boost). */
void page_runcache_flush(void);
/* A fork child: forget a cache its thread may have left mid-push (its runs
 * stay mapped, unused, in this process) rather than trust it. */
void page_cache_forget(struct page_cache *pc);

/* The heap budget in bytes of pageblocks, the user-space twin of the
 * kernel's finite memory: within it a type short of room maps a new block,
 * beyond it it falls back to a piece of another type's block first.
 * 0: no budget (the default without SLUICE_HEAP_LIMIT or a cgroup limit). */
void page_set_budget(size_t bytes);

/* Gauges for the stats, taken under the lock. */
struct page_gauges {
    size_t blocks, free_blocks, free_pages, dirty_pages, lazy_pages, budget, thp_blocks, thp_dirty_pages;
    size_t parked_pages; /* of free_pages and dirty_pages, in the shared run cache */
    size_t blocks_by_type[PB_NTYPES];
};
void page_gauges(struct page_gauges *g);

/* Purging (page/purge.c; when: page/purge_decay.c): free pages go dirty -> lazy -> clean.
 * page_purge_decay: pages dirty for longer than the dirty decay are purged
 * (MADV_FREE, or MADV_DONTNEED in dontneed mode); pages lazy for longer
 * than the lazy decay are made clean. force: all of them, whatever their
 * age (memory pressure). page_purge_all: everything free becomes clean and
 * every wholly free pageblock is unmapped (sl_purge). */
void page_purge_decay(uint64_t now_ms, bool force);
/* madvise [p, p + bytes) towards `to` (PS_LAZY or PS_CLEAN), counted in the
 * stats; returns the state the pages are in now (PS_DIRTY if refused). */
enum page_state page_advise(void *p, size_t bytes, enum page_state to);
void page_purge_all(void);
/* Unmap the wholly free pageblocks, all of them (the shared run cache's
 * parked runs given back first) or those beyond the number
 * kept, but those a hugepage pass has pinned (they decay once it is done):
 * a new huge mapping takes back those beyond the number kept first (memory
 * that the pageblocks would keep resident until their decay), and a
 * refused one all of them before it tries again. Returns how many. */
size_t page_release_free_blocks(bool all);
/* The reclaimer's hugepage pass (hugify.c): collapse up to max dense,
 * long-lived pageblocks into transparent hugepages (MADV_COLLAPSE; a
 * pass takes at most HUGIFY_BATCH); go_on, if given, is asked between
 * collapses whether to continue. */
void page_hugify(uint64_t now_ms, unsigned max, bool (*go_on)(void));
/* Around a bulk release (sl_purge, sl_cache_destroy) by this thread: the
 * pageblocks it frees are given back together at the end (those beyond the
 * number of free blocks kept; others wait for the decay), neighbours as
 * one range, so that big ones go to the teardown queue; call the end with
 * no sluice lock held. Nests. */
void page_gather_begin(void);
void page_gather_end(void);
bool page_purge_pending(void); /* any dirty or lazy pages? */
/* Pages of pageblocks handed out (slabs, runs, parked runs): what the
 * dirty cap is an eighth of (decay.h). Read without the lock. */
size_t page_active_pages(void);
/* The pageblocks' free pages kept resident that a purge may advise: dirty
 * (not in a dense hugepage block, parked runs included) and lazy. Read
 * without the lock (the huge cache's share of the dirty cap, decay.h). */
size_t page_resident_free_pages(void);
/* The heap grows (a pageblock mapped, or a huge mapping about to be): hold
 * the resident free pages to the dirty cap now, lazy first, then the dirty
 * ones past the tick's grace, with MADV_DONTNEED (decay_growth_clean).
 * No lock held. */
void page_purge_growth(void);
/* The drop policy (decay.h) for memory the page layer does not hold: a
 * huge mapping is a drop by itself when freed (2 MiB or more of live
 * memory gone at once), and with no reclaimer nothing would decay it
 * later. May it be advised at once (no reclaimer running, purging on, no
 * regret backoff)? The caller then advises it and says so
 * (purge_drop_advised); taking advised memory back counts towards a
 * regret (purge_taken_back), and an allocation that grows the live
 * memory says so (purge_drop_grew). */
bool purge_drop_free(void);
void purge_drop_advised(size_t pages);
void purge_taken_back(size_t pages);
void purge_drop_grew(void);
void purge_fork_child(void);
/* The reclaimer is started and woken through sl_events (base/events.h),
 * outside every lock: reclaimer_start when there is something to decay
 * (false: ask again later), reclaimer_kick when a big free leaves dirty
 * pages far over the cap (false if there is no reclaimer: the freeing
 * thread then enforces the cap itself, at most once per tick). */
/* Start the reclaimer now if the program may have one (a slow path, no
 * lock held): the boost's work cannot wait for dirty pages to start it. */
void page_start_reclaimer(void);
/* Start the reclaimer as above, and end its idle sleep (at most once a
 * tick): the slab layer has slabs for it to look at (slab/notify.c). */
void page_wake_reclaimer(void);
/* The reclaimer gave back slabs that idle owners left (slab/notify.c): a
 * drop that needs no guess, since their owners idle, so the dirty pages
 * are purged down to the cap now, with no grace, unless the last drops'
 * purges were regretted (decay_drop_backoff). */
void page_purge_taken(void);

/* Watermark boost (page.c; the work is reclaim/boost.c). Blocks of
 * headroom the reclaimer should win back now (0: none wanted, or no
 * budget, or SLUICE_BOOST=0). */
size_t page_boost_deficit(bool *urgent);
size_t page_budget_blocks(void); /* the heap budget in pageblocks (0: none) */
/* Owners drain their page caches and spare slabs on their next slow path
 * once this number changes (slab/page_heap.h, heap_boost_check). */
extern _Atomic uint32_t page_boost_gen_word;
void page_boost_ask_owners(void);

/* sl_check's part for the page layer (page_check.c): checks every
 * pageblock and hands each allocated run's head to run (both locks held);
 * reports and aborts on the first broken invariant. */
void page_check(void (*run)(struct page *head, void *arg), void *arg);
/* Each allocated run's head, for the statistics (page heap lock held). */
void page_walk_runs(void (*fn)(struct page *head, void *arg), void *arg);

/* The locks fork's handlers take (api/init.c has the order). */
sl_lock *page_fork_lock(void);
sl_lock *purge_fork_lock(void);

#endif
