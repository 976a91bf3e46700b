/* Cross-thread frees: two threads, each allocates 64-1024 B objects and
 * hands them to the other, which frees them: every free is remote, in both
 * directions at once (a pipeline of two stages that swap buffers). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common.h"

#define RING 4096
struct ring {
    _Atomic unsigned long head, tail;
    void *slot[RING];
};
static struct ring rings[2]; /* rings[i]: allocated by thread i, freed by the other */
static long per_thread;

static void *stage(void *arg)
{
    int me = (int)(intptr_t)arg;
    struct ring *out = &rings[me], *in = &rings[!me];
    unsigned long long seed = 11u + (unsigned)me;
    long made = 0, freed = 0;
    while (made < per_thread || freed < per_thread) {
        if (made < per_thread) {
            unsigned long h = atomic_load_explicit(&out->head, memory_order_relaxed);
            if (h - atomic_load_explicit(&out->tail, memory_order_acquire) < RING) {
                size_t n = 64 + rng(&seed) % 961;
                char *p = malloc(n);
                p[0] = 1;
                out->slot[h % RING] = p;
                atomic_store_explicit(&out->head, h + 1, memory_order_release);
                made++;
            }
        }
        unsigned long t = atomic_load_explicit(&in->tail, memory_order_relaxed);
        if (freed < per_thread && atomic_load_explicit(&in->head, memory_order_acquire) != t) {
            free(in->slot[t % RING]);
            atomic_store_explicit(&in->tail, t + 1, memory_order_release);
            freed++;
        } else if (made >= per_thread) {
            sched_yield();
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    per_thread = (long)(2000000 * bench_scale(argc, argv));
    double t0 = now();
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, stage, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    report(now() - t0, (unsigned long long)per_thread);
    return 0;
}
