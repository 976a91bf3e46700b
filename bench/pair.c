/* The smallest allocation loop: N times malloc(64) then free of it, the
 * pointer kept through a volatile so neither call can be elided. Run by
 * bench/pair.sh under callgrind, which counts the instructions of a pair
 * as (I(2N) - I(N)) / N: start-up cancels out, the loop's own few
 * instructions stay in. */
#include <stdlib.h>

int main(int argc, char **argv)
{
    void *volatile p;
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    for (long i = 0; i < n; i++) {
        p = malloc(64);
        free(p);
    }
    (void)p;
    return 0;
}
