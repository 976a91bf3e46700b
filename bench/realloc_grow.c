/* realloc growth: strings appended to in small steps (to 64 KiB), vectors
 * doubling (to 8 MiB), interleaved so growth in place is not free. */
#include <string.h>

#include "common.h"

int main(int argc, char **argv)
{
    double scale = bench_scale(argc, argv);
    unsigned long long sum = 0;
    double t0 = now();
    long rounds = (long)(300 * scale);
    for (long r = 0; r < rounds; r++) {
        char *s[16] = { 0 };
        size_t len[16] = { 0 };
        for (int step = 0; step < 2048; step++)
            for (int k = 0; k < 16; k++) {
                size_t add = 1 + (size_t)((step * 7 + k) % 61);
                s[k] = realloc(s[k], len[k] + add);
                memset(s[k] + len[k], 'a' + k, add);
                len[k] += add;
            }
        for (int k = 0; k < 16; k++) {
            sum += (unsigned char)s[k][len[k] - 1];
            free(s[k]);
        }
        if (r % 10 == 0) {
            double *v = NULL;
            for (size_t cap = 16; cap <= (1u << 20); cap *= 2) {
                v = realloc(v, cap * sizeof *v);
                v[cap - 1] = (double)cap;
            }
            sum += (unsigned long long)v[(1u << 20) - 1];
            free(v);
        }
    }
    report(now() - t0, sum);
    return 0;
}
