/* Unit: a heap's pop counts, which are also its sample countdowns
 * (src/slab/heap.h: mag_pops and slab_pops with their bias, pops_seq).
 * On a heap of the test's own, never used for allocation:
 *   - a fresh heap counts from 0, with no bias (profiling off: an add
 *     reaches 0 only after 2^64 of them);
 *   - heap_sample_arm biases every count of every class so that the next
 *     add makes 0, and keeps what each has counted;
 *   - a fork child whose thread was stopped in the middle of a rewrite of
 *     a bias (pops_seq odd) finishes it from its record (heap_pops_settle):
 *     pops_seq even again, the count and bias those of the record; a heap
 *     not in a rewrite is left as it is. */
#define _GNU_SOURCE
#include <string.h>

#include "../src/slab/heap_mag.h"
#include "t.h"

static struct heap h; /* zeroed: counts 0, bias 0, pops_seq 0 */

int main(void)
{
    uint64_t mag, slab;
    heap_pops(&h, 5, &mag, &slab);
    CHECK(mag == 0 && slab == 0);

    for (unsigned c = 0; c < SL_NCLASSES; c++) { /* what each has counted: any values */
        h.mag_pops[c] = 1000 + c;
        h.slab_pops[c] = 7 * c;
    }
    heap_sample_arm(&h);
    CHECK_EQ(h.pops_seq % 2, 0);
    for (unsigned c = 0; c < SL_NCLASSES; c++) {
        heap_pops(&h, c, &mag, &slab);
        CHECK_EQ(mag, 1000 + c);
        CHECK_EQ(slab, 7 * c);
        CHECK_EQ(h.mag_pops[c] + 1, 0); /* the next add makes 0: its sample point */
        CHECK_EQ(h.slab_pops[c] + 1, 0);
    }

    /* stopped in a rewrite of class 3's slab count: its record says what */
    uint32_t seq = h.pops_seq;
    h.pops_next.count = (uint64_t)-40;
    h.pops_next.bias = (uint64_t)-40 - 21; /* count 21 */
    h.pops_next.k = 1;
    h.pops_next.cls = 3;
    h.pops_seq = seq + 1;
    h.slab_pops[3] = (uint64_t)-40; /* written; the bias not yet */
    heap_pops_settle(&h);
    CHECK_EQ(h.pops_seq, seq + 2);
    heap_pops(&h, 3, &mag, &slab);
    CHECK_EQ(slab, 21);
    CHECK_EQ(mag, 1003);
    heap_pops_settle(&h); /* not in a rewrite: nothing */
    CHECK_EQ(h.pops_seq, seq + 2);
    heap_pops(&h, 3, &mag, &slab);
    CHECK_EQ(slab, 21);
    return t_done("unit_pops");
}
