/* Producer-consumer: producers allocate messages of 16-1024 bytes and pass
 * them through bounded rings; consumers free them (every free is remote). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common.h"

#define RING 1024
struct ring {
    _Atomic unsigned long head, tail;
    void *slot[RING];
};
static struct ring rings[2];
static long per_producer;

static void *producer(void *arg)
{
    struct ring *r = arg;
    unsigned long long seed = (unsigned long long)(uintptr_t)arg | 1;
    for (long i = 0; i < per_producer; i++) {
        size_t n = 16 + rng(&seed) % 1008;
        char *p = malloc(n);
        p[0] = 1;
        unsigned long h = atomic_load_explicit(&r->head, memory_order_relaxed);
        while (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= RING)
            sched_yield();
        r->slot[h % RING] = p;
        atomic_store_explicit(&r->head, h + 1, memory_order_release);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    struct ring *r = arg;
    for (long i = 0; i < per_producer; i++) {
        unsigned long t = atomic_load_explicit(&r->tail, memory_order_relaxed);
        while (atomic_load_explicit(&r->head, memory_order_acquire) == t)
            sched_yield();
        free(r->slot[t % RING]);
        atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    per_producer = (long)(2000000 * bench_scale(argc, argv));
    pthread_t t[4];
    double t0 = now();
    for (int i = 0; i < 2; i++) {
        pthread_create(&t[2 * i], NULL, producer, &rings[i]);
        pthread_create(&t[2 * i + 1], NULL, consumer, &rings[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    report(now() - t0, (unsigned long long)per_producer);
    return 0;
}
