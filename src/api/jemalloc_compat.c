/* jemalloc_compat.c — jemalloc's introspection calls, for programs built
 * against jemalloc and run on sluice (LD_PRELOAD, or linked -lsluice):
 * mallctl, mallctlnametomib, mallctlbymib and malloc_stats_print, with
 * jemalloc's signatures and error codes, answered from sluice's figures;
 * and nallocx, sluice's size rounding (redis asks it before a realloc).
 * A program linked to libjemalloc itself (Debian's redis-server) calls
 * these through the dynamic linker, so a preloaded sluice answers them,
 * and jemalloc, loaded but never called, never starts.
 *
 * The names (the table below) are the common read-only ones, and those
 * redis 7 asks for in INFO memory, MEMORY STATS, MEMORY DOCTOR, MEMORY
 * PURGE and its fragmentation figures. Any other name is ENOENT. sluice
 * is one arena: arena and stats.arenas indices 0, 1 (arenas.narenas,
 * jemalloc's old name for "all") and 4096 (MALLCTL_ARENAS_ALL) name it;
 * a bin is a malloc size class.
 *
 * What each figure means in sluice (the statistics are src/stats, the
 * names sl_ctl reads as "stat.NAME", here all from one snapshot; what the
 * walk of allocated runs finds is heap_usage, slab/heap.h):
 *   stats.allocated  bytes in live blocks: slab objects by their size
 *                    class, medium runs by their pages, huge mappings
 *                    whole; objects in thread magazines, and those
 *                    other threads freed that their owner has not taken
 *                    back yet, are not live (jemalloc counts its tcaches')
 *   stats.active     pages holding live blocks: slabs with a live object,
 *                    live runs, live huge mappings; at least allocated
 *   stats.resident   sluice's pages the kernel has resident (mincore over
 *                    every pageblock, huge mapping and zone:
 *                    stat.resident_bytes) and its records (meta_bytes),
 *                    lazily freed pages included until the kernel takes
 *                    them, as smaps' Rss counts them
 *   stats.mapped     bytes mapped less the retained ones
 *   stats.retained   mapped bytes that read as zero: free pages purged
 *                    with MADV_DONTNEED or never touched (clean_bytes)
 *   stats.metadata   sluice's records and the pageblocks' headers
 *   pdirty, pmuzzy   free pages dirty (resident, not advised) and lazy
 *                    (MADV_FREE), of pageblocks and cached huge mappings
 * As in jemalloc, the stats.* figures are a snapshot taken when "epoch" is
 * written (and at the first call); between two writes they do not move.
 * The snapshot is kept in atomics, each read whole; two threads writing
 * the epoch at once may leave a mix of both snapshots.
 *
 * Errors, as jemalloc's ctl.c: ENOENT (no such name, or an index out of
 * range), EPERM (a value written to a read-only name; anything passed to
 * an action), EINVAL (*oldlenp or newlen not the size of the name's
 * type: what fits is copied and *oldlenp set to it). An old value is
 * written only when both oldp and oldlenp are given.
 *
 * Layer: api. No allocation: names are parsed in place, malloc_stats_print
 * writes through a stack buffer (stats_write).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../base/drain.h"
#include "../base/fatal.h"
#include "../os/os.h"
#include "../reclaim/reclaimer.h"
#include "../slab/heap.h"
#include "../stats/stats.h"
#include "fast.h"
#include "sluice.h"

#if SL_OVERRIDE
#define EXPORT __attribute__((visibility("default")))

#define JE_VERSION "5.3.0-0-g0 sluice" /* the jemalloc interface answered, then who answers */
#define ARENAS_ALL 4096                /* MALLCTL_ARENAS_ALL */
#define MAX_DEPTH  6                   /* stats.arenas.<i>.bins.<j>.curregs */

enum type { T_ACTION, T_BOOL, T_U32, T_UNSIGNED, T_SIZE, T_U64, T_STRING };
static const size_t type_size[] = { 0, sizeof(bool), sizeof(uint32_t), sizeof(unsigned),
                                    sizeof(size_t), sizeof(uint64_t), sizeof(const char *) };

/* The snapshot's figures, in bytes. */
enum fig { F_ALLOCATED, F_ACTIVE, F_METADATA, F_RESIDENT, F_MAPPED, F_RETAINED, F_SMALL, F_LARGE, F_DIRTY, F_LAZY,
           F_COUNT };

