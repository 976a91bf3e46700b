/* boost.c — the watermark boost's work, the kswapd/kcompactd share of
 * Mel Gorman's 2018 series in user space (docs/DESIGN.md).
 *
 * The page layer (page.c) keeps the watermarks and the boost: under a
 * heap budget, an external fragmentation event raises the boost and
 * wakes the reclaimer, and so does headroom (free pageblocks plus blocks
 * the budget still allows) falling under the low watermark. This file
 * wins whole free pageblocks back, so that the next type short of room
 * takes a whole block (no event) instead of a piece of another type's:
 *   1. the shrinkers of caches that have one (sl_cache_set_reclaim) are
 *      asked for objects worth the deficit (blocks short of the high
 *      watermark plus the boost);
 *   2. every thread heap is asked to give back, on its next allocation
 *      slow path, its page cache, its magazines' objects and its empty
 *      slabs (heap_boost_check): the owner does it, so nothing blocks;
 *   3. the heaps of exited threads are drained here;
 *   4. wholly free blocks then go back to the free list, and the decay
 *      pass purges what the boost freed.
 * Owners are asked every BOOST_PASS_MS while that wins room back, less
 * often while it does not (boost_pass_every), and after each shrink; the
 * shrinkers are paced by what their last ask achieved (shrink_due). The
 * reclaimer runs a boost pass first and alone on each wake (reclaimer.c):
 * on busy cores anything before it delays it by a time slice.
 *
 * Shrinkers run only on the reclaimer thread (and in sl_purge's caller):
 * a shrinker takes its cache's own lock, and an allocating thread may
 * hold that lock while it calls malloc. With no reclaimer (a
 * single-threaded program), an allocating thread's slow path does steps
 * 2 and 3 for itself (heap_boost_in_thread).
 */
#include "boost.h"
#include "reclaimer.h"

#include "../base/drain.h"
#include "../base/events.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/page.h"
#include "../slab/heap.h"
#include "../stats/stats.h"

#define BOOST_SHRINK_MS      50   /* shrinkers asked, while that makes progress */
#define BOOST_SHRINK_MAX_MS  1600 /* ... backing off to this while it does not */
#define BOOST_URGENT_MS      1    /* shrinkers, under the low watermark */
#define BOOST_URGENT_MAX_DIV 4

static _Atomic uint64_t last_pass_ms, pass_every_ms = BOOST_PASS_MS, pass_deficit;

/* At most one per every_ms, whoever asks. */
static bool due(_Atomic uint64_t *last_ms, uint64_t every_ms)
{
    uint64_t now = os_now_ms(), last = ld_relaxed(last_ms);
    return now - last >= every_ms &&
           atomic_compare_exchange_strong_explicit(last_ms, &last, now, memory_order_relaxed, memory_order_relaxed);
}

/* A pass is due (boost_pass_every's pace, at most one per wait whoever
 * asks); the one that takes it sets the next wait from its deficit. */
static bool pass_due(size_t deficit)
{
    uint64_t every = ld_relaxed(&pass_every_ms);
    if (!due(&last_pass_ms, every))
        return false;
    st_relaxed(&pass_every_ms, boost_pass_every(every, ld_relaxed(&pass_deficit), deficit));
    st_relaxed(&pass_deficit, deficit);
    return true;
}

/* No deficit: the next boost starts at the quick pace. */
static void pass_reset(void)
{
    st_relaxed(&pass_every_ms, BOOST_PASS_MS);
    st_relaxed(&pass_deficit, 0);
}

/* Shrinker pacing (the reclaimer thread's own state). What a shrinker
 * frees comes back as headroom only once the owners have collected it,
 * and only where whole blocks empty: objects of every age share slabs
 * once freed slots are reused, so evicting the oldest may empty no block
 * at all. Asking again for a deficit that has not moved only empties the
 * cache (measured on bench/fragment: 800k of its records evicted, the
 * whole cache several times, and the demand phase's faults slowed from
 * 0.2 to 4.5 ms by the purges). So:
 *   - regular asks every BOOST_SHRINK_MS while the deficit falls between
 *     them, the interval doubling up to BOOST_SHRINK_MAX_MS while not;
 *   - under the low watermark, an urgent ask at most every
 *     BOOST_URGENT_MS, only when the deficit is growing again after it
 *     fell since the last ask (the last ask landed, and the program takes
 *     room faster than it comes back), and within
 *     1/BOOST_URGENT_MAX_DIV of the budget between regular asks. */
static struct {
    uint64_t ms, every, urgent_ms;
    size_t low, window; /* low: the least deficit seen since the last ask */
} pace = { .every = BOOST_SHRINK_MS };

static bool shrink_due(bool urgent, size_t deficit)
{
    uint64_t now = os_now_ms();
    bool fell = pace.ms && pace.low < deficit; /* came down since the last ask, and is rising again */
    if (now - pace.ms >= pace.every) {
        bool stuck = pace.ms && !fell && pace.low >= deficit;
        pace.every = !stuck ? BOOST_SHRINK_MS : pace.every * 2 < BOOST_SHRINK_MAX_MS ? pace.every * 2 : BOOST_SHRINK_MAX_MS;
        pace.ms = now;
        pace.low = pace.window = deficit;
        return true;
    }
    if (deficit < pace.low)
        pace.low = deficit;
    if (!urgent || !fell || now - pace.urgent_ms < BOOST_URGENT_MS ||
        pace.window + deficit > page_budget_blocks() / BOOST_URGENT_MAX_DIV)
        return false;
    pace.urgent_ms = now;
    pace.low = deficit;
    pace.window += deficit;
    return true;
}

bool boost_run(void)
{
    bool urgent;
    size_t deficit = page_boost_deficit(&urgent);
    if (!deficit) {
        pass_reset();
        return false;
    }
    bool shrink = shrink_due(urgent, deficit), pass = pass_due(deficit);
    if (pass || shrink) {
        /* the shrinkers (when due), this thread's caches, exited threads'
         * heaps, the parked runs (they merge back: blocks may come free) */
        drain_all(DRAIN_BOOST, shrink ? deficit * SL_BLOCK : 0);
        page_boost_ask_owners(); /* live threads give back their own */
        stat_add_shared(STAT_boost_runs, 1);
    }
    return page_boost_deficit(NULL) != 0;
}

/* An allocating thread asked by a boost with no reclaimer to hear it, having
 * drained its own heap: start the reclaimer if the program may have one
 * (its first pass runs at once: the shrinkers are its work), and drain
 * the orphans here (no shrinkers: see above). No lock is held. */
static void boost_in_thread(void)
{
    page_start_reclaimer();
    if (reclaimer_is_running())
        return; /* its passes are not to be taken from it */
    size_t deficit = page_boost_deficit(NULL);
    if (!deficit)
        pass_reset();
    else if (pass_due(deficit)) {
        drain_all(DRAIN_BOOST, 0); /* exited threads' heaps, parked runs */
        stat_add_shared(STAT_boost_runs, 1);
    }
}

void boost_init(void) { sl_events.boost_in_thread = boost_in_thread; }
