/* jemalloc's introspection API on sluice (src/api/jemalloc_compat.c):
 * every name reads with its type and refuses the wrong size (EINVAL, what
 * fits copied), a write to a read-only name (EPERM), anything passed to an
 * action (EPERM); unknown names, inner nodes and indices out of range are
 * ENOENT; the figures follow what the program holds (allocated, active,
 * small and large, bins), what the kernel has resident (against smaps) and
 * what is free (dirty, retained), and move only when the epoch is
 * written; thread.tcache.flush empties this thread's magazines and
 * arena.<i>.purge the dirty pages; every name goes through a MIB and
 * back, jemalloc's documented loop over bins works; nallocx agrees with
 * malloc_usable_size; malloc_stats_print writes the summary and the JSON
 * through a callback (or to stderr) without allocating. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

/* jemalloc's declarations (jemalloc/jemalloc.h), unprefixed */
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp);
int mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
void malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque, const char *opts);
size_t nallocx(size_t size, int flags);

static size_t get_size(const char *name)
{
    size_t v = (size_t)-1, len = sizeof v;
    int err = mallctl(name, &v, &len, NULL, 0);
    if (err)
        fprintf(stderr, "mallctl %s: %d\n", name, err);
    CHECK_EQ(err, 0);
    CHECK_EQ(len, sizeof v);
    return v;
}

static uint64_t new_epoch(void)
{
    uint64_t e = 1;
    size_t len = sizeof e;
    CHECK_EQ(mallctl("epoch", &e, &len, &e, sizeof e), 0);
    return e;
}

static bool within(double a, double b, double frac) { return a >= b * (1 - frac) && a <= b * (1 + frac); }

/* ---- the names, their types and errors ------------------------------------ */

static const struct {
    const char *name;
    size_t size;
} names[] = {
    { "version", sizeof(char *) },
    { "epoch", 8 },
    { "background_thread", sizeof(bool) },
    { "arenas.narenas", sizeof(unsigned) },
    { "arenas.page", sizeof(size_t) },
    { "arenas.quantum", sizeof(size_t) },
    { "arenas.nbins", sizeof(unsigned) },
    { "arenas.bin.0.size", sizeof(size_t) },
    { "arenas.bin.5.nregs", sizeof(uint32_t) },
    { "arenas.bin.71.slab_size", sizeof(size_t) },
    { "stats.allocated", sizeof(size_t) },
    { "stats.active", sizeof(size_t) },
    { "stats.metadata", sizeof(size_t) },
    { "stats.resident", sizeof(size_t) },
    { "stats.mapped", sizeof(size_t) },
    { "stats.retained", sizeof(size_t) },
    { "stats.arenas.0.pactive", sizeof(size_t) },
    { "stats.arenas.4096.pdirty", sizeof(size_t) },
    { "stats.arenas.4096.pmuzzy", sizeof(size_t) },
    { "stats.arenas.1.mapped", sizeof(size_t) },
    { "stats.arenas.4096.retained", sizeof(size_t) },
    { "stats.arenas.4096.resident", sizeof(size_t) },
    { "stats.arenas.4096.small.allocated", sizeof(size_t) },
    { "stats.arenas.0.large.allocated", sizeof(size_t) },
    { "stats.arenas.4096.bins.3.curregs", sizeof(size_t) },
    { "stats.arenas.4096.bins.3.curslabs", sizeof(size_t) },
};
#define NNAMES (sizeof names / sizeof names[0])

