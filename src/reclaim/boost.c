/* boost.c — the watermark boost's work, the kswapd/kcompactd share of
 * Mel Gorman's 2018 series in user space (DESIGN.md layer 9).
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
 * Owners are asked every BOOST_PASS_MS, the shrinkers every
 * BOOST_SHRINK_MS: what a shrinker frees on other threads' slabs comes
 * free only when their owners collect it, so asking the shrinkers at the
 * owners' pace only asks them again for the same deficit (measured on
 * bench/fragment: at 5 ms they evicted 2-3 times the whole cache).
 *
 * Shrinkers run only on the reclaimer thread (and in sl_purge's caller):
 * a shrinker takes its cache's own lock, and an allocating thread may
 * hold that lock while it calls malloc. With no reclaimer (a
 * single-threaded program), an allocating thread's slow path does steps
 * 2 and 3 for itself (heap_boost_in_thread).
 */
#include "boost.h"
#include "reclaimer.h"

#include "../cache/cache.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/page.h"
#include "../slab/heap.h"
#include "../stats/stats.h"

#define BOOST_PASS_MS   5  /* owners asked, orphans drained */
#define BOOST_SHRINK_MS 50 /* shrinkers asked */
#define BOOST_URGENT_MS 1  /* shrinkers, under the low watermark */
#define BOOST_URGENT_MAX_DIV 4

static _Atomic uint64_t last_pass_ms, last_shrink_ms, last_urgent_ms;

/* At most one per every_ms, whoever asks. */
static bool due(_Atomic uint64_t *last_ms, uint64_t every_ms)
{
    uint64_t now = os_now_ms(), last = ld_relaxed(last_ms);
    return now - last >= every_ms &&
           atomic_compare_exchange_strong_explicit(last_ms, &last, now, memory_order_relaxed, memory_order_relaxed);
}

/* Shrinkers: every BOOST_SHRINK_MS for the deficit; under the low
 * watermark every BOOST_URGENT_MS, as long as the asks of the window
 * (since the last regular one) stay within BOOST_URGENT_MAX_DIV of the
 * budget: what a shrinker freed may still be on its way back through the
 * owners, and asking again for the same deficit would empty the cache. */
static bool shrink_due(bool urgent, size_t deficit)
{
    static size_t window_blocks; /* the reclaimer's own (or sl_purge's caller's) */
    if (due(&last_shrink_ms, BOOST_SHRINK_MS)) {
        window_blocks = deficit;
        return true;
    }
    if (!urgent || window_blocks + deficit > page_budget_blocks() / BOOST_URGENT_MAX_DIV ||
        !due(&last_urgent_ms, BOOST_URGENT_MS))
        return false;
    window_blocks += deficit;
    return true;
}

bool boost_run(void)
{
    bool urgent;
    size_t deficit = page_boost_deficit(&urgent);
    if (!deficit)
        return false;
    bool shrink = shrink_due(urgent, deficit), pass = due(&last_pass_ms, BOOST_PASS_MS);
    if (shrink)
        cache_reclaim_all(deficit * SL_BLOCK);
    if (pass || shrink) {
        page_boost_ask_owners();
        heap_reclaim_orphans();
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
    if (page_boost_deficit(NULL) && due(&last_pass_ms, BOOST_PASS_MS)) {
        heap_reclaim_orphans();
        stat_add_shared(STAT_boost_runs, 1);
    }
}

void boost_init(void) { heap_boost_in_thread = boost_in_thread; }
