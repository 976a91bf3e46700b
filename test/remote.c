/* Remote frees, batched (slab/remote_batch.c) and set in the remote-free
 * bitmap: a thread's batch is held until it fills (256 units: an object
 * of 1 KiB or less is one, a larger one a unit a KiB),
 * until the thread drains (sl_purge) or exits, or until fork orphans its
 * heap (the child flushes it); the bits of many words come back whole, and
 * nothing is written into a freed object before its owner takes it; a
 * batch whose slab the freeing thread has adopted meanwhile is freed as
 * its own.
 * The counts are the "free_remote" statistic: objects pushed, not objects
 * freed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#define N 40 /* under the batch's 256 units at these sizes */

static void *objs[4096];
static size_t nobjs, obj_size;
static pthread_barrier_t bar;

/* Free objs[0, nobjs), then wait twice on bar (the main thread looks at the
 * counts in between), then drain if asked to. */
static void *freer(void *arg)
{
    for (size_t i = 0; i < nobjs; i++)
        sl_free(objs[i]);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    if (arg)
        sl_purge();
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    return NULL;
}

/* How many of objs[0, nobjs) come back among the next `tries` objects of
 * obj_size (all freed again): N when they were all returned. */
static size_t come_back(size_t tries)
{
    static void *again[8192];
    size_t found = 0;
    for (size_t i = 0; i < tries; i++) {
        again[i] = sl_malloc(obj_size);
        for (size_t j = 0; j < nobjs; j++)
            found += again[i] == objs[j];
    }
    for (size_t i = 0; i < tries; i++)
        sl_free(again[i]);
    return found;
}

/* Start a freer (drain: sl_purge when told) and wait until it has freed;
 * let it run through its remaining `waits` barriers and join it. */
static pthread_t freer_start(void *drain)
{
    pthread_t t;
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&t, NULL, freer, drain);
    pthread_barrier_wait(&bar);
    return t;
}
static void freer_finish(pthread_t t, int waits)
{
    while (waits--)
        pthread_barrier_wait(&bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&bar);
}

static void fill(size_t n, size_t size)
{
    nobjs = n;
    obj_size = size;
    for (size_t i = 0; i < n; i++) {
        objs[i] = sl_malloc(size);
        memset(objs[i], (int)i, size);
    }
}

/* A batch is held while the thread lives, and pushed when it drains; the
 * owner then takes every object back. */
static void test_held_until_drain(void)
{
    fill(N, 64);
    uint64_t before = sl_stat("free_remote");
    pthread_t t = freer_start((void *)1);
    CHECK_EQ(sl_stat("free_remote") - before, 0); /* batched, not pushed */
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); /* it drained */
    CHECK_EQ(sl_stat("free_remote") - before, N);
    sl_purge(); /* collect: N objects back in this thread's slab */
    CHECK(sl_check() == 0);
    freer_finish(t, 1);
    CHECK_EQ(come_back(8192), N); /* the same addresses, none twice */
}

/* Thread exit pushes the batch. */
static void test_thread_exit(void)
{
    fill(N, 100);
    uint64_t before = sl_stat("free_remote");
    freer_finish(freer_start(NULL), 3);
    CHECK_EQ(sl_stat("free_remote") - before, N);
    sl_purge();
    CHECK(sl_check() == 0);
}

/* n objects of size freed by a thread that holds its batch: `pushed` of
 * them go to their owner while it lives, by the batch's limits; the rest
 * are the batch's bytes (the drain's held figure: no other thread holds
 * a batch now). */
static void check_limit(size_t n, size_t size, uint64_t pushed)
{
    fill(n, size);
    uint64_t before = sl_stat("free_remote");
    pthread_t t = freer_start(NULL);
    CHECK_EQ(sl_stat("free_remote") - before, pushed);
    CHECK_EQ(sl_stat("held.remote_batches"), (n - pushed) * size);
    freer_finish(t, 3);
    sl_purge();
    CHECK(sl_check() == 0);
}

/* fork while another thread holds a batch: the child pushes it (the
 * heap is orphaned), and its objects come back to the child's slabs. */
