/* huge_fit.h — which cached huge mappings serve a huge request: a pure
 * function of the cached mappings' sizes, states and alignment
 * (huge_cache.c carries it out), tested by test/unit_huge_fit.c with
 * made-up caches.
 *
 * A cached mapping is either resident pages the program touched (dirty)
 * or address space only (clean: advised MADV_DONTNEED). Reusing resident
 * pages saves their page faults; handing out more than was asked keeps
 * the excess resident for as long as the buffer lives, where no other
 * request can use it. So a mapping is never handed out longer than the
 * request's granules: the tail of a longer one stays cached (split), and
 * pages are moved, not copied, where they are needed (mremap moves page
 * tables: a 2 MiB-aligned granule is one page-table entry):
 *   1. the smallest resident mapping that holds the request (the newest
 *      of equals), split after the request's granules;
 *   2. else the resident mappings, newest first, up to HUGE_GATHER_MAX,
 *      moved side by side into a fresh mapping of the request's length
 *      (gathered), the last split if it holds more than is still needed;
 *      the part they do not cover is fresh pages;
 *   3. else the smallest clean mapping that holds it (no mmap), split;
 *   4. else a fresh mapping.
 * mimalloc-bench's malloc-large (5-25 MiB buffers, 20 live, each replaced
 * by a new one before it is freed): mappings were handed out whole up to
 * 4x the request, and the resident excess of the live buffers and the
 * cache's resident mappings took the peak RSS to 572 MiB where the live
 * buffers peak at 397 MiB (docs/benchmarks/malloc-large.md).
 */
#ifndef SL_HUGE_FIT_H
#define SL_HUGE_FIT_H

#include "../base/common.h"

#define HUGE_GATHER_MAX 16 /* mappings moved into one request at most */

struct huge_fit_in {
    size_t bytes;  /* mapping length, whole granules */
    bool resident; /* dirty: its pages are (mostly) resident */
    bool aligned;  /* its base meets the request's alignment */
};

struct huge_fit {
    int single;                     /* the mapping to take (split if longer), or -1 */
    unsigned npieces;               /* else the mappings to gather, in order (0: map fresh) */
    unsigned char piece[HUGE_GATHER_MAX];
    size_t gathered;                /* bytes they bring, the last one's head only */
};

/* The smallest mapping of c[0..n) that holds want bytes, is aligned, and
 * is resident (or not, as asked), the first of equals; -1 if none. */
sl_inline int huge_fit_smallest(const struct huge_fit_in *c, unsigned n, size_t want, bool resident)
{
    int best = -1;
    for (unsigned i = 0; i < n; i++) {
        if (c[i].bytes < want || !c[i].aligned || c[i].resident != resident)
            continue;
        if (best < 0 || c[i].bytes < c[best].bytes)
            best = (int)i;
        if (c[i].bytes == want)
            break; /* nothing fits better */
    }
    return best;
}

/* c[0..n): the cache, newest first; want: the request's mapping length. */
sl_inline struct huge_fit huge_fit_choose(const struct huge_fit_in *c, unsigned n, size_t want)
{
    struct huge_fit f = { .single = huge_fit_smallest(c, n, want, true), .npieces = 0, .gathered = 0 };
    if (f.single >= 0)
        return f;
    for (unsigned i = 0; i < n && f.gathered < want && f.npieces < HUGE_GATHER_MAX; i++) {
        if (!c[i].resident)
            continue;
        f.piece[f.npieces++] = (unsigned char)i;
        f.gathered += c[i].bytes < want - f.gathered ? c[i].bytes : want - f.gathered;
    }
    if (!f.npieces)
        f.single = huge_fit_smallest(c, n, want, false);
    return f;
}

#endif
