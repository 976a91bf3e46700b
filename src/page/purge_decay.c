/* purge_decay.c — when pageblock memory is purged: the decay pass (by the
 * reclaimer, or by a slow path once per tick), the dirty cap, a big free's
 * burst, a drop and growth (a new pageblock mapped while free pages are
 * kept resident) (decay.h's pure policy with this process's options,
 * counts and clock); and the reclaimer's start and wake-up, which the
 * slow paths ask for here. purge.c does the purging.
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
 * Where advised pages go (decay_advise_plan): at the tick, what is over
 * the cap, counting the lazy pages, goes clean, and only what the cap
 * keeps goes lazy; the cap comes before the dirty decay, so that the
 * decay makes lazy only what the cap keeps. MADV_FREE'd pages count in
 * the RSS until the kernel runs short of memory: dirty pages over the
 * cap went lazy at one tick and clean only at the next, resident all the
 * while (docs/benchmarks/gcc-rss.md). A drop and a burst still advise
 * MADV_FREE: what they free is taken back soon as often as not.
 */

#include "../base/events.h"
#include "../options/options.h"
#include "../os/os.h"
#include "decay.h"
#include "page_heap.h"

static _Atomic int start_fired; /* sl_events.reclaimer_start said settled, or is being asked */
static _Atomic uint64_t last_decay_ms, last_burst_ms, last_hugify_ms;
/* The drop policy's state (decay_drop, decay_drop_backoff): written by
 * the thread that won last_burst_ms, read by any; approximate is fine. */
static _Atomic size_t active_high;     /* active pages' high since the last burst purge */
static _Atomic bool grew;              /* the active pages rose past it since the last drop purge */
static _Atomic size_t drop_purged;     /* pages advised by the last drop's purges */
static _Atomic size_t drop_taken_mark;  /* page_heap.taken_back when that drop began */
static _Atomic uint64_t drop_backoff_ms, drop_quiet_until_ms;
#define HUGIFY_EVERY_MS 1000 /* a slow path looks for dense blocks this often */

bool purge_kick_reclaimer(void) { return sl_events.reclaimer_kick && sl_events.reclaimer_kick(); }

/* The decay policy (decay.h) with this process's options and counts. */
static enum page_state purge_target(void) { return decay_target(sl_opt.purge); }
static uint64_t tick_ms(void) { return decay_tick_ms(sl_opt.dirty_decay_ms, sl_opt.lazy_decay_ms); }
size_t purge_dirty_cap(void) { return decay_dirty_cap(ld_relaxed(&page_heap.active_pages)); }

/* Advise up to n dirty pages to state `to`, largest spans first, in
 * blocks that saw no new dirty page since cutoff_ms (a block being
 * churned reuses its dirty pages within milliseconds; purging them only
 * costs madvise calls), parked runs last (they are the ones reused
 * whole). Returns the pages advised. */
static size_t advise_dirty(size_t n, enum page_state to, uint64_t cutoff_ms, bool wait)
{
    if (!n)
        return 0;
    size_t done = purge_spans(PS_DIRTY, to, cutoff_ms, n, wait);
    if (done < n)
        done += purge_parked(to, cutoff_ms, n - done, wait);
    return done;
}

/* Hold dirty and lazy pages to the cap (decay_advise_plan): what is over
 * it made clean, the lazy ones first (those lazy since lazy_cutoff_ms),
 * then the dirty ones in blocks not dirtied since cutoff_ms. Returns the
 * dirty pages advised. */
static size_t enforce_cap(uint64_t cutoff_ms, uint64_t lazy_cutoff_ms, bool wait)
{
    struct advise_plan p = decay_advise_plan(purgeable_dirty(), ld_relaxed(&page_heap.lazy_pages),
                                             ld_relaxed(&page_heap.active_pages), purge_dirty_cap(),
                                             purge_target() == PS_LAZY);
    if (p.lazy_clean)
        p.dirty_clean += decay_clean_shortfall(p.lazy_clean,
                                               purge_spans(PS_LAZY, PS_CLEAN, lazy_cutoff_ms, p.lazy_clean, wait));
    size_t done = advise_dirty(p.dirty_clean, PS_CLEAN, cutoff_ms, wait);
    return done + advise_dirty(p.dirty_lazy, PS_LAZY, cutoff_ms, wait);
}

static void decay(uint64_t now, bool force, bool wait)
{
    if (sl_opt.purge == PURGE_OFF)
        return;
    uint64_t dd = (uint64_t)sl_opt.dirty_decay_ms, ld = (uint64_t)sl_opt.lazy_decay_ms;
    if (force) { /* memory pressure: straight to clean, hugepages split */
        hugify_split_all();
        purge_parked(PS_CLEAN, UINT64_MAX, SIZE_MAX, wait);
        purge_spans(PS_DIRTY, PS_CLEAN, UINT64_MAX, SIZE_MAX, wait);
        purge_spans(PS_LAZY, PS_CLEAN, UINT64_MAX, SIZE_MAX, wait);
        return;
    }
    /* lazy pages count in the RSS: with the dirty ones, held to the cap,
     * what is over it made clean, the dirty ones and the lazy ones past the
     * tick's grace (lazy ones taken back within a tick cost no fault);
     * first, so that the dirty decay below makes lazy only what the cap
     * keeps */
    enforce_cap(now - tick_ms(), now - tick_ms(), wait);
    purge_spans(PS_DIRTY, purge_target(), decay_cutoff(now, dd), SIZE_MAX, wait);
    purge_parked(purge_target(), decay_cutoff(now, dd), SIZE_MAX, wait);
    if (sl_opt.purge == PURGE_FREE)
        purge_spans(PS_LAZY, PS_CLEAN, decay_cutoff(now, ld), SIZE_MAX, wait);
}