/* What a name reads: a snapshot figure (in bytes, or in pages), or one of these. */
enum what { W_FIG, W_PAGES, W_EPOCH, W_VERSION, W_BACKGROUND, W_NARENAS, W_PAGE, W_QUANTUM, W_NBINS, W_BIN_SIZE,
            W_BIN_NREGS, W_BIN_SLAB_SIZE, W_CURREGS, W_CURSLABS, W_PURGE, W_TCACHE_FLUSH };

/* A '#' is an index: a size class after "bin" or "bins", else an arena. */
static const struct je_name {
    const char *path;
    uint8_t type, what, fig;
} names[] = {
    { "version", T_STRING, W_VERSION, 0 },
    { "epoch", T_U64, W_EPOCH, 0 },
    { "background_thread", T_BOOL, W_BACKGROUND, 0 },
    { "thread.tcache.flush", T_ACTION, W_TCACHE_FLUSH, 0 },
    { "arena.#.purge", T_ACTION, W_PURGE, 0 },
    { "arenas.narenas", T_UNSIGNED, W_NARENAS, 0 },
    { "arenas.page", T_SIZE, W_PAGE, 0 },
    { "arenas.quantum", T_SIZE, W_QUANTUM, 0 },
    { "arenas.nbins", T_UNSIGNED, W_NBINS, 0 },
    { "arenas.bin.#.size", T_SIZE, W_BIN_SIZE, 0 },
    { "arenas.bin.#.nregs", T_U32, W_BIN_NREGS, 0 },
    { "arenas.bin.#.slab_size", T_SIZE, W_BIN_SLAB_SIZE, 0 },
    { "stats.allocated", T_SIZE, W_FIG, F_ALLOCATED },
    { "stats.active", T_SIZE, W_FIG, F_ACTIVE },
    { "stats.metadata", T_SIZE, W_FIG, F_METADATA },
    { "stats.resident", T_SIZE, W_FIG, F_RESIDENT },
    { "stats.mapped", T_SIZE, W_FIG, F_MAPPED },
    { "stats.retained", T_SIZE, W_FIG, F_RETAINED },
    { "stats.arenas.#.pactive", T_SIZE, W_PAGES, F_ACTIVE },
    { "stats.arenas.#.pdirty", T_SIZE, W_PAGES, F_DIRTY },
    { "stats.arenas.#.pmuzzy", T_SIZE, W_PAGES, F_LAZY },
    { "stats.arenas.#.mapped", T_SIZE, W_FIG, F_MAPPED },
    { "stats.arenas.#.retained", T_SIZE, W_FIG, F_RETAINED },
    { "stats.arenas.#.resident", T_SIZE, W_FIG, F_RESIDENT },
    { "stats.arenas.#.small.allocated", T_SIZE, W_FIG, F_SMALL },
    { "stats.arenas.#.large.allocated", T_SIZE, W_FIG, F_LARGE },
    { "stats.arenas.#.bins.#.curregs", T_SIZE, W_CURREGS, 0 },
    { "stats.arenas.#.bins.#.curslabs", T_SIZE, W_CURSLABS, 0 },
};
#define NNAMES (sizeof names / sizeof names[0])

/* ---- the snapshot --------------------------------------------------------- */

static _Atomic uint64_t epoch, figs[F_COUNT], curregs[SL_NCLASSES], curslabs[SL_NCLASSES];

/* The statistics a snapshot reads (stats_lookup, as sl_ctl's "stat.NAME"),
 * all from one of the statistics' own snapshots. */
enum { S_HUGE, S_QUARANTINE, S_META, S_HEADERS, S_RESIDENT, S_CLEAN, S_MAPPED, S_DIRTY, S_LAZY, S_MOVED };
static const char *const stat_names[] = {
    "huge_live_bytes", "held.quarantine", "meta_bytes", "block_header_bytes", "resident_bytes", "clean_bytes",
    "mapped_bytes", "dirty_bytes", "lazy_bytes",
    /* S_MOVED on: every event that changes what heap_usage finds (a block
     * handed out or freed, a slab made, emptied into its magazine or given
     * back, a remote free batched, flushed or collected, a run resized),
     * so that the walk is skipped while none has happened (an idle redis
     * writes the epoch ten times a second) */
    "alloc_small", "alloc_medium", "free_small", "free_remote", "free_medium", "remote_collect", "slab_new",
    "slab_release", "realloc_inplace", "realloc_move", "cache_destroy", "held.magazines", "held.remote_batches"
};
#define NSTATS (sizeof stat_names / sizeof stat_names[0])
static _Atomic uint64_t walked[NSTATS - S_MOVED]; /* the S_MOVED figures at the last walk */
static _Atomic uint64_t walk[3];                  /* its slab, run and active bytes */

