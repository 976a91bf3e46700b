/* prof_counts.c — a small malloc's count of its class is also the class's
 * sample countdown (slab/heap.h: mag_pops and slab_pops, each with a bias
 * that profiling rewrites at every sample point). The counts must still
 * add up, profiling or not, and no reader may ever pair a count with
 * another bias:
 *   - mallocs of 16 B to 1 KiB from both places (the magazine and a
 *     slab's free list, after refills), half freed in random order, then
 *     all: every malloc is counted once (small, or medium where it was
 *     sampled: a run of its own) and every free once;
 *   - the same in bulk (sl_alloc_bulk, sl_free_bulk);
 *   - a thread that reads the counts without pause while another mallocs
 *     and frees, sampling every hundred mallocs or so: the sum it reads
 *     never goes back by more than the one malloc a sample moves from the
 *     small count to the medium one (a torn read, a count paired with
 *     another bias, is off by a whole gap). A stress: the window it
 *     probes is two stores wide, so it catches a missing pops_seq only
 *     now and then.
 * Run with profiling (SLUICE_PROF, a small SLUICE_PROF_SAMPLE: samples
 * every few KiB) and without; and `first`, with a 1 GiB mean: a thread's
 * first allocation counted by bytes after its small mallocs is not taken
 * for a sample point (first_gap). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"
#include "t.h"

#define N 120000

static void *obj[N];

static uint64_t allocs(void) { return sl_stat("alloc_small") + sl_stat("alloc_medium"); }
static uint64_t frees(void) { return sl_stat("free_small") + sl_stat("free_remote") + sl_stat("free_medium"); }

static void add_up(bool profiling)
{
    unsigned long long seed = 12345;
    uint64_t a0 = allocs(), f0 = frees(), m0 = sl_stat("alloc_medium");
    for (size_t i = 0; i < N; i++) {
        size_t n = 16 + t_rand(&seed) % 1009;
        obj[i] = sl_malloc(n);
        CHECK(obj[i] != NULL);
        memset(obj[i], 1, n);
    }
    uint64_t sampled = sl_stat("alloc_medium") - m0;
    CHECK_EQ(allocs() - a0, (uint64_t)N);
    t_shuffle(obj, N, &seed);
    for (size_t i = 0; i < N / 2; i++)
        sl_free(obj[i]);
    CHECK_EQ(frees() - f0, (uint64_t)N / 2);
    for (size_t i = 0; i < N / 2; i++) /* from the magazines and the slabs' free lists */
        obj[i] = sl_malloc(16 + t_rand(&seed) % 1009);
    CHECK_EQ(allocs() - a0, (uint64_t)N + N / 2);
    for (size_t i = 0; i < N; i++)
        sl_free(obj[i]);
    CHECK_EQ(frees() - f0, (uint64_t)N + N / 2);
    CHECK_EQ(sl_check(), 0);
    if (profiling) /* 60 MiB at a few KiB each: thousands of samples */
        CHECK(sampled > 100);
    printf("prof_counts: %d mallocs and frees counted once each; %llu of the first %d sampled\n", N + N / 2,
           (unsigned long long)sampled, N);
}

/* sl_alloc_bulk and sl_free_bulk, profiling or not: every object counted
 * once (a sampled one as the page run it is made as, not also as the
 * slab object it replaced), each one distinct and writable. */
static void bulk_add_up(bool profiling)
{
    uint64_t a0 = allocs(), f0 = frees(), m0 = sl_stat("alloc_medium"), done = 0;
    for (unsigned round = 0; round < 400; round++) {
        size_t size = 16 + round * 37 % 1009, n = 100 + round % 200;
        CHECK_EQ(sl_alloc_bulk(size, n, obj), n);
        for (size_t i = 0; i < n; i++)
            memset(obj[i], (int)i, size);
        for (size_t i = 0; i < n; i++)
            CHECK(((unsigned char *)obj[i])[0] == (unsigned char)i &&
                  ((unsigned char *)obj[i])[size - 1] == (unsigned char)i);
        sl_free_bulk(obj, n);
        done += n;
    }
    uint64_t sampled = sl_stat("alloc_medium") - m0;
    CHECK_EQ(allocs() - a0, done);
    CHECK_EQ(frees() - f0, done);
    CHECK_EQ(sl_check(), 0);
    if (profiling) /* 30 MiB at a few KiB each */
        CHECK(sampled > 100);
    printf("prof_counts: %llu objects allocated and freed in bulk, counted once each; %llu sampled\n",
           (unsigned long long)done, (unsigned long long)sampled);
}

