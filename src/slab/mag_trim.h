/* mag_trim.h — the magazine trim's policy (jemalloc's tcache GC), a pure
 * function of a magazine's counts, tested with made-up ones (unit_mag_trim).
 *
 * Once per decay tick, on its owner's allocation slow path (heap.c:
 * heap_mag_tick; no thread of its own, so a single-threaded program trims
 * too), each magazine gives back to its slabs three quarters (rounded up)
 * of the objects it held all through the tick: those at its bottom, which
 * no malloc reached since the last pass. Objects that sit in a magazine
 * keep their slabs from coming free (gcc on sqlite3.c: 5.9 MiB of objects
 * in the ~70 classes' magazines at its peak, in 21.1 MiB of slab pages;
 * docs/benchmarks/gcc-rss.md).
 *
 * The low water comes from counts the heap keeps anyway, so the malloc and
 * free fast paths do not change: between two passes the objects that left
 * the magazine (out: its pops and the other ways out, mag_adj) are at
 * least as many as the magazine's count fell by at its lowest, so
 *     low >= count at the last pass - the objects out since,
 * and low <= the count now. A magazine that malloc emptied within the tick
 * has low 0 and keeps everything; one that no malloc touched gives back
 * three quarters, then three quarters of the rest at the next tick. A
 * magazine kept steadily half full by a busy class counts its pops as if
 * they had reached the bottom, and keeps its objects: the price of no
 * low-water mark on the fast path.
 */
#ifndef SL_MAG_TRIM_H
#define SL_MAG_TRIM_H

#include <stdint.h>

#include "../base/common.h"

#define MAG_TRIM_KEEP 4 /* of the objects held all through a tick, 1/MAG_TRIM_KEEP stay */

/* A magazine as its last pass left it. */
struct mag_trim_seen {
    uint64_t out;   /* its objects out so far (pops + mag_adj, mod 2^64), after the pass */
    uint32_t count; /* its objects, after the pass */
};

/* The pass over a magazine that holds count objects now, out of it so far
 * (the same sum as w->out): the objects to give back from its bottom; w
 * becomes the magazine as the trim leaves it (the objects given back
 * count as out). */
sl_inline uint32_t mag_trim_take(struct mag_trim_seen *w, uint32_t count, uint64_t out)
{
    uint64_t left = out - w->out;
    uint32_t low = w->count > left ? w->count - (uint32_t)left : 0;
    if (low > count)
        low = count;
    uint32_t take = low - low / MAG_TRIM_KEEP;
    w->count = count - take;
    w->out = out + take;
    return take;
}

#endif