static void refresh(void)
{
    uint64_t s[NSTATS];
    stats_lookup_many(NSTATS, stat_names, s); /* before the walk: an event during it shows next time */
    bool moved = !ld_relaxed(&epoch);
    for (size_t i = S_MOVED; i < NSTATS; i++)
        moved |= ld_relaxed(&walked[i - S_MOVED]) != s[i];
    if (moved) {
        struct heap_usage u;
        heap_usage(&u);
        st_relaxed(&walk[0], u.slab_bytes);
        st_relaxed(&walk[1], u.run_bytes);
        st_relaxed(&walk[2], u.active_bytes);
        for (unsigned c = 0; c < SL_NCLASSES; c++) {
            st_relaxed(&curregs[c], u.class_objects[c]);
            st_relaxed(&curslabs[c], u.class_slabs[c]);
        }
        for (size_t i = S_MOVED; i < NSTATS; i++)
            st_relaxed(&walked[i - S_MOVED], s[i]);
    }
    uint64_t f[F_COUNT];
    f[F_SMALL] = ld_relaxed(&walk[0]);
    f[F_LARGE] = ld_relaxed(&walk[1]) + s[S_HUGE];
    f[F_ACTIVE] = ld_relaxed(&walk[2]) + s[S_HUGE];
    uint64_t live = f[F_SMALL] + f[F_LARGE];
    f[F_ALLOCATED] = live - (s[S_QUARANTINE] < live ? s[S_QUARANTINE] : live); /* checked mode's: freed */
    if (f[F_ALLOCATED] > f[F_ACTIVE]) /* counts read at different instants */
        f[F_ALLOCATED] = f[F_ACTIVE];
    f[F_METADATA] = s[S_META] + s[S_HEADERS];
    f[F_RESIDENT] = s[S_RESIDENT] + s[S_META];
    f[F_RETAINED] = s[S_CLEAN];
    f[F_MAPPED] = s[S_MAPPED] > s[S_CLEAN] ? s[S_MAPPED] - s[S_CLEAN] : 0;
    f[F_DIRTY] = s[S_DIRTY];
    f[F_LAZY] = s[S_LAZY];
    for (int i = 0; i < F_COUNT; i++)
        st_relaxed(&figs[i], f[i]);
    atomic_fetch_add_explicit(&epoch, 1, memory_order_release);
}

/* jemalloc takes its first snapshot at its first ctl call. */
static void first_call(void)
{
    if (!atomic_load_explicit(&epoch, memory_order_acquire))
        refresh();
}

/* ---- names ------------------------------------------------------------------ */

/* Component `level` of a dotted path: its start, and its length (0 if the
 * path has fewer). */
static size_t component(const char *path, unsigned level, const char **start)
{
    *start = ""; /* none: length 0 (and no uninitialised read at -O3) */
    for (; level; level--) {
        path = strchr(path, '.');
        if (!path)
            return 0;
        path++;
    }
    *start = path;
    const char *dot = strchr(path, '.');
    return dot ? (size_t)(dot - path) : strlen(path);
}

/* Every component nonempty, at most MAX_DEPTH of them. */
static bool well_formed(const char *name)
{
    unsigned levels = 1;
    if (!*name || *name == '.')
        return false;
    for (const char *p = name; *p; p++)
        if (*p == '.' && (p[1] == '.' || !p[1] || ++levels > MAX_DEPTH))
            return false;
    return true;
}

static bool is_index(const char *p, size_t pl) { return pl == 1 && *p == '#'; }

/* An index component: digits, a value the one arena or a size class takes
 * (a '#' after "bin" or "bins" is a size class, any other an arena). */
static bool index_value(const char *pattern, unsigned level, const char *s, size_t n, size_t *v)
{
    if (!n || n > 19)
        return false;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        *v = *v * 10 + (size_t)(s[i] - '0');
    }
    const char *p;
    size_t pl = component(pattern, level - 1, &p);
    bool bin = (pl == 3 && !memcmp(p, "bin", 3)) || (pl == 4 && !memcmp(p, "bins", 4));
    return bin ? *v < SL_NCLASSES : *v == 0 || *v == 1 || *v == ARENAS_ALL;
}

/* Does component `level` of name, (s, n), match the pattern's? */
static bool component_matches(const char *pattern, unsigned level, const char *s, size_t n)
{
    const char *p;
    size_t pl = component(pattern, level, &p), v;
    return is_index(p, pl) ? index_value(pattern, level, s, n, &v) : pl && pl == n && !memcmp(p, s, n);
}

