/* heap_run.h — medium allocations (heap.c): page runs of PB_RUN blocks
 * through the thread's page cache, their length rounding, and resizing
 * in place. */
#ifndef SL_HEAP_RUN_H
#define SL_HEAP_RUN_H

#include "heap.h"

/* Pages for a run of size bytes: whole pages, and above 8 pages rounded up
 * to an eighth of their power of two (waste under 12.5%), so that freed
 * runs match later requests in the page cache's per-length stacks and the
 * same pages are used again. */
#define HEAP_RUN_STEP(n)  ((n) < 16 ? 1u : (n) < 32 ? 2u : (n) < 64 ? 4u : 8u) /* for n <= 64 */
#define HEAP_RUN_ROUND(n) (((n) + HEAP_RUN_STEP(n) - 1) / HEAP_RUN_STEP(n) * HEAP_RUN_STEP(n))
sl_inline size_t heap_run_round(size_t n)
{
    if (n <= 8)
        return n;
    size_t step = (size_t)1 << (log2_floor(n) - 3);
    return align_up(n, step);
}
/* heap_run_round of 0..PCACHE_MAX_PAGES pages, the page cache's lengths
 * (heap.c): one load on malloc's fast path instead of the rounding's
 * branch, bit scan and shifts. With the fit's masks (page.h,
 * pcache_fit_mask): 250.7 -> 243.6 instructions a replacement of 32-256
 * KiB objects (bench_sizes 0.5 4 less 0.25 4). */
extern const uint8_t heap_run_pages_lut[PCACHE_MAX_PAGES + 1];
sl_inline size_t heap_run_pages(size_t size)
{
    size_t n = align_up(size, SL_PAGE) >> SL_PAGE_SHIFT;
    return n <= PCACHE_MAX_PAGES ? heap_run_pages_lut[n] : heap_run_round(n);
}

/* Medium allocations: page runs of PB_RUN blocks through the thread's page
 * cache. align is a power of two (at most 1 MiB). *clean (clean may be
 * NULL): the run is known to read as zero (calloc need not clear it). */
void *heap_alloc_run(size_t size, size_t align, bool *clean);
/* Resize a live run in place; false if it cannot (a new size of the same
 * page count is only recorded: sl_realloc does that itself). */
bool heap_resize_run(void *p, size_t new_size);
/* The size last asked for of the live run at p (malloc or realloc). */
size_t heap_run_request(void *p);

#endif
