/* mag_trim.h — the magazine trim's policy (jemalloc's tcache GC), pure
 * functions of a magazine's counts, tested with made-up ones (unit_mag_trim).
 *
 * Four times per decay tick, on its owner's allocation slow path (heap.c:
 * mag_tick; no thread of its own, so a single-threaded program trims
 * too), each magazine gives back to its slabs three quarters (rounded up)
 * of its low water since the last trim: the objects at its bottom, which
 * no malloc reached meanwhile. Objects that sit in a magazine keep their
 * slabs from coming free (gcc on sqlite3.c: 4-6 MiB of objects in the ~70
 * classes' magazines, most in the 16-deep ones of 5-32 KiB;
 * docs/benchmarks/gcc-rss.md).
 *
 * The low water comes from counts the heap keeps anyway, so the malloc and
 * free fast paths do not change. Between two looks at a magazine the
 * objects that left it (out: its pops and the other ways out, mag_adj)
 * are at least as many as its count fell by at its lowest, so its low
 * water in that interval is at least
 *     the count at the first look - the objects out since,
 * and at most the count at either look. The slow paths look at every
 * magazine at most once a clock step (mag_trim_look: CLOCK_MONOTONIC_COARSE,
 * 1-4 ms), and the least of those bounds since the last trim bounds the
 * low water of the tick: the more often they look, the closer. Looked at
 * once a tick only, each of gcc's busy magazines popped more than it held
 * and counted as emptied: the trim gave back 9,000 objects in the whole
 * compile. A malloc that finds a magazine empty (heap_alloc_small_slow)
 * makes its low water 0. Too few looks only make the trim keep more.
 */
#ifndef SL_MAG_TRIM_H
#define SL_MAG_TRIM_H

#include <stdint.h>

#include "../base/common.h"

#define MAG_TRIM_KEEP 4 /* of the objects held since the last trim, 1/MAG_TRIM_KEEP stay */

/* A magazine as the slow paths last saw it. */
struct mag_trim_seen {
    uint64_t out;   /* its objects out so far (pops + mag_adj, mod 2^64) at the last look */
    uint32_t count; /* its objects at the last look */
    uint32_t low;   /* at most its low water since the last trim (0 if emptied meanwhile) */
};

/* A look at a magazine that holds count objects now, out of it so far
 * (the same sum as w->out). */
sl_inline void mag_trim_look(struct mag_trim_seen *w, uint32_t count, uint64_t out)
{
    uint64_t left = out - w->out;
    uint32_t low = w->count > left ? w->count - (uint32_t)left : 0;
    if (low > count)
        low = count;
    if (low < w->low)
        w->low = low;
    w->count = count;
    w->out = out;
}

/* The trim of that magazine, a look first: the objects to give back from
 * its bottom. w becomes the magazine as the trim leaves it (the objects
 * given back count as out), its low water that count. */
sl_inline uint32_t mag_trim_take(struct mag_trim_seen *w, uint32_t count, uint64_t out)
{
    mag_trim_look(w, count, out);
    uint32_t take = w->low - w->low / MAG_TRIM_KEEP;
    w->count = count - take;
    w->out = out + take;
    w->low = w->count;
    return take;
}

#endif