/* Do the first `levels` components of name match the pattern's? */
static bool prefix_matches(const char *pattern, const char *name, unsigned levels)
{
    for (unsigned l = 0; l < levels; l++) {
        const char *s;
        size_t n = component(name, l, &s);
        if (!component_matches(pattern, l, s, n))
            return false;
    }
    return true;
}

/* Is entry e's component at `level` the first of its spelling among the
 * entries under the same parent as name's first `level` components? */
static bool first_of_its_name(size_t e, const char *name, unsigned level)
{
    const char *p, *q;
    size_t pl = component(names[e].path, level, &p);
    for (size_t k = 0; k < e; k++)
        if (prefix_matches(names[k].path, name, level) && component(names[k].path, level, &q) == pl &&
            !memcmp(p, q, pl))
            return false;
    return true;
}

/* The entry a whole name refers to, and its indices (arena, bin); NULL if
 * none (an unknown name, an inner node, an index out of range). */
static const struct je_name *lookup(const char *name, size_t idx[2])
{
    if (!well_formed(name))
        return NULL;
    const char *s;
    unsigned levels = 0;
    while (component(name, levels, &s))
        levels++;
    for (size_t e = 0; e < NNAMES; e++) {
        const char *pattern = names[e].path, *p;
        if (!prefix_matches(pattern, name, levels) || component(pattern, levels, &p))
            continue;
        unsigned nidx = 0;
        for (unsigned l = 0; l < levels; l++) {
            size_t pl = component(pattern, l, &p), n = component(name, l, &s);
            if (is_index(p, pl))
                index_value(pattern, l, s, n, &idx[nidx++]);
        }
        if (nidx == 1 && !strncmp(pattern, "arenas.bin.", 11))
            idx[1] = idx[0]; /* a bin with no arena */
        return &names[e];
    }
    return NULL;
}

/* ---- values ------------------------------------------------------------------ */

static uint64_t value_of(const struct je_name *e, const size_t idx[2])
{
    unsigned bin = (unsigned)idx[1];
    switch (e->what) {
    case W_FIG: return ld_relaxed(&figs[e->fig]);
    case W_PAGES: return ld_relaxed(&figs[e->fig]) >> SL_PAGE_SHIFT;
    case W_EPOCH: return ld_relaxed(&epoch);
    case W_BACKGROUND: return reclaimer_is_running();
    case W_NARENAS: return 1;
    case W_PAGE: return SL_PAGE;
    case W_QUANTUM: return SL_GRAIN;
    case W_NBINS: return SL_NCLASSES;
    case W_BIN_SIZE: return class_size[bin];
    case W_BIN_NREGS: return ((size_t)class_pages[bin] << SL_PAGE_SHIFT) / class_size[bin];
    case W_BIN_SLAB_SIZE: return (size_t)class_pages[bin] << SL_PAGE_SHIFT;
    case W_CURREGS: return ld_relaxed(&curregs[bin]);
    case W_CURSLABS: return ld_relaxed(&curslabs[bin]);
    default: return 0;
    }
}

/* jemalloc's READ: the old value when both oldp and oldlenp are given, of
 * exactly its type's size; otherwise what fits, and EINVAL. */
static int read_old(const struct je_name *e, const size_t idx[2], void *oldp, size_t *oldlenp)
{
    if (!oldp || !oldlenp)
        return 0;
    union {
        bool b;
        uint32_t u32;
        unsigned u;
        size_t z;
        uint64_t u64;
        const char *s;
    } v;
    uint64_t x = value_of(e, idx);
    switch (e->type) {
    case T_BOOL: v.b = x != 0; break;
    case T_U32: v.u32 = (uint32_t)x; break;
    case T_UNSIGNED: v.u = (unsigned)x; break;
    case T_SIZE: v.z = (size_t)x; break;
    case T_STRING: v.s = JE_VERSION; break;
    default: v.u64 = x; break;
    }
    size_t size = type_size[e->type];
    if (*oldlenp != size) {
        size_t fit = *oldlenp < size ? *oldlenp : size;
        memcpy(oldp, &v, fit);
        *oldlenp = fit;
        return EINVAL;
    }
    memcpy(oldp, &v, size);
    return 0;
}

