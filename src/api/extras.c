/* extras.c — glibc's malloc extensions (malloc_trim, malloc_stats,
 * mallinfo, mallinfo2, mallopt, malloc_info), filled from sluice's own
 * counters, sl_purge and sl_flush. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "../base/drain.h"
#include "../cache/cache.h"
#include "../huge/huge.h"
#include "../options/options.h"
#include "../page/page.h"
#include "../slab/heap.h"
#include "../teardown/teardown.h"
#include "checked.h"
#include "sluice.h"

/* Every drain of the reclaim registry (base/drain.h), in its order: the
 * quarantine, the caches' shrinkers, then every cache of sluice's own. */
void sl_purge(void) { drain_all(DRAIN_PURGE, SIZE_MAX); }

void sl_flush(void) { teardown_flush(); }

#if SL_OVERRIDE
#define EXPORT __attribute__((visibility("default")))

/* glibc's fields: arena = bytes in pageblocks, uordblks = bytes the
 * program holds there (live slab objects by their size class, live page
 * runs), fordblks = the rest of the pageblocks, hblks/hblkhd = huge
 * mappings, keepcost = cached huge mappings, usmblks = all mapped. */
static struct mallinfo2 info(void)
{
    struct mallinfo2 m = { 0 };
    m.arena = sl_stat("blocks") * (2u << 20);
    m.hblks = sl_stat("huge_count");
    m.hblkhd = sl_stat("huge_live_bytes");
    struct heap_usage u;
    heap_usage(&u);
    m.uordblks = u.slab_bytes + u.run_bytes;
    m.fordblks = m.arena > m.uordblks ? m.arena - m.uordblks : 0;
    m.keepcost = sl_stat("huge_cached_bytes");
    m.usmblks = sl_stat("mapped_bytes");
    return m;
}


/* glibc: 1 if memory was released to the system, else 0 */
EXPORT int malloc_trim(size_t pad)
{
    (void)pad;
    uint64_t mapped = sl_stat("mapped_bytes"), advised = sl_stat("madv_dontneed_bytes");
    sl_purge();
    return sl_stat("mapped_bytes") < mapped || sl_stat("madv_dontneed_bytes") > advised;
}

/* glibc's lines first (programs and tests read them), then sluice's own.
 * Cancellation is held off while it writes: write(2) is a cancellation
 * point, and a thread cancelled inside must leave no lock held. */
EXPORT void malloc_stats(void)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    struct mallinfo2 m = info();
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
                     "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
                     "max mmap regions = %10zu\nmax mmap bytes   = %10lu\n",
                     m.arena, m.uordblks, m.arena + m.hblkhd, m.uordblks + m.hblkhd, m.hblks,
                     (unsigned long)sl_stat("mapped_bytes"));
    if (n > 0)
        (void)!write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    sl_stats_print(2);
    pthread_setcancelstate(old, NULL);
}

EXPORT struct mallinfo2 mallinfo2(void) { return info(); }

EXPORT struct mallinfo mallinfo(void)
{
    struct mallinfo2 m2 = info();
    struct mallinfo m = { 0 };
    m.arena = (int)m2.arena;
    m.hblks = (int)m2.hblks;
    m.hblkhd = (int)m2.hblkhd;
    m.fordblks = (int)m2.fordblks;
    m.uordblks = (int)m2.uordblks;
    m.keepcost = (int)m2.keepcost;
    m.usmblks = (int)m2.usmblks;
    return m;
}

/* glibc's parameters: M_ARENA_MAX and M_ARENA_TEST are accepted and do
 * nothing (sluice has a heap per thread, no arenas to bound); the others
 * (trim and top pad, the mmap threshold and count, perturb) name knobs
 * sluice does not have, and get 0, as glibc answers a parameter it does
 * not know. sluice's own are its options (SLUICE_*, sl_ctl "opt.*"). */
/* glibc's parameters that mean something here; 1 for done (or accepted
 * with nothing to do, as the man page says), 0 for the rest, as glibc
 * answers a parameter it does not know. */
EXPORT int mallopt(int param, int value)
{
    options_init(); /* a call before the first allocation */
    switch (param) {
    case M_ARENA_MAX: /* no arenas: every thread has its own heap */
    case M_ARENA_TEST:
        return 1;
    case M_TRIM_THRESHOLD: /* -1: never trim (no madvise); 0: give free memory back at once */
        if (value < 0)
            return options_set("purge", PURGE_OFF) == 0;
        if (value == 0)
            return options_set("dirty_decay_ms", 0) == 0;
        return 1; /* sluice gives free memory back by age (SLUICE_DIRTY_DECAY_MS), not by size */
    case M_MMAP_THRESHOLD: /* huge allocations (own mappings) start at a fixed size */
        return 1;
    default:
        return 0;
    }
}

EXPORT int malloc_info(int options, FILE *fp)
{
    if (options)
        return -1;
    struct mallinfo2 m = info();
    fprintf(fp, "<malloc version=\"sluice-1\">\n<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
                "<system type=\"current\" size=\"%zu\"/>\n<system type=\"free\" size=\"%zu\"/>\n</malloc>\n",
            m.hblks, m.hblkhd, m.arena, m.fordblks);
    return 0;
}
#endif