void page_purge_decay(uint64_t now, bool force) { decay(now, force, true); }

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
    page_purge_growth();
}

void page_purge_growth(void)
{
    if (sl_opt.purge == PURGE_OFF)
        return;
    struct growth_clean c = decay_growth_clean(purgeable_dirty(), ld_relaxed(&page_heap.lazy_pages),
                                               ld_relaxed(&page_heap.active_pages));
    if (c.lazy)
        c.dirty += decay_clean_shortfall(c.lazy, purge_spans(PS_LAZY, PS_CLEAN, UINT64_MAX, c.lazy, false));
    advise_dirty(c.dirty, PS_CLEAN, os_now_ms() - tick_ms(), false);
}

size_t page_resident_free_pages(void) { return purgeable_dirty() + ld_relaxed(&page_heap.lazy_pages); }


bool page_purge_pending(void) { return purgeable_dirty() || ld_relaxed(&page_heap.lazy_pages); }

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


/* May a drop purge now? Judges the last drops' purges by what the program
 * took back since (decay_drop_backoff): a regret starts a backoff, during
 * which drops purge nothing; after a growth, a drop not regretted starts
 * afresh. */
static bool drop_may_purge(uint64_t now)
{
    if (now < ld_relaxed(&drop_quiet_until_ms))
        return false;
    size_t taken = ld_relaxed(&page_heap.taken_back);
    uint64_t b = decay_drop_backoff(ld_relaxed(&drop_backoff_ms), ld_relaxed(&drop_purged),
                                    taken - ld_relaxed(&drop_taken_mark), tick_ms());
    if (b || ld_relaxed(&grew)) { /* judged: start counting afresh */
        st_relaxed(&grew, false);
        st_relaxed(&drop_backoff_ms, b);
        st_relaxed(&drop_purged, 0);
        st_relaxed(&drop_taken_mark, taken);
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

/* A big free with no reclaimer to wake (a single-threaded program): the
 * freeing thread purges down to the cap itself, grace or not, so that a
 * program that frees a lot and then goes idle does not keep it dirty. At
 * most once per tick, so that a program that frees and takes back more
 * than the cap over and over pays one purge per tick, not one per free;
 * but at once on a drop (decay_drop): the frees of a program that drops
 * most of its heap in less than a tick may be its last. */
static void burst_in_thread(size_t active, bool drop)
{
    uint64_t now = os_now_ms(), last = ld_relaxed(&last_burst_ms);
    bool tick_due = now - last >= tick_ms();
    if ((!tick_due && !drop) ||
        !atomic_compare_exchange_strong_explicit(&last_burst_ms, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    st_relaxed(&active_high, active);
    /* a drop advises every dirty page, a burst down to the cap, MADV_FREE
     * as the decay's target says: what is freed in a burst or a drop is
     * taken back soon as often as not (the drop's regret counts the lazy
     * pages taken back), and the tick makes what stays lazy over the cap
     * clean. Clean at once over the cap: bench_mixed faulted 10% more
     * (37,700 -> 41,550) for 1 MiB of peak, and the Python program of
     * bench/real_rss.py peaked 5% higher one run in five */
    size_t dirty = purgeable_dirty(), cap = purge_dirty_cap();
    if (drop && drop_may_purge(now))
        st_relaxed(&drop_purged, ld_relaxed(&drop_purged) + advise_dirty(dirty, purge_target(), UINT64_MAX, false));
    else if (tick_due && dirty > cap)
        advise_dirty(dirty - cap, purge_target(), UINT64_MAX, false);
}

bool purge_drop_free(void)
{
    return sl_opt.purge != PURGE_OFF && no_reclaimer() && drop_may_purge(os_now_ms());
}

void page_purge_taken(void)
{
    if (sl_opt.purge == PURGE_OFF || !drop_may_purge(os_now_ms()))
        return;
    size_t dirty = purgeable_dirty(), cap = purge_dirty_cap();
    if (dirty > cap)
        purge_drop_advised(advise_dirty(dirty - cap, purge_target(), UINT64_MAX, true));
}

void purge_drop_advised(size_t pages) { st_relaxed(&drop_purged, ld_relaxed(&drop_purged) + pages); }

void purge_drop_grew(void) { st_relaxed(&grew, true); }

/* page_heap.h: the high the next drop is judged against, less what a
 * shrinking page cache hands back (approximate, as the rest of the drop's
 * state) */
void purge_cache_shrank(size_t pages)
{
    size_t high = ld_relaxed(&active_high);
    st_relaxed(&active_high, high > pages ? high - pages : 0);
}

void purge_taken_back(size_t pages) { st_relaxed(&page_heap.taken_back, ld_relaxed(&page_heap.taken_back) + pages); }

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
    if (purge_at_once()) /* every free page advised, as the free that made it came */
        advise_dirty(dirty, purge_target(), UINT64_MAX, true);
    else if ((drop || decay_burst(dirty, cap)) && !burst_kick_reclaimer())
        burst_in_thread(active, drop);
    if (!dirty && !ld_relaxed(&page_heap.lazy_pages))
        return;
    last = ld_relaxed(&last_decay_ms);
    if (now - last >= tick_ms() &&
        atomic_compare_exchange_strong_explicit(&last_decay_ms, &last, now, memory_order_relaxed,
                                                memory_order_relaxed))
        decay(now, false, false);
    start_reclaimer();
}

/* After fork the child has no reclaimer thread: let reclaimer_start be asked again. */
void purge_fork_child(void)
{
    st_relaxed(&start_fired, 0);
    hugify_fork_child();
}