static void types_and_errors(void)
{
    for (size_t i = 0; i < NNAMES; i++) {
        uint64_t v[2] = { 0, 0 }, big = 0;
        size_t len = names[i].size;
        CHECK_EQ(mallctl(names[i].name, v, &len, NULL, 0), 0);
        CHECK_EQ(len, names[i].size);
        /* the wrong size: EINVAL, what fits copied and its length */
        len = names[i].size + 1;
        if (mallctl(names[i].name, &big, &len, NULL, 0) != EINVAL)
            printf("mallctl: %s read with a size too big: not EINVAL\n", names[i].name);
        CHECK_EQ(len, names[i].size);
        unsigned char small[1] = { 0xee };
        len = 1;
        CHECK_EQ(mallctl(names[i].name, small, &len, NULL, 0), names[i].size == 1 ? 0 : EINVAL);
        CHECK_EQ(len, 1);
        CHECK_EQ(small[0], ((unsigned char *)v)[0]); /* its first byte */
        /* no room given, or no length: nothing read, no error */
        CHECK_EQ(mallctl(names[i].name, NULL, &len, NULL, 0), 0);
        CHECK_EQ(mallctl(names[i].name, v, NULL, NULL, 0), 0);
        /* written: only the epoch takes a value */
        uint64_t w = 1;
        int err = mallctl(names[i].name, NULL, NULL, &w, names[i].size);
        CHECK_EQ(err, strcmp(names[i].name, "epoch") ? EPERM : 0);
    }
    /* the epoch takes exactly a uint64_t */
    uint32_t w32 = 1;
    CHECK_EQ(mallctl("epoch", NULL, NULL, &w32, sizeof w32), EINVAL);
    /* the actions take nothing */
    size_t z = 0, zl = sizeof z;
    uint64_t one = 1;
    CHECK_EQ(mallctl("thread.tcache.flush", &z, &zl, NULL, 0), EPERM);
    CHECK_EQ(mallctl("thread.tcache.flush", NULL, NULL, &one, sizeof one), EPERM);
    CHECK_EQ(mallctl("arena.4096.purge", NULL, &zl, NULL, 0), EPERM);
    CHECK_EQ(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    /* no such name, an inner node, a leaf with more after it, a bad index */
    static const char *const unknown[] = { "stats.nonesuch", "nonesuch", "", ".", "stats", "stats.",
                                           "stats..allocated", ".stats.allocated", "stats.allocated.x",
                                           "stats.arenas.7.pactive", "stats.arenas.x.pactive",
                                           "stats.arenas.4096", "arenas.bin.72.size", "arenas.bin.-1.size",
                                           "stats.arenas.0.bins.72.curregs", "arena.2.purge",
                                           "opt.narenas", "thread.allocated" };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        size_t v, len = sizeof v;
        int err = mallctl(unknown[i], &v, &len, NULL, 0);
        if (err != ENOENT)
            printf("mallctl: \"%s\": %d, not ENOENT\n", unknown[i], err);
        CHECK_EQ(err, ENOENT);
    }
    CHECK_EQ(mallctl(NULL, NULL, NULL, NULL, 0), ENOENT);
    /* the constant ones */
    const char *ver = NULL;
    size_t len = sizeof ver;
    CHECK_EQ(mallctl("version", &ver, &len, NULL, 0), 0);
    CHECK(ver && !strncmp(ver, "5.", 2) && strstr(ver, "sluice"));
    unsigned narenas = 0, nbins = 0;
    len = sizeof narenas;
    CHECK_EQ(mallctl("arenas.narenas", &narenas, &len, NULL, 0), 0);
    CHECK_EQ(narenas, 1);
    len = sizeof nbins;
    CHECK_EQ(mallctl("arenas.nbins", &nbins, &len, NULL, 0), 0);
    CHECK(nbins > 30);
    CHECK_EQ(get_size("arenas.page"), 4096);
    CHECK_EQ(get_size("arenas.quantum"), 16);
    uint32_t nregs = 0;
    len = sizeof nregs;
    CHECK_EQ(mallctl("arenas.bin.5.nregs", &nregs, &len, NULL, 0), 0);
    CHECK_EQ(nregs, get_size("arenas.bin.5.slab_size") / get_size("arenas.bin.5.size"));
}

/* ---- the figures --------------------------------------------------------- */

#define NOBJ  40000
#define OBJSZ 1500

