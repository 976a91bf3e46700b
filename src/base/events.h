/* events.h — what the lower layers tell the layers above them, through one
 * table of functions filled once at start (api/init.c's constructor, by
 * the layers that answer: reclaim/ and api/checked.c), before any thread
 * can read it; read-only after. An entry left NULL means nobody answers
 * (a unit test's static link, or checked mode off).
 *
 * Everything else points down: a lower layer that needs memory back uses
 * the reclaim registry (drain.h), and the statistics read each layer's
 * report (stats.h); this table is for the few things only a higher layer
 * can do: start or wake the reclaimer thread, run the boost's work on an
 * allocating thread, and free checked mode's blocks.
 */
#ifndef SL_EVENTS_H
#define SL_EVENTS_H

#include "common.h"

struct sl_events {
    /* page: there is something to decay; start the reclaimer thread if the
     * program may have one. false: ask again later; true: settled. */
    bool (*reclaimer_start)(void);
    /* page: a big free left dirty pages far over the cap: end an idle
     * reclaimer's long sleep. false if there is no reclaimer. */
    bool (*reclaimer_kick)(void);
    /* page: is the reclaimer thread running (it owns the hugepage passes)? */
    bool (*reclaimer_running)(void);
    /* slab: an owner gave back its caches for a watermark boost with no
     * reclaimer to hear it; the boost's own work on this thread. */
    void (*boost_in_thread)(void);
    /* slab: a free of a block address with no live bit, in checked mode
     * (its pointers are not object starts): checked mode frees it. */
    void (*checked_free)(void *p);
};
extern struct sl_events sl_events;

#endif
