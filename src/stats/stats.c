/* stats.c — the counters and gauges: sum the global counters and each
 * layer's report (STAT_SOURCE) into one snapshot, read the costly gauges
 * (smaps, mincore) only when asked, and look them up by name (sl_stat,
 * the registry's held.NAME). print.c writes them out. See stats.h. */
#include "stats.h"

#include <string.h>

#include "../base/drain.h"
#include "resident.h"
#include "thp.h"
#include "sluice.h"

stat_counters stats_global;

static const char *const names[] = {
#define X(name, text) #name,
    SL_STAT_LIST(X) SL_GAUGE_LIST(X)
#undef X
};

extern const struct stat_source __start_sl_stat_source[] __attribute__((weak, visibility("hidden")));
extern const struct stat_source __stop_sl_stat_source[] __attribute__((weak, visibility("hidden")));

void stats_snapshot(uint64_t all[STAT_COUNT + GAUGE_COUNT], unsigned want)
{
    for (int i = 0; i < STAT_COUNT; i++)
        all[i] = ld_relaxed(&stats_global[i]);
    uint64_t *g = all + STAT_COUNT;
    for (int i = 0; i < GAUGE_COUNT; i++)
        g[i] = 0;
    for (const struct stat_source *s = __start_sl_stat_source; s < __stop_sl_stat_source; s++)
        if (s->report)
            s->report(all, g);
    struct thp_usage tu = { 0, 0, 0, 0 };
    if (want & STATS_WANT_SMAPS)
        thp_usage(&tu);
    g[GAUGE_block_rss_bytes] = tu.block_rss;
    g[GAUGE_block_thp_bytes] = tu.block_thp;
    g[GAUGE_huge_rss_bytes] = tu.huge_rss;
    g[GAUGE_huge_thp_bytes] = tu.huge_thp;
    g[GAUGE_resident_bytes] = want & STATS_WANT_RESIDENT ? resident_bytes() : 0;
}

/* What reading gauge or counter i needs of the costly ones. */
static unsigned costly_of(size_t i)
{
    if (i == STAT_COUNT + GAUGE_resident_bytes)
        return STATS_WANT_RESIDENT;
    return i >= STAT_COUNT + GAUGE_block_rss_bytes && i <= STAT_COUNT + GAUGE_huge_thp_bytes ? STATS_WANT_SMAPS : 0;
}

void stats_counters(uint64_t out[STAT_COUNT])
{
    uint64_t all[STAT_COUNT + GAUGE_COUNT];
    stats_snapshot(all, false);
    for (int i = 0; i < STAT_COUNT; i++)
        out[i] = all[i];
}


const char *sl_stat_name(size_t i) { return i < STAT_COUNT + GAUGE_COUNT ? names[i] : NULL; }

/* The reclaim registry's figures (base/drain.h), by drain: held.NAME, the
 * bytes it holds now; enomem_held.NAME, what it held when an allocation
 * last failed; and enomem_drains, how many failed and drained. */
static bool drain_stat(const char *name, uint64_t *v)
{
    if (!strcmp(name, "enomem_drains")) {
        *v = drain_enomem_count();
        return true;
    }
    bool now = !strncmp(name, "held.", 5), then = !strncmp(name, "enomem_held.", 12);
    if (!now && !then)
        return false;
    for (unsigned o = 0; o < DRAIN_COUNT; o++) {
        const struct drain *d = drain_of((enum drain_order)o);
        if (d && !strcmp(d->name, name + (now ? 5 : 12))) {
            *v = now ? (d->held ? d->held() : 0) : drain_enomem_held((enum drain_order)o);
            return true;
        }
    }
    return false;
}

static size_t index_of(const char *name) /* STAT_COUNT + GAUGE_COUNT: none */
{
    size_t i = 0;
    while (i < STAT_COUNT + GAUGE_COUNT && strcmp(names[i], name))
        i++;
    return i;
}

bool stats_lookup_many(size_t n, const char *const name[], uint64_t v[])
{
    unsigned want = 0;
    for (size_t k = 0; k < n; k++)
        want |= costly_of(index_of(name[k]));
    uint64_t all[STAT_COUNT + GAUGE_COUNT];
    stats_snapshot(all, want);
    bool known = true;
    for (size_t k = 0; k < n; k++) {
        size_t i = index_of(name[k]);
        if (i < STAT_COUNT + GAUGE_COUNT)
            v[k] = all[i];
        else if (!drain_stat(name[k], &v[k]))
            known = false, v[k] = 0;
    }
    return known;
}

bool stats_lookup(const char *name, uint64_t *v)
{
    if (drain_stat(name, v))
        return true;
    return index_of(name) < STAT_COUNT + GAUGE_COUNT && stats_lookup_many(1, &name, v);
}

uint64_t sl_stat(const char *name)
{
    uint64_t v;
    return stats_lookup(name, &v) ? v : 0;
}

void stats_caches_each(stat_cache_emit *emit, void *arg)
{
    for (const struct stat_source *s = __start_sl_stat_source; s < __stop_sl_stat_source; s++)
        if (s->caches)
            s->caches(emit, arg);
}
