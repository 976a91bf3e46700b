/* prof_sites.c — the program the heap-profiling tests (prof_pprof.sh) run:
 * sites with known shares of the live and allocated memory.
 *   malloc   keep_big keeps ~3/4 of the live bytes (malloc), keep_small
 *            ~1/4 (calloc, realloc, posix_memalign, aligned_alloc),
 *            churn allocates and frees many times both and keeps nothing;
 *            a profile is also written midway with sl_ctl("prof.dump")
 *            to argv[2]
 *   cache    three object caches: "big_cache" holds ~4/5 of the live
 *            bytes (sl_cache_alloc), "small_cache" ~1/5
 *            (sl_cache_alloc_bulk), "churn_cache" none
 *   leak     known leaks, for the exact leak report (SLUICE_PROF_SAMPLE=1):
 *            leak_malloc 10 x 1000 bytes, leak_calloc 3 x 100000 bytes,
 *            leak_cache 5 objects of cache "leaky_cache" (64 bytes);
 *            what else it allocates it frees
 *   grow     a page run grown by realloc from 40,000 to 1,000,000 bytes,
 *            every growth past its pages sampled (SLUICE_PROF_SAMPLE=1),
 *            and leaked by leak_grow: the report has its last size at
 *            one site, and the
 *            growths stayed in place where the memory allowed (a sampled
 *            growth takes its block's sample anew, it does not move);
 *            prints "in place: N" of its reallocs
 *   tiny     small mallocs, sampled by their classes' countdowns:
 *            keep_tiny keeps 150,000 x 64 bytes, and a thread of its own
 *            40,000 x 24 bytes (10,560,000 bytes in 190,000 objects);
 *            churn_tiny mallocs and frees 1,000,000 x 32 bytes
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

#define MAX_KEEP 200000
void *volatile keep[MAX_KEEP];
static int nkeep;
static volatile int ten = 10, three = 3, five = 5; /* loops the compiler does not unroll into several call sites */
static unsigned long rnd = 88172645463325252ull;

static size_t rsize(void)
{
    rnd ^= rnd << 13;
    rnd ^= rnd >> 7;
    rnd ^= rnd << 17;
    return 256 + rnd % (128 << 10);
}

static void hold(void *p)
{
    if (!p || nkeep == MAX_KEEP) {
        fprintf(stderr, "prof_sites: out of memory or room\n");
        exit(1);
    }
    keep[nkeep++] = p;
}

__attribute__((noinline)) void keep_big(size_t total)
{
    for (size_t got = 0; got < total;) {
        size_t n = rsize();
        hold(malloc(n));
        got += n;
    }
}

__attribute__((noinline)) void keep_small(size_t total)
{
    for (size_t got = 0, i = 0; got < total; i++) {
        size_t n = rsize();
        void *p = NULL;
        switch (i % 4) {
        case 0: p = calloc(1, n); break;
        case 1: p = realloc(malloc(64), n); break;
        case 2: if (posix_memalign(&p, 64, n)) p = NULL; break;
        default: p = aligned_alloc(256, n & ~(size_t)255); break;
        }
        hold(p);
        got += n;
    }
}

__attribute__((noinline)) void churn(size_t total)
{
    for (size_t got = 0; got < total;) {
        size_t n = rsize();
        void *volatile p = malloc(n);
        memset(p, 1, 64);
        free(p);
        got += n;
    }
}

static void run_malloc(const char *mid)
{
    keep_big(192u << 20);
    if (mid && sl_ctl("prof.dump", NULL, NULL, &mid, sizeof mid)) {
        fprintf(stderr, "prof_sites: prof.dump failed\n");
        exit(1);
    }
    keep_small(64u << 20);
    churn(1536u << 20);
    if (sl_prof_dump("/nonexistent-directory/heap.prof") != ENOENT) { /* open's error, errno kept */
        fprintf(stderr, "prof_sites: a dump to a missing directory did not say ENOENT\n");
        exit(1);
    }
}

__attribute__((noinline)) void fill_big(sl_cache_t *c, size_t count)
{
    for (size_t i = 0; i < count; i++)
        hold(sl_cache_alloc(c));
}

