/* print.c — the statistics written out: the text summary (SLUICE_STATS,
 * sl_stats_print), the per-cache table, the reconciliation with the
 * kernel's smaps_rollup and the JSON object (sl_stats_json), from one
 * snapshot of stats.c's. Printing uses write(2) through a stack buffer,
 * or hands the pieces to a callback: no allocation. */
#include "stats.h"

#include <string.h>
#include <unistd.h>

#include "../base/drain.h"
#include "../base/fatal.h"
#include "../options/options.h"
#include "../os/os.h"
#include "thp.h"
#include "sluice.h"

static const char *const texts[] = {
#define X(name, text) text,
    SL_STAT_LIST(X) SL_GAUGE_LIST(X)
#undef X
};

/* ---- output: a buffer on the stack, written with write(2) when full, or
 * handed to a callback as a string (jemalloc's malloc_stats_print) ------ */

#define OUT_CAP 512

struct out {
    int fd;
    void (*cb)(void *arg, const char *s); /* NULL: write to fd */
    void *arg;
    size_t n;
    char buf[OUT_CAP + 1]; /* + 1: the callback's string ends in buf[n] */
};
static void out_flush(struct out *o)
{
    if (o->n && o->cb) {
        o->buf[o->n] = 0;
        o->cb(o->arg, o->buf);
    } else if (o->n) {
        (void)!write(o->fd, o->buf, o->n);
    }
    o->n = 0;
}
static void out_mem(struct out *o, const char *s, size_t l)
{
    while (l) {
        if (o->n == OUT_CAP)
            out_flush(o);
        size_t k = OUT_CAP - o->n < l ? OUT_CAP - o->n : l;
        memcpy(o->buf + o->n, s, k);
        o->n += k, s += k, l -= k;
    }
}
static void out_str(struct out *o, const char *s) { out_mem(o, s, strlen(s)); }
static void out_u64(struct out *o, uint64_t v)
{
    char num[24];
    out_mem(o, num, fmt_u64(num, v));
}
static void out_pad(struct out *o, size_t to) /* spaces up to column `to` of a line at buf[0] */
{
    while (o->n < to)
        out_mem(o, " ", 1);
}
static void out_mib(struct out *o, const char *label, uint64_t bytes)
{
    uint64_t tenths = (bytes * 10 + (1 << 19)) >> 20;
    char frac[3] = { '.', (char)('0' + tenths % 10), 0 };
    out_str(o, label);
    out_u64(o, tenths / 10);
    out_str(o, frac);
    out_str(o, " MiB");
}
static void out_pct(struct out *o, uint64_t part, uint64_t whole)
{
    out_str(o, " (");
    out_u64(o, whole ? part * 100 / whole : 0);
    out_str(o, "%)");
}

static void summary(struct out *o);
static void reconcile(struct out *o, const uint64_t *g);
/* ---- the per-cache table (slabinfo) ------------------------------------ */
static const char *pageblock_name(uint64_t type)
{
    return type == SL_PAGEBLOCK_RECLAIM ? "RECLAIM" : type == SL_PAGEBLOCK_BUF ? "BUF" : "SLAB";
}

/* v right-aligned to end at column `to` of a line at buf[0] (one space
 * before it at least) */
static void out_num_to(struct out *o, uint64_t v, size_t to)
{
    char num[24];
    size_t d = fmt_u64(num, v);
    out_pad(o, o->n + 1 + d > to ? o->n + 1 : to - d);
    out_mem(o, num, d);
}

static const char caches_head[] = "  name                     size    active     total slabs:active  total pages type"
                                  "       allocations        frees  remote frees    bulk frees\n";
static void print_cache(const struct sl_cache_stats *r, void *arg)
{
    struct out *o = arg;
    out_flush(o); /* a line starts at 0: the padding counts from there */
    out_str(o, "  ");
    out_str(o, r->name);
    out_num_to(o, r->object_size, 31);
    out_num_to(o, r->objects_active, 41);
    out_num_to(o, r->objects_total, 51);
    out_num_to(o, r->slabs_active, 64);
    out_num_to(o, r->slabs_total, 71);
    out_num_to(o, r->pages_per_slab, 77);
    out_pad(o, 78);
    out_str(o, pageblock_name(r->pageblock_type));
    out_num_to(o, r->allocations, 103);
    out_num_to(o, r->frees, 116);
    out_num_to(o, r->remote_frees, 130);
    out_num_to(o, r->bulk_frees, 144);
    out_str(o, "\n");
}

void sl_stats_print(int fd)
{
    struct out o = { .fd = fd, .cb = NULL, .arg = NULL, .n = 0 };
    summary(&o);
}

static void json(struct out *o, bool smaps);
void stats_write(void (*cb)(void *arg, const char *s), void *arg, bool as_json)
{
    struct out o = { .fd = -1, .cb = cb, .arg = arg, .n = 0 };
    if (as_json)
        json(&o, true);
    else
        summary(&o);
}

