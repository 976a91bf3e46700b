/* bulk_calls.c — sl_free_bulk and sl_alloc_bulk: the public entry points
 * of the bulk layer's detached freelists (bulk/bulk.c), with the malloc
 * family's own free and malloc for what is no slab object. */
#include <errno.h>

#include "../bulk/bulk.h"
#include "../prof/prof.h"
#include "fast.h"
#include "sluice.h"

/* What the detached freelists leave: runs, huge mappings, zero-size slots,
 * and the report of a bad pointer. */
static void free_one(void *p) { dealloc(p); }

void sl_free_bulk(void **ptrs, size_t n)
{
    if (unlikely(prof_on))
        bulk_prof_free(ptrs, n); /* object caches' samples; runs are sampled malloc blocks */
    if (unlikely(sl_small_limit == 0)) { /* checked mode: each pointer is checked */
        for (size_t i = 0; i < n; i++)
            sl_free(ptrs[i]); /* free's address: valgrind's where it replaced free (checked.h) */
        return;
    }
    bulk_free(ptrs, n, ANY_CACHE, free_one);
}

size_t sl_alloc_bulk(size_t size, size_t n, void **out)
{
    if (!n)
        return 0;
    struct heap *h;
    int saved = errno;
    /* 0 bytes (zone slots), checked mode and no heap: one by one */
    if (size - 1 >= sl_small_limit || !(h = heap_get())) {
        errno = saved; /* no heap is no failure yet */
        for (size_t i = 0; i < n; i++)
            if (!(out[i] = sl_small_limit ? alloc(size) : sl_malloc(size))) { /* checked: as sl_free_bulk */
                sl_free_bulk(out, i);
                return 0;
            }
        return n;
    }
    if (likely(!prof_on))
        return bulk_alloc(h, size_class(size), n, out);
    /* the sampled ones first, as blocks whose free finds the sample, then
     * the rest from the slabs: each object counted once, where it is made */
    size_t idx[16], k = prof_tick_bulk(size, n, idx, 16), got = 0;
    for (size_t i = 0; i < k; i++) {
        int kept = errno;
        void *q = alloc_sampled(size, 0, false, size);
        errno = kept; /* refused: one more from the slabs, unsampled */
        if (q)
            out[got++] = q;
    }
    if (got < n && !bulk_alloc(h, size_class(size), n - got, out + got)) {
        sl_free_bulk(out, got); /* all or none; a free leaves errno (ENOMEM) as it is */
        return 0;
    }
    return n;
}