__attribute__((noinline)) void fill_small(sl_cache_t *c, size_t count)
{
    void *v[16];
    for (size_t i = 0; i < count; i += 16) {
        if (sl_cache_alloc_bulk(c, 16, v) != 16)
            hold(NULL);
        for (int k = 0; k < 16; k++)
            hold(v[k]);
    }
}

__attribute__((noinline)) void churn_cache(sl_cache_t *c, size_t count)
{
    void *v[64];
    for (size_t i = 0; i < count; i += 64) {
        for (int k = 0; k < 64; k++)
            v[k] = sl_cache_alloc(c);
        for (int k = 0; k < 32; k++)
            sl_cache_free(c, v[k]);
        sl_cache_free_bulk(c, 32, v + 32);
    }
}

static void run_cache(void)
{
    sl_cache_t *big = sl_cache_create("big_cache", 4000, 0, 0, NULL);
    sl_cache_t *small = sl_cache_create("small_cache", 1000, 0, 0, NULL);
    sl_cache_t *ch = sl_cache_create("churn_cache", 2000, 0, 0, NULL);
    fill_big(big, (64u << 20) / 4000);
    fill_small(small, (16u << 20) / 1000);
    churn_cache(ch, (512u << 20) / 2000);
}

__attribute__((noinline)) void leak_malloc(void)
{
    for (int i = 0; i < ten; i++)
        keep[i] = malloc(1000);
}

__attribute__((noinline)) void leak_calloc(void)
{
    for (int i = 0; i < three; i++)
        keep[10 + i] = calloc(1, 100000);
}

__attribute__((noinline)) void leak_cache(sl_cache_t *c)
{
    for (int i = 0; i < five; i++)
        keep[20 + i] = sl_cache_alloc(c);
}

static void run_leak(void)
{
    sl_cache_t *c = sl_cache_create("leaky_cache", 64, 0, 0, NULL);
    void *freed[100];
    for (int i = 0; i < 100; i++) /* all freed: in no report */
        freed[i] = malloc(i * 37 + 1);
    leak_malloc();
    leak_calloc();
    leak_cache(c);
    for (int i = 0; i < 100; i++)
        free(freed[i]);
    void *v = sl_cache_alloc(c);
    sl_cache_free(c, v);
}

static uint64_t stat_now(const char *name)
{
    uint64_t v = 0;
    size_t len = sizeof v;
    if (sl_ctl(name, &v, &len, NULL, 0))
        exit(3);
    return v;
}

static __attribute__((noinline)) void leak_grow(void)
{
    size_t n = 40000;
    char *p = malloc(n);
    memset(p, 1, n);
    while (n < 1000000) { /* each step past the run's pages (n > 16 KiB) */
        n = n + n / 4 < 1000000 ? n + n / 4 : 1000000;
        p = realloc(p, n);
        if (!p)
            exit(4);
        p[n - 1] = 1;
    }
    keep[0] = p;
}

static void run_grow(void)
{
    uint64_t before = stat_now("stat.realloc_inplace");
    leak_grow();
    dprintf(1, "in place: %llu\n", (unsigned long long)(stat_now("stat.realloc_inplace") - before)); /* stdio's buffer would be a leak */
}

__attribute__((noinline)) void keep_tiny(size_t count, size_t size)
{
    for (size_t i = 0; i < count; i++)
        hold(malloc(size));
}

__attribute__((noinline)) void churn_tiny(size_t count)
{
    for (size_t i = 0; i < count; i++) {
        void *volatile p = malloc(32);
        free(p);
    }
}

static void *tiny_thread(void *arg)
{
    (void)arg;
    keep_tiny(40000, 24);
    return NULL;
}

static void run_tiny(void)
{
    pthread_t t;
    keep_tiny(150000, 64);
    if (pthread_create(&t, NULL, tiny_thread, NULL) || pthread_join(t, NULL)) {
        fprintf(stderr, "prof_sites: no thread\n");
        exit(1);
    }
    churn_tiny(1000000);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "malloc";
    if (!strcmp(mode, "malloc"))
        run_malloc(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(mode, "cache"))
        run_cache();
    else if (!strcmp(mode, "leak"))
        run_leak();
    else if (!strcmp(mode, "grow"))
        run_grow();
    else if (!strcmp(mode, "tiny"))
        run_tiny();
    else
        return 2;
    return 0;
}