static void figures(void)
{
    /* no decay while the test looks at free memory */
    int64_t decay = 600000;
    CHECK_EQ(sl_ctl("opt.dirty_decay_ms", NULL, NULL, &decay, sizeof decay), 0);
    sl_purge();
    new_epoch();
    size_t alloc0 = get_size("stats.allocated"), active0 = get_size("stats.active");
    size_t res0 = get_size("stats.resident");
    CHECK(active0 >= alloc0);
    CHECK(get_size("stats.mapped") >= active0);

    static void *p[NOBJ];
    for (int i = 0; i < NOBJ; i++) {
        p[i] = malloc(OBJSZ);
        memset(p[i], 1, OBJSZ);
    }
    size_t usable = malloc_usable_size(p[0]), held = (size_t)NOBJ * usable;
    /* nothing moves until the epoch is written */
    CHECK_EQ(get_size("stats.allocated"), alloc0);
    uint64_t e1 = new_epoch(), e2 = new_epoch();
    CHECK_EQ(e2, e1 + 1);
    size_t alloc1 = get_size("stats.allocated"), active1 = get_size("stats.active");
    size_t res1 = get_size("stats.resident"), mapped1 = get_size("stats.mapped");
    size_t small1 = get_size("stats.arenas.4096.small.allocated");
    printf("mallctl: %d x %zu B: allocated +%zu, active +%zu, resident +%zu (of %zu held)\n", NOBJ, usable,
           alloc1 - alloc0, active1 - active0, res1 - res0, held);
    CHECK(within((double)(alloc1 - alloc0), (double)held, 0.02));
    CHECK(active1 >= alloc1 && active1 - active0 <= held * 1.1);
    CHECK(res1 - res0 >= held * 0.95 && res1 - res0 <= held * 1.15);
    CHECK(mapped1 >= active1 && mapped1 >= res1 * 0.9);
    CHECK_EQ(get_size("stats.arenas.0.pactive") * 4096, active1);
    CHECK(small1 >= held && small1 <= alloc1);
    /* resident against the kernel's count of the whole process: sluice's
     * part of it is all but the program's own (code, stack, libc) */
    size_t kernel = proc_smaps("Rss");
    printf("mallctl: stats.resident %zu, smaps Rss %zu (%.1f%%)\n", res1, kernel, 100.0 * res1 / kernel);
    CHECK(res1 <= kernel && res1 >= kernel * 0.9);

    /* the bins: each size class, its slabs and live objects */
    unsigned nbins = 0;
    size_t len = sizeof nbins;
    CHECK_EQ(mallctl("arenas.nbins", &nbins, &len, NULL, 0), 0);
    size_t mib[6], miblen = 6, sum = 0, slabs = 0;
    CHECK_EQ(mallctlnametomib("stats.arenas.4096.bins.0.curregs", mib, &miblen), 0);
    CHECK_EQ(miblen, 6);
    size_t smib[4], smiblen = 4;
    CHECK_EQ(mallctlnametomib("arenas.bin.0.size", smib, &smiblen), 0);
    CHECK_EQ(smiblen, 4);
    for (unsigned b = 0; b < nbins; b++) {
        size_t regs, size, nslabs;
        mib[4] = smib[2] = b;
        len = sizeof regs;
        CHECK_EQ(mallctlbymib(mib, miblen, &regs, &len, NULL, 0), 0);
        len = sizeof size;
        CHECK_EQ(mallctlbymib(smib, smiblen, &size, &len, NULL, 0), 0);
        char name[64];
        snprintf(name, sizeof name, "stats.arenas.4096.bins.%u.curslabs", b);
        nslabs = get_size(name);
        CHECK(regs <= nslabs * (get_size("arenas.page") * 16 / size + 1));
        sum += regs * size;
        slabs += nslabs;
        if (size == usable)
            CHECK(regs >= NOBJ);
    }
    CHECK_EQ(sum, small1); /* one thread, no batches: the bins add up */

    /* medium and huge blocks are large */
    void *run = malloc(200000), *huge = malloc(5 << 20);
    memset(run, 2, 200000);
    new_epoch();
    size_t large = get_size("stats.arenas.4096.large.allocated");
    CHECK(large >= malloc_usable_size(run) + malloc_usable_size(huge));
    CHECK_EQ(get_size("stats.allocated"), get_size("stats.arenas.0.small.allocated") + large);
    free(run);
    free(huge);

    /* freed: not allocated, not active; the free pages dirty, lazy or clean
     * as sluice counts them (which, depends on the purge policy) */
    for (int i = 0; i < NOBJ; i++)
        free(p[i]);
    new_epoch();
    size_t alloc2 = get_size("stats.allocated");
    CHECK(alloc2 <= alloc0 + held / 50); /* magazines hold objects, not the program */
    CHECK(sl_stat("held.magazines") > 0);
    CHECK_EQ(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    CHECK_EQ(sl_stat("held.magazines"), 0);
    new_epoch();
    size_t dirty = get_size("stats.arenas.4096.pdirty") * 4096;
    printf("mallctl: freed: allocated %zu, dirty %zu, active %zu\n", get_size("stats.allocated"), dirty,
           get_size("stats.active"));
    CHECK_EQ(dirty, sl_stat("dirty_bytes"));
    CHECK_EQ(get_size("stats.arenas.4096.pmuzzy") * 4096, sl_stat("lazy_bytes"));
    CHECK_EQ(get_size("stats.retained"), sl_stat("clean_bytes"));
    CHECK_EQ(get_size("stats.mapped"), sl_stat("mapped_bytes") - sl_stat("clean_bytes"));
    CHECK(get_size("stats.active") <= active0 + held / 10);
    /* purged: no dirty page, the resident ones given back */
    unsigned narenas = 0;
    len = sizeof narenas;
    CHECK_EQ(mallctl("arenas.narenas", &narenas, &len, NULL, 0), 0);
    char purge[32];
    snprintf(purge, sizeof purge, "arena.%u.purge", narenas); /* redis's MEMORY PURGE */
    CHECK_EQ(mallctl(purge, NULL, NULL, NULL, 0), 0);
    new_epoch();
    CHECK_EQ(get_size("stats.arenas.4096.pdirty"), 0);
    CHECK(get_size("stats.resident") <= res1 - held * 0.9);
    CHECK(get_size("stats.retained") + get_size("stats.mapped") >= get_size("stats.active"));
    CHECK_EQ(mallctl("arena.0.purge", NULL, NULL, NULL, 0), 0);
    CHECK_EQ(mallctl("arena.4096.purge", NULL, NULL, NULL, 0), 0);
}

static void *free_all(void *arg)
{
    void **p = arg;
    for (int i = 0; i < 2000; i++)
        free(p[i]);
    return NULL;
}

/* Each event the walk of allocated runs depends on shows at the next
 * epoch, though the walk is skipped while none happens: a malloc, a free
 * into the magazine, a run resized in place, a magazine emptied. */
static void no_stale_figure(void)
{
    new_epoch();
    size_t a0 = get_size("stats.allocated"), act0 = get_size("stats.active");
    new_epoch();
    CHECK_EQ(get_size("stats.allocated"), a0);
    void *x = malloc(64);
    new_epoch();
    CHECK_EQ(get_size("stats.allocated"), a0 + malloc_usable_size(x));
    free(x);
    new_epoch();
    CHECK_EQ(get_size("stats.allocated"), a0);
    void *r = malloc(100000);
    size_t u1 = malloc_usable_size(r);
    new_epoch();
    CHECK_EQ(get_size("stats.allocated"), a0 + u1);
    uint64_t inplace = sl_stat("realloc_inplace");
    void *r2 = realloc(r, 200000);
    new_epoch();
    CHECK_EQ(get_size("stats.allocated"), a0 + malloc_usable_size(r2));
    CHECK(r2 != r || sl_stat("realloc_inplace") == inplace + 1);
    free(r2);
    /* slabs whose objects are all in the magazine are active until the
     * magazine is emptied into them and they are given back */
    static void *q[64];
    for (int i = 0; i < 64; i++)
        q[i] = malloc(2048);
    for (int i = 0; i < 64; i++)
        free(q[i]);
    new_epoch();
    size_t act1 = get_size("stats.active");
    CHECK_EQ(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0), 0);
    new_epoch();
    CHECK(get_size("stats.active") < act1);
    CHECK(get_size("stats.active") <= act0);
    CHECK_EQ(get_size("stats.allocated"), a0);
    /* freed by another thread: not allocated, though this thread has not
     * taken the objects back yet (in a remote batch, or marked remote) */
    static void *rq[2000];
    for (int i = 0; i < 2000; i++)
        rq[i] = malloc(96);
    new_epoch();
    CHECK_EQ(get_size("stats.allocated"), a0 + 2000 * malloc_usable_size(rq[0]));
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, free_all, rq), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    new_epoch();
    CHECK(get_size("stats.allocated") < a0 + 4096); /* glibc keeps a few bytes per thread it ran */
}