static void summary(struct out *o)
{
    uint64_t all[STAT_COUNT + GAUGE_COUNT];
    stats_snapshot(all, STATS_WANT_SMAPS | STATS_WANT_RESIDENT);
    out_str(o, "sluice statistics\n");
    for (size_t i = 0; i < STAT_COUNT + GAUGE_COUNT; i++) {
        out_flush(o); /* a line starts at 0: the padding counts from there */
        out_str(o, "  ");
        out_str(o, sl_stat_name(i));
        char num[24];
        size_t d = fmt_u64(num, all[i]);
        out_pad(o, 24);
        out_mem(o, "              ", d < 14 ? 14 - d : 0); /* the number right-aligned in 14 */
        out_mem(o, num, d);
        out_str(o, "  ");
        out_str(o, texts[i]);
        out_str(o, "\n");
    }
    reconcile(o, all + STAT_COUNT);
    out_flush(o);
    out_str(o, "object caches (slabinfo; active objects are handed out, active slabs hold some)\n");
    out_str(o, caches_head);
    stats_caches_each(print_cache, o);
    out_flush(o);
    out_str(o, "reclaim registry, in drain order: bytes held now, and when an allocation last failed (");
    out_u64(o, drain_enomem_count());
    out_str(o, " failed and drained)\n");
    for (unsigned k = 0; k < DRAIN_COUNT; k++) {
        const struct drain *d = drain_of((enum drain_order)k);
        if (!d)
            continue;
        out_flush(o);
        out_str(o, "  ");
        out_str(o, d->name);
        out_pad(o, 18);
        if (d->held) {
            out_mib(o, "", d->held());
            out_pad(o, 32);
            out_mib(o, "", drain_enomem_held((enum drain_order)k));
        } else {
            out_str(o, "(not counted)");
        }
        out_str(o, "\n");
    }
    out_flush(o);
}

/* ---- reconciliation with the kernel's view ------------------------------ */

/* The figures both outputs reconcile: the kernel's (smaps_rollup) and what
 * sluice holds of them. False if smaps_rollup cannot be read. */
struct recon {
    uint64_t rss, lazy_free, anon_huge;
    uint64_t in_use, headers; /* headers: pageblock headers and sluice's records */
};
static bool recon_get(const uint64_t *g, struct recon *r)
{
    char text[4096];
    if (os_read_file("/proc/self/smaps_rollup", text, sizeof text) <= 0)
        return false;
    r->rss = smaps_kb_field(text, "Rss:");
    r->lazy_free = smaps_kb_field(text, "LazyFree:");
    r->anon_huge = smaps_kb_field(text, "AnonHugePages:");
    r->headers = g[GAUGE_block_header_bytes] + g[GAUGE_meta_bytes];
    r->in_use = g[GAUGE_active_bytes] + g[GAUGE_huge_live_bytes] + r->headers;
    return true;
}

/* RSS minus LazyFree is what the process holds; sluice says which part of
 * it is its own (in use, dirty free) and which is lazily freed. */
static void reconcile(struct out *o, const uint64_t *g)
{
    struct recon r;
    if (!recon_get(g, &r))
        return;
    out_str(o, "reconciliation with /proc/self/smaps_rollup\n");
    out_mib(o, "  kernel: Rss ", r.rss);
    out_mib(o, ", LazyFree ", r.lazy_free);
    out_mib(o, ", AnonHugePages ", r.anon_huge);
    out_mib(o, "; Rss - LazyFree = ", r.rss - (r.lazy_free < r.rss ? r.lazy_free : r.rss));
    out_mib(o, "\n  sluice: in use ", r.in_use);
    out_mib(o, " (pages ", g[GAUGE_active_bytes]);
    out_mib(o, ", huge ", g[GAUGE_huge_live_bytes]);
    out_mib(o, ", headers and records at most ", r.headers);
    out_mib(o, ")\n  sluice: free and resident (dirty) ", g[GAUGE_dirty_bytes]);
    out_mib(o, " (in dense hugepage blocks ", g[GAUGE_dirty_thp_bytes]);
    out_mib(o, "), lazily freed ", g[GAUGE_lazy_bytes]);
    out_mib(o, " (the kernel still has ", r.lazy_free);
    out_mib(o, " of it), clean ", g[GAUGE_clean_bytes]);
    out_mib(o, "\n  sluice: freed, being torn down: up to ",
            g[GAUGE_teardown_pending_bytes] + g[GAUGE_teardown_inflight_bytes]);
    out_mib(o, " (queued ", g[GAUGE_teardown_pending_bytes]);
    out_mib(o, ", being released ", g[GAUGE_teardown_inflight_bytes]);
    out_mib(o, ")\n  hugepages (smaps): pageblocks ", g[GAUGE_block_thp_bytes]);
    out_mib(o, " of ", g[GAUGE_block_rss_bytes]);
    out_pct(o, g[GAUGE_block_thp_bytes], g[GAUGE_block_rss_bytes]);
    out_mib(o, ", huge mappings ", g[GAUGE_huge_thp_bytes]);
    out_mib(o, " of ", g[GAUGE_huge_rss_bytes]);
    out_pct(o, g[GAUGE_huge_thp_bytes], g[GAUGE_huge_rss_bytes]);
    out_str(o, " resident\n");
    out_str(o, "  Rss - LazyFree = sluice in use (touched part) + dirty + in teardown + the program's own");
    out_str(o, " (code, libraries, stacks)\n");
}

