/* reclaimer.h — the background reclaimer thread (docs/DESIGN.md). */
#ifndef SL_RECLAIMER_H
#define SL_RECLAIMER_H

#include "../base/common.h"

void reclaimer_init(void); /* at library load: let the page layer start it */
void reclaimer_fork_child(void);
bool reclaimer_is_running(void); /* the thread is up and hears kicks */

#endif