/* ---- MIBs ------------------------------------------------------------------ */

static void mibs(void)
{
    for (size_t i = 0; i < NNAMES; i++) {
        size_t mib[8], miblen = 8;
        CHECK_EQ(mallctlnametomib(names[i].name, mib, &miblen), 0);
        size_t dots = 1;
        for (const char *c = names[i].name; *c; c++)
            dots += *c == '.';
        CHECK_EQ(miblen, dots);
        uint64_t a = 0, b = 0;
        size_t la = names[i].size, lb = names[i].size;
        CHECK_EQ(mallctl(names[i].name, &a, &la, NULL, 0), 0);
        CHECK_EQ(mallctlbymib(mib, miblen, &b, &lb, NULL, 0), 0);
        CHECK_EQ(a, b); /* the figures do not move between epochs */
        CHECK_EQ(lb, names[i].size);
        uint64_t w = 1; /* errors the same way */
        CHECK_EQ(mallctlbymib(mib, miblen, NULL, NULL, &w, names[i].size),
                 strcmp(names[i].name, "epoch") ? EPERM : 0);
    }
    size_t mib[8], miblen = 8;
    /* two names under one parent: different ranks; an index is itself */
    size_t m2[8], m2len = 8;
    CHECK_EQ(mallctlnametomib("stats.allocated", mib, &miblen), 0);
    CHECK_EQ(mallctlnametomib("stats.active", m2, &m2len), 0);
    CHECK(mib[0] == m2[0] && mib[1] != m2[1]);
    miblen = 8;
    CHECK_EQ(mallctlnametomib("stats.arenas.4096.pactive", mib, &miblen), 0);
    CHECK_EQ(mib[2], 4096);
    mib[2] = 0; /* another arena's */
    size_t v0, v1, len = sizeof v0;
    CHECK_EQ(mallctlbymib(mib, miblen, &v0, &len, NULL, 0), 0);
    CHECK_EQ(v0, get_size("stats.arenas.4096.pactive"));
    mib[2] = 5;
    CHECK_EQ(mallctlbymib(mib, miblen, &v1, &len, NULL, 0), ENOENT);
    /* an action by MIB */
    miblen = 8;
    CHECK_EQ(mallctlnametomib("thread.tcache.flush", mib, &miblen), 0);
    CHECK_EQ(miblen, 3);
    CHECK_EQ(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0), 0);
    /* an inner node: a partial MIB, which names nothing */
    miblen = 8;
    CHECK_EQ(mallctlnametomib("stats.arenas", mib, &miblen), 0);
    CHECK_EQ(miblen, 2);
    CHECK_EQ(mallctlbymib(mib, miblen, &v0, &len, NULL, 0), ENOENT);
    /* room for fewer components than the name has: those, and no more */
    miblen = 2;
    mib[2] = 777;
    CHECK_EQ(mallctlnametomib("stats.arenas.0.pactive", mib, &miblen), 0);
    CHECK_EQ(miblen, 2);
    CHECK_EQ(mib[2], 777);
    /* unknown names and MIBs */
    miblen = 8;
    CHECK_EQ(mallctlnametomib("stats.nonesuch", mib, &miblen), ENOENT);
    CHECK_EQ(mallctlnametomib("stats.allocated.x", mib, &miblen), ENOENT);
    CHECK_EQ(mallctlnametomib("stats.arenas.9.pactive", mib, &miblen), ENOENT);
    CHECK_EQ(mallctlnametomib("", mib, &miblen), ENOENT);
    size_t bad[3] = { 999, 0, 0 };
    CHECK_EQ(mallctlbymib(bad, 1, &v0, &len, NULL, 0), ENOENT);
    CHECK_EQ(mallctlbymib(bad, 0, &v0, &len, NULL, 0), ENOENT);
    miblen = 8;
    CHECK_EQ(mallctlnametomib("stats.allocated", mib, &miblen), 0);
    mib[1] = 999;
    CHECK_EQ(mallctlbymib(mib, miblen, &v0, &len, NULL, 0), ENOENT);
    size_t deep[8] = { 0 };
    CHECK_EQ(mallctlbymib(deep, 8, &v0, &len, NULL, 0), ENOENT);
}