/* This thread's first allocation counted by bytes (an aligned one),
 * after its small mallocs have started the sampler's random state (the
 * constructor armed this heap: each class's first malloc draws its gap):
 * sampled with the probability its 64 bytes give it at a 1 GiB mean
 * (2^-24), not for sure (its byte countdown, never drawn, was read as
 * run out; and sl_alloc_bulk read it as a point at byte 0). */
static void first_gap(void)
{
    void *a = sl_malloc(16), *b = sl_malloc(32);
    uint64_t m0 = sl_stat("alloc_medium");
    void *p = sl_aligned_alloc(64, 64);
    uint64_t sampled = sl_stat("alloc_medium") - m0;
    CHECK_MSG(sampled == 0, "the first aligned malloc was sampled");
    void *bulk[64];
    CHECK_EQ(sl_alloc_bulk(48, 64, bulk), 64);
    sl_free_bulk(bulk, 64);
    sl_free(p);
    sl_free(a);
    sl_free(b);
}

/* A thread that exits with a run parked in its page cache, on the first
 * slow path since the program has had a thread: its exit drains the cache
 * under heaps_lock, which must not start the reclaimer there
 * (pthread_create mallocs ld.so's thread data; with every malloc sampled
 * that takes the sampler's lock under heaps_lock, which a debug build
 * reports, and a refill could take heaps_lock again). */
static void *run_and_exit(void *arg)
{
    (void)arg;
    sl_free(sl_malloc(64 << 10));
    return NULL;
}

static void exit_drain(void)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, run_and_exit, NULL), 0);
    pthread_join(t, NULL);
    sl_free(sl_malloc(64 << 10)); /* a later slow path may start it */
    CHECK_EQ(sl_check(), 0);
}

static atomic_int reading_done, writing_done;
static uint64_t worst_back;

static void *reader(void *arg)
{
    (void)arg;
    uint64_t last = allocs();
    while (!atomic_load(&writing_done)) {
        uint64_t now = allocs();
        if (now < last && last - now > worst_back)
            worst_back = last - now;
        last = now;
    }
    atomic_store(&reading_done, 1);
    return NULL;
}

static void no_torn_reads(void)
{
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    unsigned long long seed = 99;
    for (int round = 0; round < 60; round++) {
        for (size_t i = 0; i < N / 4; i++)
            obj[i] = sl_malloc(16 + t_rand(&seed) % 48);
        for (size_t i = 0; i < N / 4; i++)
            sl_free(obj[i]);
    }
    atomic_store(&writing_done, 1);
    pthread_join(t, NULL);
    CHECK(atomic_load(&reading_done));
    CHECK_MSG(worst_back <= 2, "a reader saw the malloc count go back by %llu", (unsigned long long)worst_back);
    printf("prof_counts: the count read while sampling went back by at most %llu\n",
           (unsigned long long)worst_back);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "exit")) { /* SLUICE_PROF_SAMPLE=1 */
        exit_drain();
        return t_done("prof_counts");
    }
    if (argc > 1 && !strcmp(argv[1], "first")) { /* SLUICE_PROF_SAMPLE=1G */
        first_gap();
        return t_done("prof_counts");
    }
    const char *prof = getenv("SLUICE_PROF");
    add_up(prof && *prof);
    bulk_add_up(prof && *prof);
    no_torn_reads();
    return t_done("prof_counts");
}
