/* Single-thread size sweep: a working set of 1000 live objects per size
 * band, random replacement, each object touched. Bands: 8-64, 64-512,
 * 512 B-4 KiB, 4-32 KiB, 32-256 KiB, 256 KiB-2 MiB. A second argument
 * (0-5) runs that band alone: `valgrind --tool=callgrind bench_sizes 0.5 4`
 * counts the instructions of 100,000 replacements of 32-256 KiB runs. */
#include <stdlib.h>
#include <string.h>

#include "common.h"

int main(int argc, char **argv)
{
    double scale = bench_scale(argc, argv);
    static const size_t bands[][2] = { { 8, 64 }, { 64, 512 }, { 512, 4096 }, { 4096, 32768 },
                                       { 32768, 262144 }, { 262144, 2097152 } };
    static const long ops_per_band[] = { 4000000, 4000000, 2000000, 1000000, 200000, 20000 };
    enum { LIVE = 1000 };
    void *live[LIVE] = { 0 };
    unsigned long long seed = 42, sum = 0;
    double t0 = now();
    int only = argc > 2 ? atoi(argv[2]) : -1;
    for (int b = 0; b < 6; b++) {
        if (only >= 0 && b != only)
            continue;
        double tb = now();
        long ops = (long)(ops_per_band[b] * scale);
        size_t lo = bands[b][0], span = bands[b][1] - lo;
        for (long i = 0; i < ops; i++) {
            unsigned long long r = rng(&seed);
            int k = (int)(r % LIVE);
            free(live[k]);
            size_t n = lo + (r >> 20) % span;
            char *p = malloc(n);
            p[0] = (char)i;
            p[n - 1] = (char)i;
            sum += (unsigned char)p[0];
            live[k] = p;
        }
        for (int k = 0; k < LIVE; k++) {
            free(live[k]);
            live[k] = NULL;
        }
        fprintf(stderr, "band %zu-%zu: %.1f ns/op\n", bands[b][0], bands[b][1], (now() - tb) / (double)ops * 1e9);
    }
    report(now() - t0, sum);
    return 0;
}
