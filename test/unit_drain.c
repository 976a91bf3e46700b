/* Unit: the reclaim registry (src/base/drain.h). Every order has exactly
 * one drain, with a name of its own and the depths the table promises;
 * drain_all refuses to run while its thread holds a lock of sluice (a
 * drain takes locks of its own), and runs otherwise; a failed allocation's
 * drain records what each drain held, counts itself, keeps errno, and
 * gives what was freed back (a malloc that fits only without the caches'
 * memory succeeds after it). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../src/base/drain.h"
#include "../src/base/lock.h"
#include "sluice.h"
#include "t.h"

static SL_LOCK_DEFINE(l, LOCK_PAGE_HEAP); /* in lock.h's table, as every lock of sluice */

int main(void)
{
    CHECK(drain_complete());
    for (unsigned o = 0; o < DRAIN_COUNT; o++) {
        const struct drain *d = drain_of((enum drain_order)o);
        if (!d)
            continue;
        CHECK_EQ(d->order, o);
        CHECK(d->run != NULL && d->name && d->name[0]);
        CHECK(d->depths && !(d->depths & ~DRAIN_ALL_DEPTHS));
        for (unsigned p = 0; p < o; p++)
            CHECK(strcmp(drain_of((enum drain_order)p)->name, d->name) != 0);
    }
    /* what each depth reaches: a failed allocation everything that holds
     * address space but the shrinkers (their locks); sl_purge everything
     * but the teardown wait and the zero-size zones (address space only) */
    CHECK(!(drain_of(DRAIN_SHRINKERS)->depths & DRAIN_ENOMEM));
    CHECK(drain_of(DRAIN_SHRINKERS)->depths & DRAIN_PURGE);
    CHECK(drain_of(DRAIN_TEARDOWN)->depths & DRAIN_ENOMEM);
    CHECK(drain_of(DRAIN_TEARDOWN)->depths & DRAIN_PRESSURE); /* queued memory counts against a limit */
    CHECK(drain_of(DRAIN_ZERO_ZONES)->depths & DRAIN_ENOMEM);
    CHECK(drain_of(DRAIN_QUARANTINE)->depths & DRAIN_ENOMEM);
    CHECK(drain_of(DRAIN_MAGAZINES)->depths & DRAIN_THREAD);
    CHECK(drain_of(DRAIN_PAGE_CACHES)->depths & DRAIN_THREAD);
    CHECK((drain_of(DRAIN_GATHER)->depths) == (drain_of(DRAIN_FREE_BLOCKS)->depths)); /* a pair */

    /* a lock held: nothing runs */
    lock_acquire(&l);
    CHECK(!drain_all(DRAIN_PURGE, 0));
    CHECK(!drain_after_enomem());
    lock_release(&l);
    CHECK(!lock_any_held());
    CHECK(drain_all(DRAIN_THREAD, 0));

    /* the caches hold memory: a run in the page cache, objects in the
     * magazine, a huge mapping in the huge cache */
    void *run = sl_malloc(64 << 10), *obj = sl_malloc(100), *huge = sl_malloc(8 << 20);
    CHECK(run && obj && huge);
    sl_free(run);
    sl_free(obj);
    sl_free(huge);
    CHECK(sl_stat("held.page_caches") >= (64 << 10));
    CHECK(sl_stat("held.magazines") >= 100);
    CHECK(sl_stat("held.huge_cache") >= (8 << 20));
    uint64_t before = drain_enomem_count();
    errno = 1234;
    CHECK(drain_after_enomem());
    CHECK_EQ(errno, 1234);
    CHECK_EQ(drain_enomem_count(), before + 1);
    CHECK(drain_enomem_held(DRAIN_PAGE_CACHES) >= (64 << 10));
    CHECK(drain_enomem_held(DRAIN_HUGE_CACHE) >= (8 << 20));
    CHECK_EQ(sl_stat("enomem_held.huge_cache"), drain_enomem_held(DRAIN_HUGE_CACHE));
    CHECK_EQ(sl_stat("held.page_caches"), 0);
    CHECK_EQ(sl_stat("held.magazines"), 0);
    CHECK_EQ(sl_stat("held.huge_cache"), 0);
    CHECK_EQ(sl_stat("held.free_blocks"), 0);
    return t_done("unit_drain");
}
