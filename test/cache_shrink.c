/* A page cache that shrinks is not a program that frees: one thread
 * replaces 1000 live objects of 32-256 KiB at random 300,000 times
 * (bench_sizes 1.5 4), so its page cache grows, and halves when the heap
 * turns sparse; the runs it drains then leave the pages in use, an
 * eighth of them at times. Counted as a drop, that purged the runs the
 * program was about to take back (a regret), and the drops of its real
 * last frees then purged nothing: it ended with ~200 MiB dirty. Now no
 * drop purges while it replaces, and its last frees leave little dirty.
 * Single-threaded, no reclaimer (the drop is the last free's mechanism). */
#include <stdint.h>
#include <stdio.h>

#include "sluice.h"
#include "t.h"

#define KiB 1024u
#define MiB (1024u * KiB)
enum { LIVE = 1000, REPLACE = 300000 };

static void *live[LIVE];
static unsigned long long seed = 42;

int main(void)
{
    uint64_t drops = 0, regrets = 0;
    for (int i = 0; i < LIVE + REPLACE; i++) {
        if (i == LIVE) { /* filled: the steady state starts */
            drops = sl_stat("drop_purge");
            regrets = sl_stat("drop_regret");
        }
        unsigned long long r = t_rand(&seed);
        unsigned k = (unsigned)(r % LIVE);
        sl_free(live[k]);
        size_t n = 32 * KiB + (size_t)(r >> 20) % (224 * KiB);
        char *p = sl_malloc(n);
        CHECK(p != NULL);
        p[0] = 1, p[n - 1] = 1;
        live[k] = p;
    }
    printf("replacing: %llu drop purges, %llu regrets, %llu page cache shrinks\n",
           (unsigned long long)(sl_stat("drop_purge") - drops),
           (unsigned long long)(sl_stat("drop_regret") - regrets), (unsigned long long)sl_stat("pcache_shrink"));
    CHECK_EQ(sl_stat("drop_purge"), drops);
    CHECK_EQ(sl_stat("drop_regret"), regrets);
    for (unsigned k = 0; k < LIVE; k++)
        sl_free(live[k]);
    uint64_t dirty = sl_stat("dirty_bytes");
    printf("the last free: %llu drop purges, %.1f MiB dirty\n",
           (unsigned long long)(sl_stat("drop_purge") - drops), dirty / (double)MiB);
    CHECK(sl_stat("drop_purge") > drops);
    CHECK(dirty <= 16 * MiB);
    CHECK_EQ(sl_check(), 0);
    return t_done("cache_shrink");
}
