/* Thread creation churn: 2 at a time, threads start, allocate and free a
 * few thousand small objects (some kept and freed by the parent), exit. */
#include <pthread.h>
#include <stdint.h>

#include "common.h"

static void *life(void *arg)
{
    void **keep = arg;
    unsigned long long seed = (uintptr_t)arg | 1;
    void *tmp[64] = { 0 };
    for (int i = 0; i < 3000; i++) {
        int k = (int)(rng(&seed) % 64);
        free(tmp[k]);
        tmp[k] = malloc(16 + rng(&seed) % 500);
    }
    for (int k = 0; k < 64; k++)
        keep[k] = tmp[k]; /* outlive the thread */
    return NULL;
}

int main(int argc, char **argv)
{
    long n = (long)(2000 * bench_scale(argc, argv));
    static void *kept[2][64];
    double t0 = now();
    for (long i = 0; i < n; i += 2) {
        pthread_t a, b;
        pthread_create(&a, NULL, life, kept[0]);
        pthread_create(&b, NULL, life, kept[1]);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 64; k++)
                free(kept[j][k]);
    }
    report(now() - t0, (unsigned long long)n);
    return 0;
}
