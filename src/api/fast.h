/* fast.h — the fast paths of malloc and free, inline, for every entry
 * point that is malloc or free under another name: the malloc family
 * (malloc.c) and C++'s operator new and delete (cxx.c). Those are
 * exported, so a call from one to another would go through the PLT (an
 * exported name may be interposed) and add a frame; each inlines these
 * instead. The slow paths stay out of line in malloc.c.
 *
 * Size dispatch: n <= alloc_fast_limit, a slab object (slab/heap.h);
 * above, alloc_large. alloc_fast_limit is SL_SMALL_MAX, or 0 in checked
 * mode (checked.h): the same one compare in every mode. Profiling keeps
 * the small path inline: its count of the class is the class's sample
 * countdown (heap_alloc_small). malloc(0) takes the small path, and its
 * class (SL_CLASS_ZERO) sends it to a zone slot.
 */
#ifndef SL_API_FAST_H
#define SL_API_FAST_H

#include "../slab/heap_free.h"

#define MEDIUM_MAX       HUGE_MIN /* above this, a huge mapping of its own */
#define MEDIUM_MAX_ALIGN HUGE_MIN

/* malloc's inline path's limit (above); set once, in the constructor. */
extern size_t alloc_fast_limit sl_hidden;
/* malloc above alloc_fast_limit (malloc.c). */
void *alloc_large(size_t n);
/* The usable size an allocation of n bytes aligned to align (0: malloc's)
 * gets, without making it; 0 if none can be that large (malloc.c). */
size_t alloc_usable_for(size_t n, size_t align);
/* Any allocation as it is made without profiling (align 0 or a power of
 * two; zero: cleared) (malloc.c). */
void *alloc_unsampled(size_t n, size_t align, bool zero);
/* Checked mode: is p (pagemap entry e) one of checked.c's pointers? */
bool checked_ptr(const void *p, uintptr_t e);
/* Usable size of a live allocation; aborts (naming op) on a bad pointer. */
size_t usable_checked(const void *p, const char *op);
/* A sampled block of n bytes (malloc.c): one whose free finds its sample
 * (a page run, a huge mapping, a checked block), recorded as sampled on
 * counted bytes (prof_record). */
void *alloc_sampled(size_t n, size_t align, bool zero, size_t counted);
/* free of what is not a grain of a pageblock (pagemap entry e): NULL, a
 * zero-size slot, a huge mapping, checked mode's pointers, and the report
 * of anything else (malloc.c). */
void free_other_slow(void *p, uintptr_t e);
/* A sized free that dealloc_sized did not take: the full check, with
 * free's messages first (a bad pointer before a wrong size) (malloc.c).
 * c_name: free_sized or free_aligned_sized, not a C++ delete (under
 * memcheck those go to free: malloc.c, memcheck_names). */
void free_sized_slow(void *p, size_t align, size_t size, bool c_name);

sl_inline void *alloc(size_t n)
{
    if (likely(n <= alloc_fast_limit))
        return heap_alloc_small(n);
    return alloc_large(n);
}

sl_inline void dealloc(void *p)
{
    if (likely(pagemap_is_block_grain((uintptr_t)p)))
        return heap_free_block(p);
    if (p) /* free(NULL) is common (mstress: 4 frees in 10): no lookup, no call */
        free_other_slow(p, pagemap_get((uintptr_t)p));
}

/* free_sized, free_aligned_sized and C++'s sized delete. A malloc-class
 * slab's pages carry their class in the page tag: a size of that class
 * goes straight to free (with the tag read), which validates p as it
 * always does; a mismatch, any other kind of memory, alignment above the
 * grain and checked mode take the full check. */
sl_inline void dealloc_sized(void *p, size_t align, size_t size, bool c_name)
{
    uintptr_t a = (uintptr_t)p;
    /* sl_small_limit is 0 in checked mode, and no page tag has the class
     * of 0 bytes (SL_CLASS_ZERO) */
    if (likely(align <= SL_GRAIN && size <= sl_small_limit && pagemap_is_block_grain(a))) {
        uint32_t t = ld_relaxed(page_tag(a));
        if (likely(t && (t & ((1u << TAG_PAGE_SHIFT) - 1)) == size_class_small(size)))
            return heap_free_block_tagged(p, t);
    }
    free_sized_slow(p, align, size, c_name);
}

#endif
