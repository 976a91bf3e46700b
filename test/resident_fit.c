/* A run that needs no alignment is placed on free pages that are still
 * resident before any buddy chunk (page/page.c: resident_fit), so that a
 * program replacing buffers of varied sizes reuses the pages it freed
 * instead of faulting in clean ones beside them.
 *
 * SLUICE_DIRTY_DECAY_MS=0 (the test's environment): a freed run is advised
 * as it is freed (MADV_FREE: lazy, still resident) and goes straight back
 * to the buddy lists, parked in no cache. Runs of 16 pages (aligned
 * chunks of 16) fill most of a pageblock; two neighbours that are not
 * buddies are freed: 32 lazy pages in a row, but no free chunk of 32.
 * A run of 20 pages: the buddy alone takes a clean chunk of 32 from the
 * block's untouched end; resident pages first take the lazy stretch. The
 * lazy decay is a minute, so the pages stay lazy meanwhile. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"
#include "t.h"

enum { N = 24, RUN = 16 * 4096, BIG = 20 * 4096 };

int main(void)
{
    static char *r[N];
    for (int i = 0; i < N; i++) {
        r[i] = malloc(RUN);
        CHECK(r[i] != NULL);
        memset(r[i], 1, RUN);
    }
    /* two neighbours in one pageblock, the lower one an odd chunk (so the
     * upper one is not its buddy) */
    uintptr_t blk = ~(uintptr_t)(2u << 20) + 1;
    int k = -1;
    for (int i = 0; i + 1 < N && k < 0; i++)
        if (r[i + 1] == r[i] + RUN && ((uintptr_t)r[i] / RUN) % 2 == 1 &&
            ((uintptr_t)r[i] & blk) == ((uintptr_t)r[i + 1] & blk))
            k = i;
    CHECK(k >= 0);
    char *low = r[k];
    free(r[k]);
    free(r[k + 1]);
    r[k] = r[k + 1] = NULL;
    char *p = malloc(BIG);
    CHECK(p == low); /* the lazy stretch, not a clean chunk of 32 */
    memset(p, 2, BIG);
    free(p);
    for (int i = 0; i < N; i++)
        free(r[i]);
    CHECK(sl_check() == 0);

    /* runs of varied lengths replaced at random, some grown by realloc:
     * the buddy's invariants and the page states hold throughout */
    static char *v[256];
    unsigned long long x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % 256);
        size_t n = 33 * 1024 + (size_t)(x >> 20) % (224 * 1024);
        if (v[k] && (x >> 12) % 8 == 0)
            v[k] = realloc(v[k], n);
        else {
            free(v[k]);
            v[k] = malloc(n);
        }
        CHECK(v[k] != NULL);
        v[k][0] = v[k][n - 1] = 1;
        if (i % 5000 == 4999)
            CHECK(sl_check() == 0);
    }
    for (int k = 0; k < 256; k++)
        free(v[k]);
    CHECK(sl_check() == 0);
    return t_done("resident_fit");
}
