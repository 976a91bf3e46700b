/* A run that needs no alignment is placed on free pages that are still
 * resident before any buddy chunk (page/page.c: resident_fit), so that a
 * program replacing buffers of varied sizes reuses the pages it freed
 * instead of faulting in clean ones beside them.
 *
 * SLUICE_DIRTY_DECAY_MS=0 (the test's environment): a freed run is advised
 * as it is freed (MADV_FREE: lazy, still resident) and goes straight back
 * to the buddy lists, parked in no cache. Runs of 10 pages fill a
 * pageblock, each in an aligned chunk of 16 (its last 6 pages free and
 * clean). Two of them are freed, the lower first: each leaves a free
 * chunk of 16 pages, 10 of them lazy. The buddy alone hands out the chunk
 * freed last (its list is LIFO); resident pages first takes the lowest
 * lazy stretch of 10 in the block, the run freed first. The lazy decay is
 * a minute, so the pages stay lazy meanwhile. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"
#include "t.h"

enum { N = 24, RUN = 10 * 4096 };

int main(void)
{
    static char *r[N];
    for (int i = 0; i < N; i++) {
        r[i] = malloc(RUN);
        CHECK(r[i] != NULL);
        memset(r[i], 1, RUN);
    }
    int k = 4, m = 8; /* in one pageblock, neither the other's buddy */
    uintptr_t blk = ~(uintptr_t)(2u << 20) + 1;
    CHECK(((uintptr_t)r[k] & blk) == ((uintptr_t)r[m] & blk));
    CHECK(r[k] < r[m] && r[m] - r[k] > 16 * 4096);
    char *low = r[k];
    free(r[k]);
    free(r[m]);
    r[k] = r[m] = NULL;
    char *p = malloc(RUN);
    CHECK(p == low); /* the lowest lazy stretch, not the chunk freed last */
    free(p);
    for (int i = 0; i < N; i++)
        free(r[i]);
    return t_done("resident_fit");
}