static void test_fork(void)
{
    fill(N, 48);
    uint64_t before = sl_stat("free_remote");
    pthread_t t = freer_start(NULL); /* it holds N objects in its batch */
    pid_t pid = fork();
    if (pid == 0) {
        int ok = sl_stat("free_remote") - before == N;
        sl_purge();
        ok &= sl_check() == 0;
        ok &= come_back(8192) == N;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    freer_finish(t, 3);
    sl_purge();
    CHECK(sl_check() == 0);
}

/* A thread allocates, hands its objects over and exits; this thread frees
 * 40 of them (batched), then adopts the exited thread's partial slab by
 * allocating the same size: its batch now holds objects of its own slab,
 * which the flush frees one by one as its own. */
static void *allocator(void *arg)
{
    (void)arg;
    fill(100, 208);
    return NULL;
}

static void test_adopted(void)
{
    pthread_t t;
    pthread_create(&t, NULL, allocator, NULL);
    pthread_join(t, NULL);
    /* the last 40: the exited thread's partial slab (its first is full) */
    for (size_t i = 60; i < 100; i++)
        sl_free(objs[i]);
    void *mine = sl_malloc(208); /* adopts the orphaned partial slab */
    for (size_t i = 0; i < 60; i++)
        sl_free(objs[i]);
    sl_purge(); /* pushes the batch: its slab is this thread's now */
    CHECK(sl_check() == 0);
    sl_free(mine);
    sl_purge();
    CHECK(sl_check() == 0);
}

/* Records of several objects: runs of neighbours in one bitmap word, freed
 * remotely in random order and in address order, many rounds; contents of
 * the live ones untouched. */
static void *free_list(void *arg)
{
    void **v = arg;
    for (size_t i = 0; v[i]; i++)
        sl_free(v[i]);
    return NULL;
}

static void test_words(void)
{
    static void *v[2049];
    unsigned long long seed = 3;
    for (int round = 0; round < 20; round++) {
        size_t size = round % 2 ? 16 : 32 + 16 * (size_t)(round % 5);
        for (size_t i = 0; i < 2048; i++) {
            v[i] = sl_malloc(size);
            memset(v[i], 0x5a, size);
        }
        /* free every other one remotely, the rest stay live */
        static void *odd[1025];
        for (size_t i = 0; i < 1024; i++)
            odd[i] = v[2 * i + 1];
        odd[1024] = NULL;
        if (round % 3 == 0)
            t_shuffle(odd, 1024, &seed);
        pthread_t t;
        pthread_create(&t, NULL, free_list, odd);
        pthread_join(t, NULL);
        /* flushed at the thread's exit, not taken yet: the freeing thread
         * wrote its mark into each object's second word (slab/heap.h) and
         * nothing else, and the marks are all the same */
        size_t written = 0, marks = 0;
        uint64_t mark = ((volatile uint64_t *)v[1])[1];
        for (size_t i = 1; i < 2048; i += 2) {
            for (size_t b = 0; b < size; b++)
                written += (b < 8 || b >= 16) && ((volatile unsigned char *)v[i])[b] != 0x5a;
            marks += ((volatile uint64_t *)v[i])[1] == mark;
        }
        CHECK_EQ(written, 0);
        CHECK_EQ(marks, 1024);
        CHECK(mark != 0x5a5a5a5a5a5a5a5aull);
        CHECK(sl_check() == 0);
        sl_purge();
        CHECK(sl_check() == 0);
        size_t bad = 0;
        for (size_t i = 0; i < 2048; i += 2)
            for (size_t b = 0; b < size; b++)
                bad += ((unsigned char *)v[i])[b] != 0x5a;
        CHECK_EQ(bad, 0);
        for (size_t i = 0; i < 2048; i += 2)
            sl_free(v[i]);
    }
    sl_purge();
    CHECK(sl_check() == 0);
}

int main(void)
{
    test_held_until_drain();
    test_thread_exit();
    /* the limit is 256 units: an object of 1 KiB or less is one, a
     * larger one a unit a KiB (rounded up), so a batch that waits holds
     * at most 256 objects and less than 256 KiB */
    check_limit(40, 16384, 32); /* 16 units each: every 16th pushes */
    check_limit(600, 32, 512);  /* one unit each: every 256th */
    check_limit(150, 1536, 128); /* two units each: every 128th (192 KiB) */
    test_fork();
    test_adopted();
    test_words();
    return t_done("remote");
}
