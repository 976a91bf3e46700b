/* ctl.c — sl_ctl: every option and statistic by name, with its type, and
 * the actions (jemalloc's mallctl, mimalloc's mi_option_set, in one call).
 *
 *   opt.NAME     an option by the name after SLUICE_ (any case): read as
 *                an int64_t; the run-time ones (options.h: decays, purge
 *                mode, heap limit, boost, hugepages, teardown thresholds)
 *                written as an int64_t, checked against its range
 *   stat.NAME    a counter, gauge or registry figure (sl_stat's names):
 *                read as a uint64_t; read-only
 *   purge, flush, check        sl_purge, sl_flush, sl_check (no value)
 *   stats.print, stats.json    the statistics to the file descriptor
 *                              written as an int
 *   cache.NAME.FIELD  a figure of one cache's row (slab/slabinfo.c; NAME
 *                a cache's name, or malloc-N for a size class; FIELD one
 *                of struct sl_cache_stats's numbers): a uint64_t, read-only
 *   caches.I     the I-th row of the table (0 up, as SLUICE_STATS lists
 *                them): a struct sl_cache_stats (oldlen at least its
 *                size); ENOENT past the last
 *   prof.dump                  sl_prof_dump: the path written as a
 *                              const char * (or no value: PATH.N); its
 *                              error is sl_ctl's
 *
 * Reads: old and oldlen, *oldlen at least the type's size, set to it.
 * Writes: new and newlen, exactly the type's size. Returns 0, or ENOENT
 * (no such name), EINVAL (wrong size, a value out of range, a value where
 * none is taken), EPERM (read-only: a statistic, or an option fixed at
 * start). Nothing is changed when an error is returned.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "../options/options.h"
#include "../page/page.h"
#include "../slab/slabinfo.h"
#include "../prof/prof.h"
#include "../stats/stats.h"
#include "sluice.h"

static int read_value(void *old, size_t *oldlen, const void *val, size_t size)
{
    if (!old)
        return 0;
    if (!oldlen || *oldlen < size)
        return EINVAL;
    memcpy(old, val, size);
    *oldlen = size;
    return 0;
}

static int ctl_option(const char *name, void *old, size_t *oldlen, const void *new, size_t newlen)
{
    long v;
    int err = options_get(name, &v);
    if (err)
        return err;
    int64_t now = v;
    if (old && (!oldlen || *oldlen < sizeof now))
        return EINVAL;
    if (new) {
        int64_t want;
        if (!options_runtime(name))
            return EPERM; /* whatever the value */
        if (newlen != sizeof want)
            return EINVAL;
        memcpy(&want, new, sizeof want);
        if ((err = options_set(name, (long)want)))
            return err;
        if (!strcasecmp(name, "heap_limit"))
            page_set_budget((size_t)want); /* the budget the page layer holds */
    }
    return read_value(old, oldlen, &now, sizeof now);
}

static int ctl_stat(const char *name, void *old, size_t *oldlen, const void *new)
{
    uint64_t v;
    if (!stats_lookup(name, &v))
        return ENOENT;
    if (new)
        return EPERM;
    return read_value(old, oldlen, &v, sizeof v);
}

static int ctl_action(const char *name, void *old, const void *new, size_t newlen)
{
    static const char *const plain[] = { "purge", "flush", "check" }, *const printing[] = { "stats.print", "stats.json" };
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, plain[i])) {
            if (old || new)
                return EINVAL;
            i == 0 ? sl_purge() : i == 1 ? sl_flush() : (void)sl_check();
            return 0;
        }
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, printing[i])) {
            int fd;
            if (old || !new || newlen != sizeof fd)
                return EINVAL;
            memcpy(&fd, new, sizeof fd);
            i == 0 ? sl_stats_print(fd) : sl_stats_json(fd);
            return 0;
        }
    if (!strcmp(name, "prof.dump")) {
        const char *path = NULL;
        if (old || (new && newlen != sizeof path))
            return EINVAL;
        if (new)
            memcpy(&path, new, sizeof path);
        return sl_prof_dump(path);
    }
    return ENOENT;
}

/* cache.NAME.FIELD: the field after the last dot (a name may hold dots) */
static int ctl_cache(const char *name, void *old, size_t *oldlen, const void *new)
{
#define F(f) { #f, offsetof(struct sl_cache_stats, f) }
    static const struct {
        const char *name;
        size_t off;
    } fields[] = { F(object_size),  F(objects_active), F(objects_total), F(slabs_active),
                   F(slabs_total),  F(pages_per_slab), F(pageblock_type), F(allocations),
                   F(frees),        F(remote_frees),   F(bulk_frees) };
#undef F
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return ENOENT;
    size_t f = 0;
    while (f < sizeof fields / sizeof *fields && strcmp(fields[f].name, dot + 1))
        f++;
    int id;
    struct sl_cache_stats row;
    if (f == sizeof fields / sizeof *fields || (id = slabinfo_find(name, (size_t)(dot - name))) < 0 ||
        !slabinfo_row((unsigned)id, &row))
        return ENOENT;
    if (new)
        return EPERM;
    uint64_t v;
    memcpy(&v, (const char *)&row + fields[f].off, sizeof v);
    return read_value(old, oldlen, &v, sizeof v);
}

struct nth {
    unsigned long want, at;
    struct sl_cache_stats row;
    bool found;
};
static void take_nth(const struct sl_cache_stats *row, void *arg)
{
    struct nth *n = arg;
    if (n->at++ == n->want) {
        n->row = *row;
        n->found = true;
    }
}

/* caches.I: the I-th row, as the struct */
static int ctl_caches(const char *index, void *old, size_t *oldlen, const void *new)
{
    struct nth n = { .want = 0 };
    if (!*index)
        return ENOENT;
    for (const char *p = index; *p; p++) {
        if (*p < '0' || *p > '9' || n.want > UINT32_MAX)
            return ENOENT;
        n.want = n.want * 10 + (unsigned long)(*p - '0');
    }
    int err = slabinfo_each(take_nth, &n);
    if (err)
        return err;
    if (!n.found)
        return ENOENT;
    if (new)
        return EPERM;
    return read_value(old, oldlen, &n.row, sizeof n.row);
}

int sl_prof_dump(const char *path)
{
    int saved = errno;
    int err = prof_dump(path);
    errno = saved;
    return err;
}

int sl_ctl(const char *name, void *old, size_t *oldlen, const void *new, size_t newlen)
{
    if (!name)
        return EINVAL;
    options_init(); /* a call before the first allocation */
    if (!strncmp(name, "opt.", 4))
        return ctl_option(name + 4, old, oldlen, new, newlen);
    if (!strncmp(name, "stat.", 5))
        return ctl_stat(name + 5, old, oldlen, new);
    if (!strncmp(name, "cache.", 6))
        return ctl_cache(name + 6, old, oldlen, new);
    if (!strncmp(name, "caches.", 7))
        return ctl_caches(name + 7, old, oldlen, new);
    return ctl_action(name, old, new, newlen);
}
