/* The last free: a single-threaded program builds about 400 MiB of mixed
 * sizes (16 B to 32 KiB, log-uniform) and a 64 MiB buffer, frees 9 of
 * every 10 batches of 4096 objects (a phase's temporaries; argument 2 = 1
 * frees 9 objects of every 10 instead, scattered: no page can come free)
 * and the buffer, then stops allocating and sleeps. What it measures: how
 * much stays resident (Rss - LazyFree, smaps_rollup) right after the frees
 * and after 0.5, 1 and 2 s idle, against the live bytes, and the threads
 * the process has (a reclaimer thread would be one more).
 *   bench_last_free [scale] [scattered]
 * prints live_mib= held_mib_0= held_mib_1s= held_mib_2s= threads= */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static long held_kib(void) { return (long)(proc_held() >> 10); }

int main(int argc, char **argv)
{
    double scale = bench_scale(argc, argv);
    int scattered = argc > 2 && atoi(argv[2]);
    size_t total = (size_t)(400.0 * scale * (1 << 20)), used = 0, n = 0, cap = total / 16 + 16;
    void **p = malloc(cap * sizeof *p);
    size_t *sz = malloc(cap * sizeof *sz);
    unsigned long long seed = 12345;
    while (used < total && n < cap) {
        double r = (double)(rng(&seed) >> 11) / (double)(1ull << 53);
        size_t z = (size_t)(16.0 * __builtin_exp(r * __builtin_log(2048.0)));
        p[n] = malloc(z);
        memset(p[n], 1, z);
        sz[n] = z;
        used += z;
        n++;
    }
    size_t big_n = (size_t)(64.0 * scale * (1 << 20));
    char *big = malloc(big_n);
    memset(big, 2, big_n);
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        int keep = scattered ? i % 10 == 0 : (i / 4096) % 10 == 0;
        if (keep)
            live += sz[i];
        else
            free(p[i]);
    }
    free(big);
    long h0 = held_kib();
    usleep(1000000);
    long h1 = held_kib();
    usleep(1000000);
    long h2 = held_kib();
    printf("live_mib=%.1f\nheld_mib_0=%.1f\nheld_mib_1s=%.1f\nheld_mib_2s=%.1f\nthreads=%d\n", live / 1048576.0,
           h0 / 1024.0, h1 / 1024.0, h2 / 1024.0, proc_threads());
    return 0;
}
