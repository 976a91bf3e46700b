/* purge.c — the purge mechanism for pageblock memory: free pages go dirty
 * -> lazy -> clean (block.h has the per-page states), as the decay policy
 * (decay.h: the dirty cap, the decay, the tick, the burst) decides.
 *
 * Why the cap is enforced once per tick and only in blocks not dirtied
 * within it: enforcing it on every free made a program that frees and
 * reallocates more than the cap per cycle advise the same pages over and
 * over (measured: 139,000 MADV_FREE calls, 2x the time, on bench/sizes);
 * so did enforcing it on every big free (17,504 calls advising 2.2 GB in
 * 0.5 s, twice the time of SLUICE_PURGE=off, on bench/mixed). With no
 * reclaimer (a single-threaded program) a big free purges down to the cap
 * on the freeing thread, without the grace, at most once per tick; the
 * allocation slow paths run the decay when it is due, so a program that
 * never sleeps still returns memory. SLUICE_DIRTY_DECAY_MS=0 purges every
 * freed run before its pages go back on the free lists.
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
#include "../base/events.h"
#include "../options/options.h"
#include "../os/os.h"
#include "decay.h"
#include "page_heap.h"

#define PURGE_BATCH     32  /* spans advised per lock round trip */

/* One purger at a time: spans are off the free lists while it advises
 * them, and fork's prepare handler takes this lock so a child never
 * inherits a span in flight. Order: after heaps_lock and huge_lock,
 * before the page heap lock. */
static SL_LOCK_DEFINE(purge_lock, LOCK_PURGE);
static _Atomic int start_fired; /* sl_events.reclaimer_start said settled, or is being asked */
static _Atomic uint64_t last_decay_ms, last_burst_ms, last_hugify_ms;
/* The drop policy's state (decay_drop, decay_drop_backoff): written by
 * the thread that won last_burst_ms, read by any; approximate is fine. */
static _Atomic size_t active_high;     /* active pages' high since the last burst purge */
static _Atomic bool grew;              /* the active pages rose past it since the last drop purge */
static _Atomic size_t drop_purged;     /* pages advised by the last drop's purges */
static _Atomic size_t drop_lazy_mark;  /* page_heap.lazy_taken when that drop began */
static _Atomic uint64_t drop_backoff_ms, drop_quiet_until_ms;
#define HUGIFY_EVERY_MS 1000 /* a slow path looks for dense blocks this often */

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
    st_relaxed(&page_heap.lazy_taken, ld_relaxed(&page_heap.lazy_taken) + (l0 - b->nlazy));
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