/* ---- nallocx --------------------------------------------------------------- */

static void sizes(void)
{
    static const size_t req[] = { 1, 8, 17, 100, 1000, 4000, 5000, 20000, 32768, 40000, 300000, 1 << 20 };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        void *p = malloc(req[i]);
        CHECK_EQ(nallocx(req[i], 0), malloc_usable_size(p));
        free(p);
    }
    /* every size up to 32 KiB, each in its slab class (malloc_usable_size
     * answers a live malloc-class object from its page tag: heap.h,
     * heap_usable_fast), and aligned ones, whose classes are the same */
    for (size_t n = 1; n <= 32768; n += n < 1024 ? 1 : 61) {
        void *p = malloc(n), *q = aligned_alloc(64, n);
        CHECK_EQ(nallocx(n, 0), malloc_usable_size(p));
        CHECK_EQ(nallocx(n, 6), malloc_usable_size(q)); /* MALLOCX_LG_ALIGN(6) */
        free(p);
        free(q);
    }
    void *a = aligned_alloc(4096, 100);
    CHECK_EQ(nallocx(100, 12), malloc_usable_size(a)); /* MALLOCX_LG_ALIGN(12) */
    free(a);
    CHECK_EQ(nallocx(3 << 20, 0), 4 << 20); /* a new huge mapping: whole 2 MiB granules */
    CHECK_EQ(nallocx(SIZE_MAX - 100, 0), 0);
    CHECK_EQ(nallocx(100, 63), 0);
}

