/* drain.c — the reclaim registry's table and its one walk (drain.h). */
#include "drain.h"

#include <errno.h>

#include "fatal.h"
#include "lock.h"

extern const struct drain __start_sl_drain[] __attribute__((weak, visibility("hidden")));
extern const struct drain __stop_sl_drain[] __attribute__((weak, visibility("hidden")));

static _Atomic size_t enomem_held[DRAIN_COUNT];
static _Atomic uint64_t enomem_count;
static __thread bool draining;

const struct drain *drain_of(enum drain_order order)
{
    const struct drain *found = NULL;
    for (const struct drain *d = __start_sl_drain; d < __stop_sl_drain; d++)
        if (d->order == order) {
            if (found)
                sl_fatal("two drains registered for one order:", d, d->name, order);
            found = d;
        }
    return found;
}

bool drain_all(enum drain_depth depth, size_t want)
{
    if (lock_any_held())
        return false;
    for (unsigned o = 0; o < DRAIN_COUNT; o++) {
        const struct drain *d = drain_of((enum drain_order)o);
        if (d && (d->depths & depth))
            d->run(depth, want);
    }
    return true;
}

bool drain_after_enomem(void)
{
    if (draining || lock_any_held())
        return false;
    int saved = errno;
    draining = true;
    for (unsigned o = 0; o < DRAIN_COUNT; o++) {
        const struct drain *d = drain_of((enum drain_order)o);
        st_relaxed(&enomem_held[o], d && d->held ? d->held() : 0);
    }
    atomic_fetch_add_explicit(&enomem_count, 1, memory_order_relaxed);
    drain_all(DRAIN_ENOMEM, 0);
    draining = false;
    errno = saved;
    return true;
}

size_t drain_enomem_held(enum drain_order o) { return o < DRAIN_COUNT ? ld_relaxed(&enomem_held[o]) : 0; }

uint64_t drain_enomem_count(void) { return ld_relaxed(&enomem_count); }

bool drain_complete(void)
{
    for (unsigned o = 0; o < DRAIN_COUNT; o++)
        if (!drain_of((enum drain_order)o))
            return false;
    return true;
}
