/* Large buffers, as mimalloc-bench's malloc-large: one thread allocates
 * buffers of 2-32 MiB, touches one byte every 64 KiB, and frees them, with a
 * few live at a time (a decoder's frame buffers, a vector doubling, a
 * request body read whole). What it measures: whether a freed large buffer
 * is reused without mmap/munmap and page faults on every cycle, and whether
 * a sparse touch faults in whole 2 MiB hugepages. */
#include "common.h"

int main(int argc, char **argv)
{
    double scale = bench_scale(argc, argv);
    enum { LIVE = 4 };
    char *live[LIVE] = { 0 };
    long ops = (long)(2000 * scale);
    unsigned long long seed = 7, sum = 0;
    double t0 = now();
    for (long i = 0; i < ops; i++) {
        unsigned long long r = rng(&seed);
        int k = (int)(r % LIVE);
        free(live[k]);
        size_t n = ((size_t)2 << 20) + (size_t)((r >> 16) % (30u << 20));
        char *p = malloc(n);
        for (size_t off = 0; off < n; off += 64 << 10)
            p[off] = (char)i;
        sum += (unsigned char)p[n / 2 & ~(size_t)0xffff];
        live[k] = p;
    }
    for (int k = 0; k < LIVE; k++)
        free(live[k]);
    report(now() - t0, sum);
    return 0;
}