bool purge_kick_reclaimer(void) { return sl_events.reclaimer_kick && sl_events.reclaimer_kick(); }

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
static size_t purge_spans(enum page_state from, enum page_state to, uint64_t cutoff_ms, size_t max_pages, bool wait)
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
        enum page_state got[PURGE_BATCH];
        bool refused = false; /* the kernel said no: stop, or the same spans come round again */
        for (unsigned i = 0; i < k; i++) {
            if (!sp[i].b)
                continue;
            got[i] = page_advise((uint8_t *)sp[i].b + ((size_t)sp[i].first << SL_PAGE_SHIFT),
                                 (size_t)sp[i].n << SL_PAGE_SHIFT, to);
            refused |= got[i] == PS_DIRTY;
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
static size_t purge_parked(enum page_state to, uint64_t cutoff_ms, size_t max_pages, bool wait)
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
        bool refused = false;
        for (unsigned i = 0; i < k; i++) { /* the runs are ours until given back */
            struct page *pg = page_of(runs[i]);
            unsigned first = (unsigned)(pg - block_pages(block_of(runs[i]))), n = pg->h.npages;
            got[i] = page_advise(runs[i], (size_t)n << SL_PAGE_SHIFT, to);
            refused |= got[i] == PS_DIRTY;
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

/* The decay policy (decay.h) with this process's options and counts. */
static enum page_state purge_target(void) { return decay_target(sl_opt.purge); }
static uint64_t tick_ms(void) { return decay_tick_ms(sl_opt.dirty_decay_ms, sl_opt.lazy_decay_ms); }
size_t purge_dirty_cap(void) { return decay_dirty_cap(ld_relaxed(&page_heap.active_pages)); }

/* Purge dirty pages down to the cap, largest spans first, in blocks that
 * saw no new dirty page since cutoff_ms (a block being churned reuses its
 * dirty pages within milliseconds; purging them only costs madvise calls).
 * Returns the pages advised. */
static size_t enforce_cap(size_t dirty, size_t cap, uint64_t cutoff_ms, bool wait)
{
    if (dirty <= cap)
        return 0;
    size_t done = purge_spans(PS_DIRTY, purge_target(), cutoff_ms, dirty - cap, wait);
    if (done < dirty - cap) /* parked runs last: they are the ones reused whole */
        done += purge_parked(purge_target(), cutoff_ms, dirty - cap - done, wait);
    return done;
}

static void decay(uint64_t now, bool force, bool wait)
{
    if (sl_opt.purge == PURGE_OFF)
        return;
    uint64_t dd = (uint64_t)sl_opt.dirty_decay_ms, ld = (uint64_t)sl_opt.lazy_decay_ms;
    if (force) { /* memory pressure: straight to clean */
        purge_parked(PS_CLEAN, UINT64_MAX, SIZE_MAX, wait);
        purge_spans(PS_DIRTY, PS_CLEAN, UINT64_MAX, SIZE_MAX, wait);
        purge_spans(PS_LAZY, PS_CLEAN, UINT64_MAX, SIZE_MAX, wait);
        return;
    }
    purge_spans(PS_DIRTY, purge_target(), decay_cutoff(now, dd), SIZE_MAX, wait);
    purge_parked(purge_target(), decay_cutoff(now, dd), SIZE_MAX, wait);
    enforce_cap(purgeable_dirty(), purge_dirty_cap(), now - tick_ms(), wait);
    if (sl_opt.purge != PURGE_FREE)
        return;
    purge_spans(PS_LAZY, PS_CLEAN, decay_cutoff(now, ld), SIZE_MAX, wait);
    /* lazy pages count in the RSS: those over the cap with the dirty ones
     * (decay_growth_clean), lazy for a tick already, are made clean */
    size_t over = decay_growth_clean(purgeable_dirty(), ld_relaxed(&page_heap.lazy_pages),
                                     ld_relaxed(&page_heap.active_pages)).lazy;
    if (over)
        purge_spans(PS_LAZY, PS_CLEAN, now - tick_ms(), over, wait);
}

void page_purge_decay(uint64_t now, bool force) { decay(now, force, true); }

void page_hugify(uint64_t now, unsigned max, bool (*go_on)(void)) { hugify(now, true, max, go_on); }

bool page_purge_pending(void) { return purgeable_dirty() || ld_relaxed(&page_heap.lazy_pages); }

void page_purge_all(void)
{
    page_release_free_blocks(true); /* the parked runs too */
    purge_spans(PS_DIRTY, PS_CLEAN, UINT64_MAX, SIZE_MAX, true);
    purge_spans(PS_LAZY, PS_CLEAN, UINT64_MAX, SIZE_MAX, true);
    /* a block whose spans another purger (the reclaimer's decay) had off
     * the free lists at the first release is wholly free again by now:
     * the waits above came after that purger */
    page_release_free_blocks(true);
}

/* Growth (decay_growth_clean): once per pageblock mapped, seen by the
 * allocation paths after the page heap lock (one load and a compare of
 * the block_map counter), the free pages kept resident are held to the
 * dirty cap: lazy ones made clean first, then dirty ones past the tick's
 * grace, both with MADV_DONTNEED. Bounded by the blocks mapped (a
 * program maps each of its blocks once, or again after the decay unmapped
 * it), so a churning heap that maps nothing pays nothing. wait: false,
 * as a big free's burst: if another thread purges, it is left to it. */
static _Atomic uint64_t growth_seen; /* block_map when purge_growth last looked */

void purge_growth(void)
{
    uint64_t b = atomic_load_explicit(&stats_global[STAT_block_map], memory_order_relaxed);
    if (likely(b == ld_relaxed(&growth_seen)))
        return;
    st_relaxed(&growth_seen, b);
    if (sl_opt.purge == PURGE_OFF)
        return;
    struct growth_clean c = decay_growth_clean(purgeable_dirty(), ld_relaxed(&page_heap.lazy_pages),
                                               ld_relaxed(&page_heap.active_pages));
    if (c.lazy)
        c.dirty += c.lazy - purge_spans(PS_LAZY, PS_CLEAN, UINT64_MAX, c.lazy, false);
    if (c.dirty) {
        uint64_t cutoff = os_now_ms() - tick_ms();
        size_t done = purge_spans(PS_DIRTY, PS_CLEAN, cutoff, c.dirty, false);
        if (done < c.dirty)
            purge_parked(PS_CLEAN, cutoff, c.dirty - done, false);
    }
}

/* A big free's wake-up of the reclaimer, at most once per tick: its pass
 * purges down to the cap what has waited out the grace, so a burst that
 * outlasts the grace would otherwise wake it on every slow path for
 * nothing (mstress: about 200 wakes a run, each a pass with its /proc
 * reads, and no advice). True if a reclaimer runs (it has been told, or
 * was told within the tick). */
static _Atomic uint64_t last_kick_ms;
static bool burst_kick_reclaimer(void)
{
    if (!sl_events.reclaimer_running || !sl_events.reclaimer_running())
        return false;
    uint64_t now = os_now_ms(), last = ld_relaxed(&last_kick_ms);
    if (now - last < tick_ms() ||
        !atomic_compare_exchange_strong_explicit(&last_kick_ms, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return true;
    return purge_kick_reclaimer();
}

/* A big free with no reclaimer to wake (a single-threaded program): the
 * freeing thread purges down to the cap itself, grace or not, so that a
 * program that frees a lot and then goes idle does not keep it dirty. At
 * most once per tick, so that a program that frees and takes back more
 * than the cap over and over pays one purge per tick, not one per free;
 * but at once on a drop (decay_drop): the frees of a program that drops
 * most of its heap in less than a tick may be its last. */
/* May a drop purge now? Judges the last drops' purges by what the program
 * took back since (decay_drop_backoff): a regret starts a backoff, during
 * which drops purge nothing; after a growth, a drop not regretted starts
 * afresh. */
static bool drop_may_purge(uint64_t now)
{
    if (now < ld_relaxed(&drop_quiet_until_ms))
        return false;
    size_t taken = ld_relaxed(&page_heap.lazy_taken);
    uint64_t b = decay_drop_backoff(ld_relaxed(&drop_backoff_ms), ld_relaxed(&drop_purged),
                                    taken - ld_relaxed(&drop_lazy_mark), tick_ms());
    if (b || ld_relaxed(&grew)) { /* judged: start counting afresh */
        st_relaxed(&grew, false);
        st_relaxed(&drop_backoff_ms, b);
        st_relaxed(&drop_purged, 0);
        st_relaxed(&drop_lazy_mark, taken);
    }
    if (b) {
        st_relaxed(&drop_quiet_until_ms, now + b);
        stat_add_shared(STAT_drop_regret, 1);
        return false;
    }
    stat_add_shared(STAT_drop_purge, 1);
    st_relaxed(&page_heap.drops, ld_relaxed(&page_heap.drops) + 1); /* page caches shrink (pcache_budget.h) */
    return true;
}

static bool no_reclaimer(void) { return !(sl_events.reclaimer_running && sl_events.reclaimer_running()); }

static void burst_in_thread(size_t dirty, size_t active, bool drop)
{
    uint64_t now = os_now_ms(), last = ld_relaxed(&last_burst_ms);
    bool tick_due = now - last >= tick_ms();
    if ((!tick_due && !drop) ||
        !atomic_compare_exchange_strong_explicit(&last_burst_ms, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    st_relaxed(&active_high, active);
    if (drop && drop_may_purge(now))
        st_relaxed(&drop_purged, ld_relaxed(&drop_purged) + enforce_cap(dirty, 0, UINT64_MAX, false));
    else if (tick_due)
        enforce_cap(dirty, purge_dirty_cap(), UINT64_MAX, false);
}

bool purge_drop_free(void)
{
    return sl_opt.purge != PURGE_OFF && no_reclaimer() && drop_may_purge(os_now_ms());
}

void page_purge_taken(void)
{
    if (sl_opt.purge == PURGE_OFF || !drop_may_purge(os_now_ms()))
        return;
    purge_drop_advised(enforce_cap(purgeable_dirty(), purge_dirty_cap(), UINT64_MAX, true));
}

void purge_drop_advised(size_t pages) { st_relaxed(&drop_purged, ld_relaxed(&drop_purged) + pages); }

void purge_drop_grew(void) { st_relaxed(&grew, true); }

void purge_lazy_taken(size_t pages) { st_relaxed(&page_heap.lazy_taken, ld_relaxed(&page_heap.lazy_taken) + pages); }

/* sl_events.reclaimer_start says false while the reclaimer should wait (a
 * program that is still single-threaded): asked again on a later slow path. */
static void start_reclaimer(void)
{
    if (sl_events.reclaimer_start && !ld_relaxed(&start_fired) && !atomic_exchange(&start_fired, 1) &&
        !sl_events.reclaimer_start())
        st_relaxed(&start_fired, 0);
}

void page_start_reclaimer(void) { start_reclaimer(); }

void page_wake_reclaimer(void)
{
    start_reclaimer();
    burst_kick_reclaimer();
}

void purge_maybe(void)
{
    if (sl_opt.publish) /* SLUICE_PUBLISH: the reclaimer writes the statistics from the start */
        start_reclaimer();
    if (sl_opt.purge == PURGE_OFF)
        return;
    uint64_t now = os_now_ms(), last = ld_relaxed(&last_hugify_ms);
    /* no reclaimer: the slow path advises dense blocks, khugepaged copies */
    if (sl_opt.thp != THP_NEVER && now - last >= HUGIFY_EVERY_MS && !(sl_events.reclaimer_running && sl_events.reclaimer_running()) &&
        atomic_compare_exchange_strong_explicit(&last_hugify_ms, &last, now, memory_order_relaxed,
                                                memory_order_relaxed))
        hugify(now, false, UINT32_MAX, NULL);
    size_t dirty = purgeable_dirty(), active = ld_relaxed(&page_heap.active_pages);
    if (active > ld_relaxed(&active_high)) {
        st_relaxed(&active_high, active);
        st_relaxed(&grew, true);
    }
    size_t cap = purge_dirty_cap();
    bool drop = dirty > cap && decay_drop(active, ld_relaxed(&active_high));
    if (purge_at_once())
        enforce_cap(dirty, 0, UINT64_MAX, true);
    else if ((drop || decay_burst(dirty, cap)) && !burst_kick_reclaimer())
        burst_in_thread(dirty, active, drop);
    if (!dirty && !ld_relaxed(&page_heap.lazy_pages))
        return;
    last = ld_relaxed(&last_decay_ms);
    if (now - last >= tick_ms() &&
        atomic_compare_exchange_strong_explicit(&last_decay_ms, &last, now, memory_order_relaxed,
                                                memory_order_relaxed))
        decay(now, false, false);
    start_reclaimer();
}

sl_lock *purge_fork_lock(void) { return &purge_lock; }
/* After fork the child has no reclaimer thread: let reclaimer_start be asked again. */
void purge_fork_child(void)
{
    st_relaxed(&start_fired, 0);
    hugify_fork_child();
}

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
