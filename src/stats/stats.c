/* stats.c — sum the counters, add the gauges, print. See stats.h.
 * Printing uses write(2) through a stack buffer: no allocation. */
#include "stats.h"

#include <string.h>
#include <unistd.h>

#include "../base/fatal.h"
#include "../huge/huge.h"
#include "../meta/meta.h"
#include "../page/page.h"
#include "../slab/heap.h"
#include "sluice.h"

stat_counters stats_global;

/* Gauges: computed from the layers' own state when asked. */
#define SL_GAUGE_LIST(X)                                                      \
    X(blocks, "pageblocks mapped")                                            \
    X(blocks_slab, "pageblocks typed SLAB")                                   \
    X(blocks_reclaim, "pageblocks typed RECLAIM")                             \
    X(blocks_run, "pageblocks typed RUN")                                     \
    X(blocks_free, "pageblocks wholly free")                                  \
    X(free_page_bytes, "bytes in free pages of mapped pageblocks")            \
    X(huge_live_bytes, "bytes in live huge mappings")                         \
    X(huge_cached_bytes, "bytes in cached huge mappings")                     \
    X(huge_count, "live huge allocations")                                    \
    X(meta_bytes, "bytes mapped for sluice's own records")                    \
    X(mapped_bytes, "bytes mapped in all")

enum {
#define X(name, text) GAUGE_##name,
    SL_GAUGE_LIST(X)
#undef X
    GAUGE_COUNT
};

static const char *const names[] = {
#define X(name, text) #name,
    SL_STAT_LIST(X) SL_GAUGE_LIST(X)
#undef X
};
static const char *const texts[] = {
#define X(name, text) text,
    SL_STAT_LIST(X) SL_GAUGE_LIST(X)
#undef X
};

static void gauges(uint64_t g[GAUGE_COUNT])
{
    struct page_gauges pg;
    size_t live, cached, count;
    page_gauges(&pg);
    huge_gauges(&live, &cached, &count);
    g[GAUGE_blocks] = pg.blocks;
    g[GAUGE_blocks_slab] = pg.blocks_by_type[PB_SLAB];
    g[GAUGE_blocks_reclaim] = pg.blocks_by_type[PB_RECLAIM];
    g[GAUGE_blocks_run] = pg.blocks_by_type[PB_RUN];
    g[GAUGE_blocks_free] = pg.blocks_by_type[PB_FREE];
    g[GAUGE_free_page_bytes] = (uint64_t)pg.free_pages << SL_PAGE_SHIFT;
    g[GAUGE_huge_live_bytes] = live;
    g[GAUGE_huge_cached_bytes] = cached;
    g[GAUGE_huge_count] = count;
    g[GAUGE_meta_bytes] = meta_bytes();
    g[GAUGE_mapped_bytes] = (uint64_t)pg.blocks * SL_BLOCK + live + cached + meta_bytes();
}

static void snapshot(uint64_t all[STAT_COUNT + GAUGE_COUNT])
{
    heap_sum_stats(all);
    gauges(all + STAT_COUNT);
}

const char *sl_stat_name(size_t i) { return i < STAT_COUNT + GAUGE_COUNT ? names[i] : NULL; }

uint64_t sl_stat(const char *name)
{
    for (size_t i = 0; i < STAT_COUNT + GAUGE_COUNT; i++)
        if (!strcmp(names[i], name)) {
            uint64_t all[STAT_COUNT + GAUGE_COUNT];
            snapshot(all);
            return all[i];
        }
    return 0;
}

void sl_stats_print(int fd)
{
    uint64_t all[STAT_COUNT + GAUGE_COUNT];
    snapshot(all);
    char line[160];
    size_t n = 0;
    const char *head = "sluice statistics\n";
    (void)!write(fd, head, strlen(head));
    for (size_t i = 0; i < STAT_COUNT + GAUGE_COUNT; i++) {
        n = 0;
        line[n++] = ' ';
        line[n++] = ' ';
        size_t len = strlen(names[i]);
        memcpy(line + n, names[i], len);
        n += len;
        while (n < 24)
            line[n++] = ' ';
        char num[24];
        size_t d = fmt_u64(num, all[i]);
        for (size_t pad = d; pad < 14; pad++)
            line[n++] = ' ';
        memcpy(line + n, num, d);
        n += d;
        line[n++] = ' ';
        line[n++] = ' ';
        len = strlen(texts[i]);
        if (len > sizeof line - n - 1)
            len = sizeof line - n - 1;
        memcpy(line + n, texts[i], len);
        n += len;
        line[n++] = '\n';
        (void)!write(fd, line, n);
    }
}

void stats_print(void) { sl_stats_print(2); }
