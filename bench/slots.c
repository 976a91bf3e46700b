/* A cache or hash table: one thread replaces random slots of 64k small
 * objects (8-512 B), touching each new object. The working set (about
 * 16 MB) is larger than the caches, so every line an operation touches
 * beside the object is likely a miss: what it measures is how many. */
#include "common.h"

int main(int argc, char **argv)
{
    enum { SLOTS = 65536 };
    long ops = (long)(4000000 * bench_scale(argc, argv));
    static char *slot[SLOTS];
    unsigned long long seed = 99, sum = 0;
    for (int i = 0; i < SLOTS; i++) {
        size_t n = 8 + rng(&seed) % 505;
        slot[i] = malloc(n);
        slot[i][0] = (char)n;
    }
    double t0 = now();
    for (long i = 0; i < ops; i++) {
        unsigned long long r = rng(&seed);
        int k = (int)(r % SLOTS);
        sum += (unsigned char)slot[k][0];
        free(slot[k]);
        size_t n = 8 + (r >> 20) % 505;
        slot[k] = malloc(n);
        slot[k][0] = (char)n;
    }
    double t = now() - t0;
    for (int i = 0; i < SLOTS; i++)
        free(slot[i]);
    report(t, sum);
    return 0;
}
