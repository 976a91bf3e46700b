/* resident.c — the bytes of sluice's memory the kernel has resident, for
 * the gauge resident_bytes: mincore(2) over every granule of the pagemap.
 *
 * Every pagemap entry is a whole 2 MiB granule of one of sluice's own
 * mappings (a pageblock, a huge mapping, which is granule aligned and a
 * whole number of granules long, or a zero-size zone), so the walk asks
 * the kernel about sluice's pages and no other's. What it does not see:
 * sluice's records (meta_bytes, mapped apart) and ranges handed to the
 * teardown layer, out of the pagemap and on their way back to the kernel.
 *
 * Unlike the smaps gauges (thp.c) this formats no text and reads no file:
 * a page-table walk of one byte a page, some microseconds per 100 MiB, so
 * a program may ask for it often (jemalloc's stats.resident, which redis
 * reads ten times a second). A granule unmapped while the walk runs reads
 * as not resident. A page mapped but never written (only read: the
 * kernel's shared zero page) is resident to mincore, not to smaps' Rss.
 */
#include "resident.h"

#include "../os/os.h"
#include "../pagemap/pagemap.h"

static void add_granule(uintptr_t granule, uintptr_t e, void *arg)
{
    (void)e;
    *(uint64_t *)arg += os_resident((void *)granule, SL_BLOCK);
}

uint64_t resident_bytes(void)
{
    uint64_t n = 0;
    pagemap_walk(add_granule, &n);
    return n;
}
