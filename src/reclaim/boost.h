/* boost.h — the watermark boost's reclaim work (boost.c). */
#ifndef SL_BOOST_H
#define SL_BOOST_H

#include "../base/common.h"

/* The reclaimer's share: one pass if the headroom is short of the high
 * watermark plus the boost; true if it is still short afterwards (the
 * reclaimer then ticks again soon). */
bool boost_run(void);
void boost_init(void);

#define BOOST_PASS_MS     5    /* owners asked, orphans drained: at most this often */
#define BOOST_PASS_MAX_MS 1600 /* ... backing off to this while the passes win nothing */

/* The wait before the next pass (owners asked to give their caches back),
 * every_ms the last wait: a pass that won no room back (the deficit, in
 * blocks, is not below the last pass's: no block came free whole) doubles
 * it, up to BOOST_PASS_MAX_MS; one that did, or the first (last_deficit
 * 0), goes back to BOOST_PASS_MS. Under a budget that is nearly all live
 * memory, every drain scatters the owners' typed runs into the shared
 * heap, where other types take them: asked every 5 ms, the mixed-lifetime
 * shape under 384 MiB counted 4,616 fragmentation events with the boost
 * and 3,736 without (docs/benchmarks/mixed-lifetime.md). Pure. */
sl_inline uint64_t boost_pass_every(uint64_t every_ms, size_t last_deficit, size_t deficit)
{
    if (!last_deficit || deficit < last_deficit)
        return BOOST_PASS_MS;
    return every_ms * 2 < BOOST_PASS_MAX_MS ? every_ms * 2 : BOOST_PASS_MAX_MS;
}

#endif