static int ctl(const struct je_name *e, const size_t idx[2], void *oldp, size_t *oldlenp, void *newp,
               size_t newlen)
{
    first_call();
    if (e->type == T_ACTION) {
        if (oldp || oldlenp || newp || newlen)
            return EPERM;
        if (e->what == W_PURGE)
            sl_purge();
        else
            drain_all(DRAIN_THREAD, 0); /* this thread's magazines, batches, spare slabs and pages */
        return 0;
    }
    if (e->what == W_EPOCH) {
        if (newp && newlen != sizeof(uint64_t))
            return EINVAL;
        if (newp)
            refresh();
    } else if (newp || newlen) {
        return EPERM;
    }
    return read_old(e, idx, oldp, oldlenp);
}

EXPORT int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    size_t idx[2] = { 0, 0 };
    const struct je_name *e = name ? lookup(name, idx) : NULL;
    return e ? ctl(e, idx, oldp, oldlenp, newp, newlen) : ENOENT;
}

/* jemalloc's ctl_lookup: level by level, a named component becomes its
 * rank among the names under the same parent (in the table's order), an
 * index stays itself. A name that stops at an inner node gives a partial
 * MIB (mallctlbymib refuses it); one longer than *miblenp gives its first
 * *miblenp components. */
EXPORT int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp)
{
    if (!name || !mibp || !miblenp)
        return EINVAL;
    first_call();
    if (!well_formed(name))
        return ENOENT;
    const char *s, *p;
    size_t n;
    unsigned level = 0;
    for (; level < *miblenp && (n = component(name, level, &s)); level++) {
        bool found = false, leaf = false;
        size_t rank = 0;
        for (size_t e = 0; e < NNAMES && !found; e++) {
            size_t pl = component(names[e].path, level, &p);
            if (!pl || !prefix_matches(names[e].path, name, level) || !first_of_its_name(e, name, level))
                continue;
            if (is_index(p, pl))
                found = index_value(names[e].path, level, s, n, &rank);
            else if (pl == n && !memcmp(p, s, n))
                found = true;
            else
                rank++;
            leaf = found && !component(names[e].path, level + 1, &p);
        }
        if (!found || (leaf && component(name, level + 1, &s)))
            return ENOENT; /* no such component, or a leaf with more after it */
        mibp[level] = rank;
    }
    if (!component(name, level, &s))
        *miblenp = level;
    return 0;
}

/* The name a MIB stands for, into buf; false if there is none. */
static bool mib_name(const size_t *mib, size_t miblen, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    if (!miblen || miblen > MAX_DEPTH)
        return false;
    for (unsigned level = 0; level < miblen; level++) {
        size_t rank = 0, pl = 0;
        const char *p = NULL;
        for (size_t e = 0; e < NNAMES && !pl; e++) {
            if (!component(names[e].path, level, &p) || !prefix_matches(names[e].path, buf, level) ||
                !first_of_its_name(e, buf, level))
                continue;
            size_t l = component(names[e].path, level, &p);
            if (is_index(p, l) || rank++ == mib[level])
                pl = l;
        }
        if (!pl)
            return false;
        char num[24];
        if (is_index(p, pl))
            p = num, pl = fmt_u64(num, mib[level]);
        if (len + pl + 2 > cap)
            return false;
        if (level)
            buf[len++] = '.';
        memcpy(buf + len, p, pl);
        len += pl;
        buf[len] = 0;
    }
    return true;
}

EXPORT int mallctlbymib(const size_t *mibp, size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    char name[128];
    if (!mibp || !mib_name(mibp, miblen, name, sizeof name))
        return ENOENT;
    return mallctl(name, oldp, oldlenp, newp, newlen);
}

/* jemalloc's size rounding: the usable size mallocx(size, flags) would
 * give (MALLOCX_LG_ALIGN in the low 6 bits; the zero, tcache and arena
 * bits change nothing), 0 past the largest. */
EXPORT size_t nallocx(size_t size, int flags)
{
    unsigned lg = (unsigned)flags & 0x3f;
    return lg >= 47 ? 0 : alloc_usable_for(size, lg ? (size_t)1 << lg : 0); /* none so aligned in user space */
}

/* sluice's summary (SLUICE_STATS=1), or with 'J' in opts its JSON object,
 * through write_cb; to stderr without one. jemalloc's other letters leave
 * out parts of its own report and are ignored. */
static void to_stderr(void *arg, const char *s)
{
    (void)arg;
    os_write_err(s, strlen(s));
}

EXPORT void malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque, const char *opts)
{
    stats_write(write_cb ? write_cb : to_stderr, cbopaque, opts && strchr(opts, 'J'));
}
#endif
