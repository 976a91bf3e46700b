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
sl_inline size_t heap_run_pages(size_t size)
{
    size_t n = align_up(size, SL_PAGE) >> SL_PAGE_SHIFT;
    if (n <= 8)
        return n;
    size_t step = (size_t)1 << (log2_floor(n) - 3);
    return align_up(n, step);
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
