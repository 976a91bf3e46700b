/* prof_arm.c — a thread whose heap was made before profiling started (a
 * library's constructor that runs before sluice's, here one of priority
 * 101 in a static link) is armed by its owner, at its next small malloc's
 * slow path: its mallocs are sampled from then on. sluice's constructor
 * arms only its own thread's heap (the rewrite of a heap's counts is its
 * owner's: slab/heap.h, pops_seq).
 * Run with SLUICE_PROF and SLUICE_PROF_SAMPLE=1: every malloc is sampled,
 * and a sampled small malloc is served by a page run (alloc_medium).
 * Without the owner's arming, none of the thread's mallocs would be. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sluice.h"
#include "t.h"

#define N 2000

static pthread_t early;
static atomic_int made, go, done;
static void *obj[N];

static void *early_thread(void *arg)
{
    (void)arg;
    void *warm = sl_malloc(64); /* its heap, made before sluice's constructor */
    atomic_store(&made, 1);
    while (!atomic_load(&go))
        t_pause_us(100);
    for (int i = 0; i < N; i++)
        obj[i] = sl_malloc(64);
    for (int i = 0; i < N; i++)
        sl_free(obj[i]);
    sl_free(warm);
    atomic_store(&done, 1);
    return NULL;
}

__attribute__((constructor(101))) static void before_sluice(void)
{
    pthread_create(&early, NULL, early_thread, NULL);
    while (!atomic_load(&made)) /* its heap exists before this constructor returns */
        t_pause_us(100);
}

int main(void)
{
    uint64_t runs0 = sl_stat("alloc_medium");
    atomic_store(&go, 1);
    pthread_join(early, NULL);
    uint64_t sampled = sl_stat("alloc_medium") - runs0;
    printf("prof_arm: %llu of the early thread's %d mallocs sampled\n", (unsigned long long)sampled, N);
    /* those before its first slow path (its magazine and slab) are not */
    CHECK(sampled >= N / 2);
    return t_done("prof_arm");
}
