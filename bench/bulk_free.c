/* The SLUB bulk-free experiment in user space (slab_bulk_test01): 256-byte
 * objects, for each bulk size B allocate B objects then free them, timing
 * only the free with rdtsc; one by one (free) vs in bulk (sl_free_bulk,
 * found with dlsym, so the same binary runs under any preloaded allocator).
 * "same": objects of this thread; "remote": objects allocated by another
 * thread that stays alive; "cold": objects of this thread freed long after
 * they were written (run_free_cold). Also allocation: malloc one by one vs
 * sl_alloc_bulk. Prints one line per (mode, B): cycles and ns per object. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <x86intrin.h>

#include "common.h"

#define OBJ   256
static size_t TOTAL = 1000000; /* objects per measurement; argv[1] scales it */

static void (*free_bulk)(void **, size_t);
static size_t (*alloc_bulk)(size_t, size_t, void **);
static const size_t sizes[] = { 1, 2, 3, 4, 8, 16, 30, 32, 34, 48, 64, 128, 158, 250 };
static double ns_per_cycle;

static void calibrate(void)
{
    double t0 = now();
    uint64_t c0 = __rdtsc();
    while (now() - t0 < 0.2)
        ;
    ns_per_cycle = (now() - t0) * 1e9 / (double)(__rdtsc() - c0);
}

/* remote objects come from a helper thread that stays alive */
static void **pool;
static size_t pool_n;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase; /* 1: please allocate pool_n objects, 2: done, 3: exit */

static void *helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (phase != 1 && phase != 3)
            pthread_cond_wait(&cv, &mu);
        if (phase == 3)
            break;
        for (size_t i = 0; i < pool_n; i++) {
            pool[i] = malloc(OBJ);
            memset(pool[i], 1, 8);
        }
        phase = 2;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void fill_remote(size_t n)
{
    pthread_mutex_lock(&mu);
    pool_n = n;
    phase = 1;
    pthread_cond_broadcast(&cv);
    while (phase != 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* rdtsc cycles to free objs[0..b), one by one or in bulk */
static uint64_t timed_free(void **objs, size_t b, int bulk)
{
    uint64_t c0 = __rdtsc();
    if (bulk)
        free_bulk(objs, b);
    else
        for (size_t i = 0; i < b; i++)
            free(objs[i]);
    return __rdtsc() - c0;
}

static void run_free(const char *mode, size_t b, int bulk, int remote)
{
    size_t iters = TOTAL / b, n = iters * b;
    uint64_t cycles = 0;
    if (remote)
        fill_remote(n);
    for (size_t it = 0; it < iters; it++) {
        void **objs = remote ? pool + it * b : pool;
        if (!remote)
            for (size_t i = 0; i < b; i++) {
                objs[i] = malloc(OBJ);
                memset(objs[i], 1, 8);
            }
        cycles += timed_free(objs, b, bulk);
    }
    double per = (double)cycles / (double)n;
    printf("%s bulk=%zu cycles=%.1f ns=%.2f\n", mode, b, per, per * ns_per_cycle);
}

/* Cold: every batch is allocated and written first (TOTAL objects, 256 MB),
 * then the batches are freed in the order they were filled, so each is
 * freed long after its lines left the caches: network buffers and request
 * arenas freed at the end of their life. */
static void run_free_cold(const char *mode, size_t b, int bulk)
{
    size_t iters = TOTAL / b, n = iters * b;
    uint64_t cycles = 0;
    for (size_t i = 0; i < n; i++) {
        pool[i] = malloc(OBJ);
        memset(pool[i], 1, 8);
    }
    for (size_t it = 0; it < iters; it++) {
        void **objs = pool + it * b;
        cycles += timed_free(objs, b, bulk);
    }
    double per = (double)cycles / (double)n;
    printf("%s bulk=%zu cycles=%.1f ns=%.2f\n", mode, b, per, per * ns_per_cycle);
}

static void run_alloc(const char *mode, size_t b, int bulk)
{
    size_t iters = TOTAL / b;
    uint64_t cycles = 0;
    for (size_t it = 0; it < iters; it++) {
        uint64_t c0 = __rdtsc();
        if (bulk)
            alloc_bulk(OBJ, b, pool);
        else
            for (size_t i = 0; i < b; i++)
                pool[i] = malloc(OBJ);
        cycles += __rdtsc() - c0;
        for (size_t i = 0; i < b; i++)
            free(pool[i]);
    }
    double per = (double)cycles / (double)(iters * b);
    printf("%s bulk=%zu cycles=%.1f ns=%.2f\n", mode, b, per, per * ns_per_cycle);
}

int main(int argc, char **argv)
{
    TOTAL = (size_t)(TOTAL * bench_scale(argc, argv));
    free_bulk = (void (*)(void **, size_t))dlsym(RTLD_DEFAULT, "sl_free_bulk");
    alloc_bulk = (size_t(*)(size_t, size_t, void **))dlsym(RTLD_DEFAULT, "sl_alloc_bulk");
    calibrate();
    pool = malloc(sizeof(void *) * TOTAL);
    pthread_t t;
    pthread_create(&t, NULL, helper, NULL);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t b = sizes[k];
        run_free("free_same", b, 0, 0);
        run_free("free_remote", b, 0, 1);
        run_free_cold("free_cold", b, 0);
        run_alloc("alloc", b, 0);
        if (free_bulk) {
            run_free("bulkfree_same", b, 1, 0);
            run_free("bulkfree_remote", b, 1, 1);
            run_free_cold("bulkfree_cold", b, 1);
            run_alloc("bulkalloc", b, 1);
        }
    }
    pthread_mutex_lock(&mu);
    phase = 3;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    return 0;
}
