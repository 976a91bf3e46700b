/* The smallest allocation loop: N times malloc then free of it, the
 * pointer kept through a volatile so neither call can be elided.
 *   bench_pair N          malloc(64): bench/pair.sh runs it under
 *                         callgrind, which counts the instructions of a
 *                         pair as (I(2N) - I(N)) / N (start-up cancels
 *                         out, the loop's own few instructions stay in)
 *   bench_pair N mixed    a random size of 8-64 bytes each pair (4 classes,
 *                         the next pair's class the same one time in four)
 *   bench_pair N runs     4 pairs of 16 bytes, then 4 of 32, repeated
 * Each prints seconds= for timing. One size, or classes that always
 * change, let the core predict which loads depend on the last free's
 * stores; the two last do not. */
#include <string.h>

#include "common.h"

int main(int argc, char **argv)
{
    void *volatile p;
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int mode = argc > 2 ? (!strcmp(argv[2], "mixed") ? 1 : !strcmp(argv[2], "runs") ? 2 : 0) : 0;
    unsigned long long seed = 7;
    double t0 = now();
    if (mode == 0) /* the loop callgrind counts: nothing but the pair */
        for (long i = 0; i < n; i++) {
            p = malloc(64);
            free(p);
        }
    else
        for (long i = 0; i < n; i++) {
            size_t size = mode == 1 ? 8 + rng(&seed) % 57 : (size_t)16 << ((i >> 2) & 1);
            p = malloc(size);
            free(p);
        }
    (void)p;
    printf("seconds=%.6f\n", now() - t0);
    return 0;
}
