/* Growth holds the resident free pages to the dirty cap (page/purge.c,
 * purge_growth; the policy is decay.h's decay_growth_clean).
 *
 * SLUICE_DIRTY_DECAY_MS=0: a freed run is advised as it is freed, MADV_FREE
 * (lazy), whose pages the kernel keeps counting in the RSS (mincore sees
 * them resident) until it runs short of memory. Medium runs fill RUN
 * pageblocks; seven of every eight are freed, so the blocks stay mapped
 * with most of their pages lazy and resident. Then small objects (SLAB
 * pageblocks, which the RUN blocks' free pages do not serve) make the heap
 * map a new pageblock: the lazy pages over the cap (an eighth of the pages
 * in use, at least 2 MiB) must be made clean then, not kept for the lazy
 * decay (10 s).
 *
 * tick (the heap maps nothing): the decay's tick (10 ms with a dirty decay
 * of 0) makes the lazy pages over the cap clean once they have been lazy
 * for a tick, well before the lazy decay (a minute here).
 *
 * cap (a dirty decay of a minute, a tick of 100 ms, a reclaimer: the frees
 * are no drop): the runs freed seven of eight stay dirty, far over the
 * cap; the reclaimer's tick makes what is over it clean at once
 * (MADV_DONTNEED), not lazy first. Before, they went lazy at one tick
 * (MADV_FREE: still counted in the RSS) and clean at the next.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sluice.h"
#include "t.h"

enum { NRUNS = 640, RUN = 60000, EVERY = 8, NSMALL = 200000 };

/* Resident pages of the freed runs, whole pages inside each run, by mincore. */
static size_t resident_freed(unsigned char **r)
{
    size_t in = 0;
    unsigned char v[RUN / 4096 + 1];
    for (int i = 0; i < NRUNS; i++) {
        if (i % EVERY == 0)
            continue;
        uintptr_t a = ((uintptr_t)r[i] + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)r[i] + RUN) & ~(uintptr_t)4095;
        CHECK_EQ(mincore((void *)a, e - a, v), 0);
        for (size_t j = 0; j < (e - a) / 4096; j++)
            in += v[j] & 1;
    }
    return in;
}

static unsigned char *runs[NRUNS];

/* Fill RUN pageblocks and free seven runs of eight: lazy and resident. */
static size_t fill_and_thin(void)
{
    for (int i = 0; i < NRUNS; i++) {
        CHECK((runs[i] = sl_malloc(RUN)) != NULL);
        memset(runs[i], 0xa5, RUN);
    }
    for (int i = 0; i < NRUNS; i++)
        if (i % EVERY)
            sl_free(runs[i]);
    size_t freed_pages = (size_t)(NRUNS - NRUNS / EVERY) * (RUN / 4096 - 1);
    size_t before = resident_freed(runs);
    /* the premise: the freed runs are lazy, and the kernel still counts
     * them (under memory pressure, from other tests run beside this one,
     * it takes lazy pages at once: then there is nothing to see here) */
    CHECK(sl_stat("lazy_bytes") >= 16u << 20);
    if (before < freed_pages / 2) {
        printf("growth_rss: skipped: the kernel took %zu of the %zu lazily freed pages at once (memory pressure)\n",
               freed_pages - before, freed_pages);
        exit(0);
    }
    return before;
}

static uint64_t cap_now(void)
{
    uint64_t active = sl_stat("active_bytes");
    return active / 8 > (2u << 20) ? active / 8 : 2u << 20;
}

/* An allocation slow path (a medium run, served by the lazy pages). */
static bool slow_path(void)
{
    sl_free(sl_malloc(300000));
    return true;
}

static void tick(void)
{
    size_t before = fill_and_thin();
    uint64_t blocks = sl_stat("block_map");
    CHECK(T_WAIT(slow_path() && sl_stat("lazy_bytes") + sl_stat("dirty_bytes") <= cap_now() + (1u << 20), 5000));
    CHECK_EQ(sl_stat("block_map"), blocks); /* the tick did it, not a growth */
    CHECK(resident_freed(runs) * 4 <= before);
    for (int i = 0; i < NRUNS; i += EVERY)
        sl_free(runs[i]);
}

static void growth(void)
{
    static void *small[NSMALL];
    size_t before = fill_and_thin();
    uint64_t blocks = sl_stat("block_map"), dontneed = sl_stat("madv_dontneed_bytes");
    int k = 0;
    while (k < NSMALL && sl_stat("block_map") == blocks)
        CHECK((small[k++] = sl_malloc(256)) != NULL);
    CHECK(sl_stat("block_map") > blocks);
    /* the growth: resident free pages held to the cap, with MADV_DONTNEED */
    CHECK(sl_stat("lazy_bytes") + sl_stat("dirty_bytes") <= cap_now() + (1u << 20));
    CHECK(sl_stat("madv_dontneed_bytes") >= dontneed + (8u << 20));
    size_t after = resident_freed(runs);
    CHECK(after * 4 <= before);
    /* the runs that stayed are untouched, and the freed pages serve again */
    for (int i = 0; i < NRUNS; i += EVERY)
        CHECK(runs[i][0] == 0xa5 && runs[i][RUN - 1] == 0xa5);
    for (int i = 0; i < NRUNS; i++)
        if (i % EVERY) {
            CHECK((runs[i] = sl_malloc(RUN)) != NULL);
            memset(runs[i], 0x5a, RUN);
        }
    for (int i = 0; i < NRUNS; i++)
        sl_free(runs[i]);
    while (k)
        sl_free(small[--k]);
}

static void cap(void)
{
    CHECK(T_WAIT(slow_path() && sl_stat("reclaimer_runs") > 0, 20000));
    for (int i = 0; i < NRUNS; i++) {
        CHECK((runs[i] = sl_malloc(RUN)) != NULL);
        memset(runs[i], 0xa5, RUN);
    }
    uint64_t lazy0 = sl_stat("madv_free_bytes"), clean0 = sl_stat("madv_dontneed_bytes");
    for (int i = 0; i < NRUNS; i++)
        if (i % EVERY)
            sl_free(runs[i]);
    CHECK(T_WAIT(slow_path() && sl_stat("lazy_bytes") + sl_stat("dirty_bytes") <= cap_now() + (1u << 20), 5000));
    /* over the cap: clean at once, not lazy first */
    CHECK(sl_stat("madv_dontneed_bytes") >= clean0 + (16u << 20));
    CHECK(sl_stat("madv_free_bytes") <= lazy0 + (4u << 20));
    for (int i = 0; i < NRUNS; i += EVERY)
        CHECK(runs[i][0] == 0xa5 && runs[i][RUN - 1] == 0xa5);
    for (int i = 0; i < NRUNS; i += EVERY)
        sl_free(runs[i]);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "cap"))
        cap();
    else if (argc > 1 && !strcmp(argv[1], "tick"))
        tick();
    else
        growth();
    return t_done("growth_rss");
}
