/* Cache lines a free and a malloc touch beyond the object: the program of
 * bench/lines.py, which runs it under valgrind's lackey (every data access
 * traced) and counts the distinct 64-byte lines each call reads or writes,
 * leaving out the object's own lines and the stack's.
 * One thread replaces random slots of 16k objects of one size (argv[1],
 * default 64 bytes), as bench/slots does; after a warm-up, each of the
 * last MEASURED replacements is bracketed by stores to marker[0..2]
 * (before the free, between the free and the malloc, after the malloc),
 * and its two addresses are printed on stdout: "op FREED ALLOCATED".
 * Before the warm-up, one line on stderr (where lackey's trace goes too)
 * names the markers, a stack address and the program's main. */
#include <stdint.h>
#include <string.h>

#include "common.h"

#define SLOTS    16384
#define WARMUP   50000
#define MEASURED 2000

volatile char marker[3];

int main(int argc, char **argv)
{
    size_t size = argc > 1 ? (size_t)atol(argv[1]) : 64;
    static char *slot[SLOTS];
    static uintptr_t log_[MEASURED][2];
    unsigned long long seed = 5;
    int stack_probe = 0;
    fprintf(stderr, "lines-markers %lx stack %lx main %lx\n", (unsigned long)(uintptr_t)marker,
            (unsigned long)(uintptr_t)&stack_probe, (unsigned long)(uintptr_t)main);
    fflush(stderr);
    for (int i = 0; i < SLOTS; i++) {
        slot[i] = malloc(size);
        memset(slot[i], 1, size);
    }
    for (long i = 0; i < WARMUP + MEASURED; i++) {
        int k = (int)(rng(&seed) % SLOTS), m = i >= WARMUP;
        if (m)
            marker[0] = 1;
        free(slot[k]);
        if (m)
            marker[1] = 1;
        char *p = malloc(size);
        if (m) {
            marker[2] = 1;
            log_[i - WARMUP][0] = (uintptr_t)slot[k];
            log_[i - WARMUP][1] = (uintptr_t)p;
        }
        p[0] = 1;
        slot[k] = p;
    }
    for (int i = 0; i < MEASURED; i++)
        printf("op %lx %lx\n", (unsigned long)log_[i][0], (unsigned long)log_[i][1]);
    for (int i = 0; i < SLOTS; i++)
        free(slot[i]);
    return 0;
}