/* ---- malloc_stats_print ---------------------------------------------------- */

static char text[1 << 17];
static size_t text_len, pieces, too_long;

static void collect(void *arg, const char *s)
{
    CHECK(arg == &text_len);
    size_t n = strlen(s);
    too_long += n > 512;
    pieces++;
    if (text_len + n < sizeof text) {
        memcpy(text + text_len, s, n);
        text_len += n;
        text[text_len] = 0;
    }
}

static uint64_t allocations(void) { return sl_stat("alloc_small") + sl_stat("alloc_medium") + sl_stat("alloc_huge"); }

static void stats_print(void)
{
    uint64_t before = allocations();
    malloc_stats_print(collect, &text_len, NULL);
    CHECK_EQ(allocations(), before); /* it allocated nothing */
    CHECK(pieces > 1 && !too_long);
    CHECK(!strncmp(text, "sluice statistics\n", 18));
    CHECK(strstr(text, "\n  resident_bytes ") && strstr(text, "reclaim registry"));
    CHECK(text[text_len - 1] == '\n');
    text_len = pieces = 0;
    malloc_stats_print(collect, &text_len, "J");
    CHECK(!strncmp(text, "{\"version\":1,", 13) && !strcmp(text + text_len - 2, "}\n"));
    CHECK(strstr(text, "\"resident_bytes\":"));
    /* no callback: stderr */
    int pipefd[2], saved = dup(2);
    CHECK_EQ(pipe2(pipefd, O_NONBLOCK), 0);
    fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20);
    dup2(pipefd[1], 2);
    malloc_stats_print(NULL, NULL, "");
    dup2(saved, 2);
    close(saved);
    close(pipefd[1]);
    ssize_t n = read(pipefd[0], text, sizeof text - 1);
    close(pipefd[0]);
    CHECK(n > 18 && !strncmp(text, "sluice statistics\n", 18));
}

int main(void)
{
    types_and_errors();
    figures();
    no_stale_figure();
    mibs();
    sizes();
    stats_print();
    return t_done("mallctl");
}
