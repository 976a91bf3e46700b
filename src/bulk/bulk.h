/* bulk.h — the bulk layer's entry points shared by sl_free_bulk /
 * sl_alloc_bulk and the object-cache API. */
#ifndef SL_BULK_H
#define SL_BULK_H

#include "../slab/heap.h"

#define ANY_CACHE 0xffffu /* bulk_free: objects of any cache, or malloc */

/* Free n pointers (NULLs skipped) by detached freelists; with expect a
 * cache id, every object must belong to that cache (else a fatal report);
 * with ANY_CACHE, what is no slab object (a run, a huge mapping, a bad
 * pointer) goes to the caller's free_one, one by one. */
void bulk_free(void **ptrs, size_t n, unsigned expect, void (*free_one)(void *p));
/* Profiling (prof/prof.h): before a bulk free, forget the samples of the
 * objects of ptrs in slabs that hold samples (runs are the malloc
 * family's: their own free does it). */
void bulk_prof_free(void **ptrs, size_t n);
/* n objects of cache id for heap h into out: n, or 0 + ENOMEM. */
size_t bulk_alloc(struct heap *h, unsigned id, size_t n, void **out);

#endif