/* ---- JSON ----------------------------------------------------------------- */

static void json_member(struct out *o, const char *key, uint64_t v, bool *first)
{
    out_str(o, *first ? "\"" : ",\"");
    *first = false;
    out_str(o, key);
    out_str(o, "\":");
    out_u64(o, v);
}

/* s as a JSON string */
static void json_string(struct out *o, const char *s)
{
    out_str(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            out_mem(o, e, 2);
        } else if (c < 0x20) {
            char e[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15] };
            out_mem(o, e, 6);
        } else {
            out_mem(o, (const char *)&c, 1);
        }
    }
    out_str(o, "\"");
}

struct json_caches {
    struct out *o;
    bool first;
};
static void json_cache(const struct sl_cache_stats *r, void *arg)
{
    struct json_caches *j = arg;
    struct out *o = j->o;
    out_str(o, j->first ? "{\"name\":" : ",{\"name\":");
    j->first = false;
    json_string(o, r->name);
    bool f = false;
    json_member(o, "object_size", r->object_size, &f);
    json_member(o, "objects_active", r->objects_active, &f);
    json_member(o, "objects_total", r->objects_total, &f);
    json_member(o, "slabs_active", r->slabs_active, &f);
    json_member(o, "slabs_total", r->slabs_total, &f);
    json_member(o, "pages_per_slab", r->pages_per_slab, &f);
    out_str(o, ",\"pageblock_type\":\"");
    out_str(o, pageblock_name(r->pageblock_type));
    out_str(o, "\"");
    json_member(o, "allocations", r->allocations, &f);
    json_member(o, "frees", r->frees, &f);
    json_member(o, "remote_frees", r->remote_frees, &f);
    json_member(o, "bulk_frees", r->bulk_frees, &f);
    out_str(o, "}");
}

/* One object on one line; every name is one of sl_stat_name's or a fixed
 * reconciliation key (sl_stat(3), "The JSON object"): the layout is stable. */
static void json(struct out *o, bool smaps)
{
    uint64_t all[STAT_COUNT + GAUGE_COUNT];
    stats_snapshot(all, STATS_WANT_RESIDENT | (smaps ? STATS_WANT_SMAPS : 0));
    const uint64_t *g = all + STAT_COUNT;
    bool first = true;
    out_str(o, "{\"version\":1,\"counters\":{");
    for (size_t i = 0; i < STAT_COUNT; i++)
        json_member(o, sl_stat_name(i), all[i], &first);
    out_str(o, "},\"gauges\":{");
    first = true;
    for (size_t i = STAT_COUNT; i < STAT_COUNT + GAUGE_COUNT; i++)
        json_member(o, sl_stat_name(i), all[i], &first);
    out_str(o, "}");
    struct recon r;
    if (recon_get(g, &r)) {
        out_str(o, ",\"kernel\":{");
        first = true;
        json_member(o, "rss_bytes", r.rss, &first);
        json_member(o, "lazyfree_bytes", r.lazy_free, &first);
        json_member(o, "anon_huge_bytes", r.anon_huge, &first);
        out_str(o, "},\"reconciliation\":{");
        first = true;
        json_member(o, "in_use_bytes", r.in_use, &first);
        json_member(o, "headers_and_records_bytes", r.headers, &first);
        json_member(o, "dirty_bytes", g[GAUGE_dirty_bytes], &first);
        json_member(o, "lazy_bytes", g[GAUGE_lazy_bytes], &first);
        json_member(o, "clean_bytes", g[GAUGE_clean_bytes], &first);
        json_member(o, "teardown_bytes", g[GAUGE_teardown_pending_bytes] + g[GAUGE_teardown_inflight_bytes],
                    &first);
        out_str(o, "}");
    }
    out_str(o, ",\"drains\":{");
    first = true;
    for (unsigned k = 0; k < DRAIN_COUNT; k++) {
        const struct drain *d = drain_of((enum drain_order)k);
        if (!d)
            continue;
        out_str(o, first ? "\"" : ",\"");
        first = false;
        out_str(o, d->name);
        out_str(o, "\":{");
        bool f2 = true;
        if (d->held)
            json_member(o, "held_bytes", d->held(), &f2);
        json_member(o, "enomem_held_bytes", drain_enomem_held((enum drain_order)k), &f2);
        out_str(o, "}");
    }
    out_str(o, "},\"enomem_drains\":");
    out_u64(o, drain_enomem_count());
    out_str(o, ",\"caches\":[");
    struct json_caches j = { o, true };
    stats_caches_each(json_cache, &j);
    out_str(o, "]}\n");
    out_flush(o);
}

void stats_json(int fd, bool smaps)
{
    struct out o = { .fd = fd, .cb = NULL, .arg = NULL, .n = 0 };
    json(&o, smaps);
}

void sl_stats_json(int fd) { stats_json(fd, true); }

void stats_print(void)
{
    if (sl_opt.stats == STATS_JSON)
        sl_stats_json(2);
    else
        sl_stats_print(2);
}
