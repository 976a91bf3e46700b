/* fallback.c — the anti-fragmentation mechanism: the fallback steal, the
 * watermark check after a block is taken, the boost's event and its wake.
 * What to do is decided by antifrag.h's pure functions; this file does it
 * under the page heap lock (the wake runs after it, from page_heap_unlock). The
 * boost's work of winning blocks back is reclaim/boost.c's.
 */
#include "page_heap.h"

#include "../options/options.h"
#include "../os/os.h"

/* ---- watermarks and boost (the policy: antifrag.h; the work: reclaim/boost.c) */

static size_t budget_blocks(void) { return page_heap.budget / SL_BLOCK; }
size_t page_budget_blocks(void) { return __atomic_load_n(&page_heap.budget, __ATOMIC_RELAXED) / SL_BLOCK; }
static size_t headroom(void) { return af_headroom(budget_blocks(), page_heap.nblocks, page_heap.nfree_blocks); }

_Atomic uint32_t page_boost_gen_word;

/* An external fragmentation event: the boost rises, the reclaimer wakes. */
void boost_event(void)
{
    if (!sl_opt.boost || !page_heap.budget)
        return;
    af_boost_raise(&page_heap.boost, budget_blocks(), os_now_ms());
    page_heap.boost_wake = true;
    stat_add(stats_global, STAT_boost_events, 1);
}

/* After a block was taken: is the headroom under the low watermark? */
void wmark_check(void)
{
    if (sl_opt.boost && page_heap.budget && af_below_low(headroom(), budget_blocks(), af_boost_level(&page_heap.boost, os_now_ms())))
        page_heap.boost_wake = true;
}

size_t page_boost_deficit(bool *urgent)
{
    lock_acquire(&page_heap.lock);
    size_t want = 0;
    if (sl_opt.boost && page_heap.budget)
        want = af_deficit(headroom(), budget_blocks(), af_boost_level(&page_heap.boost, os_now_ms()), urgent);
    else if (urgent)
        *urgent = false;
    page_heap_unlock();
    return want;
}

void page_boost_ask_owners(void) { atomic_fetch_add_explicit(&page_boost_gen_word, 1, memory_order_relaxed); }

/* Outside the lock: wake the reclaimer; with none, ask the owners (and,
 * through the slab layer's hook, the first of them) to do the work. */
void boost_wake(void)
{
    if (!purge_kick_reclaimer())
        page_boost_ask_owners();
}


