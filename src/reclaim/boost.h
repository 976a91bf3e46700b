/* boost.h — the watermark boost's reclaim work (boost.c). */
#ifndef SL_BOOST_H
#define SL_BOOST_H

#include "../base/common.h"

/* The reclaimer's share: one pass if the headroom is short of the high
 * watermark plus the boost; true if it is still short afterwards (the
 * reclaimer then ticks again soon). */
bool boost_run(void);
void boost_init(void);

#endif
