/* Mixed sizes with realloc: one thread keeps 4k live blocks of 8 B to
 * 256 KiB (most small, a tail of large ones) and replaces random ones; one
 * operation in 8 grows or shrinks a block with realloc instead. Every new
 * block is touched once per 4 KiB. What it measures: whether freed medium
 * memory is reused at once, or advised to the kernel and faulted back in
 * (madvise calls and page faults per operation). */
#include <string.h>

#include "common.h"

static size_t pick(unsigned long long *s)
{
    unsigned long long r = rng(s);
    unsigned band = (unsigned)(r % 16);
    if (band < 10)
        return 8 + (r >> 8) % 249;           /* 8-256 B */
    if (band < 14)
        return 256 + (r >> 8) % (16 << 10);  /* to 16 KiB */
    return (16 << 10) + (r >> 8) % (240 << 10); /* to 256 KiB */
}

static void touch(char *p, size_t n, long i)
{
    for (size_t off = 0; off < n; off += 4096)
        p[off] = (char)i;
    p[n - 1] = (char)i;
}

int main(int argc, char **argv)
{
    enum { LIVE = 4096 };
    long ops = (long)(1000000 * bench_scale(argc, argv));
    static char *blk[LIVE];
    unsigned long long seed = 5, sum = 0;
    double t0 = now();
    for (long i = 0; i < ops; i++) {
        unsigned long long r = rng(&seed);
        int k = (int)(r % LIVE);
        size_t n = pick(&seed);
        if (blk[k] && (r >> 40) % 8 == 0) {
            blk[k] = realloc(blk[k], n);
        } else {
            free(blk[k]);
            blk[k] = malloc(n);
        }
        touch(blk[k], n, i);
        sum += (unsigned char)blk[k][0];
    }
    double t = now() - t0;
    for (int k = 0; k < LIVE; k++)
        free(blk[k]);
    report(t, sum);
    return 0;
}
