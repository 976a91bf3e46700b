/* malloc.c — the malloc family, their sl_ twins, and (when built with
 * SL_OVERRIDE=1) the libc names as aliases of the same functions.
 *
 * Size dispatch:   n <= 32 KiB   small: a slab object (heap.h fast path);
 *                                0: a zero-size slot (zero.h), no access works
 *                  n <= 1 MiB    medium: a page run
 *                  larger        huge: its own mapping
 * Profiling (prof/prof.h): a small malloc or calloc stays on the inline
 * path, whose count of its class is also the class's sample countdown
 * (slab/heap_mag.h: heap_alloc_small), and is sampled there; every other
 * allocation comes out of line to alloc_prof, which counts its bytes
 * and serves it as before (alloc_unsampled) or, sampled, from a block
 * whose free looks the sample up (alloc_sampled): a page run marked
 * run.sampled (even for a small request: a slab object's free checks no
 * mark), a huge mapping marked huge.sampled, or checked mode's block
 * (checked_free asks). realloc is realloc.c.
 * Where the standard leaves a choice we do what glibc does: malloc(0)
 * returns a unique pointer; memalign
 * rounds a non-power-of-two alignment up; every pointer is 16-byte aligned.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../base/annotate.h"
#include "../base/drain.h"
#include "../base/fatal.h"
#include "../huge/huge.h"
#include "../prof/prof.h"
#include "../slab/heap.h"
#include "../slab/heap_run.h"
#include "../zero/zero.h"
#include "checked.h"
#include "fast.h"
#include "sluice.h"

/* pull init.c (fork handlers, options, exit stats) and realloc.c (libc
 * calls realloc on what malloc gave it) into static links */
extern char sl_init_linked, sl_realloc_linked;
__attribute__((used)) static char *const init_linked = &sl_init_linked;
__attribute__((used)) static char *const realloc_linked = &sl_realloc_linked;

static sl_noinline void *alloc_large_slow(size_t n, size_t align, bool zero)
{
    if (unlikely(sl_checked)) {
        void *p;
        DRAIN_RETRY(p, checked_alloc(n, align)); /* zeroed either way; the quarantine is drained first */
        if (p && zero)
            annotate_defined(p, n); /* calloc's bytes are initialised, for memcheck */
        return p;
    }
    if (n <= MEDIUM_MAX && align <= MEDIUM_MAX_ALIGN) {
        bool clean;
        void *p = heap_alloc_run(n, align, &clean);
        if (p && zero && !clean) /* purged with MADV_DONTNEED, or never touched */
            memset(p, 0, n);
        return p;
    }
    struct heap *h = heap_get();
    void *p;
    DRAIN_RETRY(p, huge_alloc(n, align, zero));
    if (p && h)
        stat_add(h->stats, STAT_alloc_huge, 1);
    return p;
}

size_t alloc_fast_limit = SL_SMALL_MAX;

static sl_noinline void *alloc_prof(size_t n, size_t align, bool zero);

/* malloc above alloc_fast_limit: a medium run straight from the thread's
 * page cache (no zeroing, no alignment, so no frame to keep), the rest
 * through alloc_large_slow; or, profiling, through the sampler. A small
 * request comes here only in checked mode: malloc(0), a zero-size slot
 * (sl_small_limit is 0 there). */
sl_noinline void *alloc_large(size_t n)
{
    if (unlikely(n <= sl_small_limit))
        return heap_alloc_small(n);
    if (unlikely(prof_on))
        return alloc_prof(n, 0, false);
    if (likely(n <= MEDIUM_MAX && !sl_checked))
        return heap_alloc_run(n, 0, NULL);
    return alloc_large_slow(n, 0, false);
}

/* The small class for n bytes aligned to align (<= 4 KiB): the first class
 * at or above n whose size is a multiple of align, so that every object of
 * its page-aligned slabs is aligned. SL_NCLASSES if none. */
static unsigned aligned_class(size_t n, size_t align)
{
    if (n > SL_SMALL_MAX)
        return SL_NCLASSES;
    size_t m = align_up(n ? n : 1, align);
    if (m > SL_SMALL_MAX)
        return SL_NCLASSES;
    unsigned c = size_class(m);
    while (c < SL_NCLASSES && class_size[c] % align)
        c++;
    return c;
}

/* Any allocation as it is made without profiling (align 0 or a power of
 * two; zero: cleared), for one the sampler has counted (small objects:
 * quiet, not counted down their class's countdown again). */
void *alloc_unsampled(size_t n, size_t align, bool zero)
{
    void *p;
    if (align <= SL_GRAIN && n <= sl_small_limit) { /* 0 in checked mode: malloc(0) alone */
        p = heap_alloc_small_quiet(n);
        if (p && zero)
            memset(p, 0, n);
        return p;
    }
    if (align > SL_GRAIN && align <= SL_PAGE && sl_small_limit && n <= sl_small_limit) {
        unsigned c = aligned_class(n, align);
        if (c < SL_NCLASSES) {
            p = heap_alloc_small_quiet(class_size[c]);
            if (p && zero)
                memset(p, 0, n);
            return p;
        }
    }
    if (align <= SL_GRAIN && !zero && n <= MEDIUM_MAX && !sl_checked)
        return heap_alloc_run(n, 0, NULL);
    return alloc_large_slow(n ? n : 1, align <= SL_GRAIN ? 0 : align, zero);
}

void *alloc_sampled(size_t n, size_t align, bool zero, size_t counted)
{
    void *p;
    size_t a = align <= SL_GRAIN ? 0 : align;
    if (!sl_checked && n <= MEDIUM_MAX && a <= MEDIUM_MAX_ALIGN) {
        bool clean;
        if (!(p = heap_alloc_run(n ? n : 1, a, &clean)))
            return NULL;
        if (zero && !clean)
            memset(p, 0, n);
        page_of(p)->run.sampled = true;
    } else {
        if (!(p = alloc_large_slow(n ? n : 1, a, zero)))
            return NULL;
        if (!sl_checked) /* else checked_free asks */
            ((struct huge *)pagemap_region(pagemap_get((uintptr_t)p)))->sampled = true;
    }
    prof_record(p, n, counted, 0, NULL);
    return p;
}

/* Profiling: an allocation the inline path does not take (above
 * alloc_fast_limit, or aligned above the grain), counted by its bytes. */
static sl_noinline void *alloc_prof(size_t n, size_t align, bool zero)
{
    sl_assert(n > alloc_fast_limit || align > SL_GRAIN); /* small ones count down their class */
    if (likely(!prof_tick(n)))
        return alloc_unsampled(n, align, zero);
    return alloc_sampled(n, align, zero, n);
}

static void *alloc_aligned(size_t align, size_t n)
{
    if (align <= SL_GRAIN)
        return alloc(n);
    if (unlikely(prof_on))
        return alloc_prof(n, align, false);
    if (align <= SL_PAGE && sl_small_limit && n <= sl_small_limit) {
        unsigned c = aligned_class(n, align);
        if (c < SL_NCLASSES)
            return heap_alloc_small(class_size[c]);
    }
    return alloc_large_slow(n ? n : 1, align, false);
}

void *sl_malloc(size_t n) { return alloc(n); }

size_t alloc_usable_for(size_t n, size_t align)
{
    if (sl_checked)
        return n; /* checked.c's blocks are their request */
    if (n <= sl_small_limit && align <= SL_GRAIN)
        return n ? class_size[size_class(n)] : 0; /* malloc(0): a zero-size slot */
    unsigned c = align <= SL_PAGE ? aligned_class(n, align < SL_GRAIN ? SL_GRAIN : align) : SL_NCLASSES;
    if (c < SL_NCLASSES)
        return class_size[c];
    n = n ? n : 1;
    if (n <= MEDIUM_MAX && align <= MEDIUM_MAX_ALIGN)
        return heap_run_pages(n) << SL_PAGE_SHIFT;
    return n > SIZE_MAX - SL_BLOCK ? 0 : align_up(n, SL_BLOCK); /* a new mapping; a cached one may be longer */
}

void *malloc_block_raw(size_t n, size_t align)
{
    if (align <= SL_PAGE) {
        unsigned c = aligned_class(n, align < SL_GRAIN ? SL_GRAIN : align);
        if (c < SL_NCLASSES) /* checked mode's block: counted by the sampler already */
            return heap_alloc_small_quiet(class_size[c]);
    }
    return heap_alloc_run(n, align, NULL);
}

/* Under valgrind's memcheck (base/annotate.h), valgrind may put its own
 * functions in place of some names of the malloc family in libsluice:
 * 3.19 replaces malloc, calloc, realloc, free and posix_memalign in the
 * first library that defines them (so the sl_ twins too, which are the
 * same functions: valgrind replaces code addresses), with
 * --soname-synonyms=somalloc=libsluice.so* more of them, with
 * =nouserintercepts none; where it replaces none, sluice runs the family
 * in checked mode and tells memcheck about each block. So that a block
 * goes back to whoever made it, the names valgrind leaves to sluice call
 * the five's sl_ twins (a replaced one reaches memcheck, one left to
 * sluice reaches sluice): aligned_alloc, memalign, valloc,
 * pvalloc, free_sized, free_aligned_sized, reallocarray, and the bulk
 * calls one by one (bulk_calls.c). Checked in cold paths only. */
bool memcheck_names(void) { return sl_checked && annotate_watch() == WATCH_MEMCHECK; }

static sl_cold void *aligned_by_name(size_t align, size_t n)
{
    void *p;
    int err = sl_posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, n);
    if (err) {
        errno = err;
        return NULL;
    }
    return p;
}

/* Checked mode: is p one of checked.c's pointers (a block-backed one has
 * no live bit, a mapped one is not its mapping's start)? */
bool checked_ptr(const void *p, uintptr_t e)
{
    if (!sl_checked)
        return false;
    if (e & PM_BLOCK)
        return !block_live((uintptr_t)p);
    return (e & PM_HUGE) && p != ((struct huge *)pagemap_region(e))->base;
}

sl_cold void free_other_slow(void *p, uintptr_t e)
{
    if (!p)
        return;
    if (e & PM_ZERO)
        return zero_free(pagemap_region(e), p, "free");
    if (checked_ptr(p, e))
        return checked_free(p);
    if (e & PM_HUGE) {
        struct heap *h = tls_heap;
        struct huge *hd = pagemap_region(e);
        if (h != &heap_empty)
            stat_add(h->stats, STAT_free_huge, 1);
        if (unlikely(hd->sampled) && p == hd->base) {
            hd->sampled = false;
            prof_free(p);
        }
        huge_free(hd, p);
        return;
    }
    heap_bad_free(p, e, "free");
}

void sl_free(void *p) { dealloc(p); }

void *sl_calloc(size_t n, size_t size)
{
    size_t total;
    if (unlikely(__builtin_mul_overflow(n, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    if (total > alloc_fast_limit)
        return unlikely(prof_on) ? alloc_prof(total, 0, true) : alloc_large_slow(total, 0, true);
    void *p = heap_alloc_small(total);
    if (likely(p))
        memset(p, 0, total);
    return p;
}

/* Usable size of a live allocation; aborts (naming op) on a bad pointer. */
size_t usable_checked(const void *p, const char *op)
{
    uintptr_t e = pagemap_get((uintptr_t)p);
    if (checked_ptr(p, e))
        return checked_usable(p, op);
    if (e & PM_BLOCK) {
        if (!block_live((uintptr_t)p) || heap_is_freed((void *)p))
            heap_bad_free(p, e, op);
        return heap_usable_size((void *)p);
    }
    if (e & PM_HUGE) {
        struct huge *hd = pagemap_region(e);
        huge_check(hd, p, op);
        return hd->map_size;
    }
    if (e & PM_ZERO) {
        zero_check(pagemap_region(e), p, op);
        return 0;
    }
    heap_bad_free(p, e, op);
}

size_t sl_usable_size(const void *p)
{
    size_t n;
    if (likely(heap_usable_fast(p, &n))) { /* a live malloc-class object (slab/heap.h) */
        sl_assert(n == heap_usable_size((void *)p));
        return n;
    }
    return p ? usable_checked(p, "malloc_usable_size") : 0;
}

void *sl_aligned_alloc(size_t align, size_t n)
{
    if (!is_pow2(align)) {
        errno = EINVAL;
        return NULL;
    }
    if (unlikely(sl_small_limit == 0) && memcheck_names())
        return aligned_by_name(align, n);
    return alloc_aligned(align, n);
}

/* glibc: an alignment above SIZE_MAX / 2 + 1 is EINVAL; any other that
 * cannot be met (1 << 63 included) is ENOMEM, like a size that cannot. */
void *sl_memalign(size_t align, size_t n)
{
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (!is_pow2(align))
        align = align < 2 ? 1 : (size_t)1 << log2_ceil(align);
    if (unlikely(sl_small_limit == 0) && memcheck_names())
        return aligned_by_name(align, n);
    return alloc_aligned(align, n);
}

int sl_posix_memalign(void **out, size_t align, size_t n)
{
    if (!is_pow2(align) || align % sizeof(void *))
        return EINVAL; /* errno untouched, as glibc */
    void *p = alloc_aligned(align, n);
    if (!p)
        return ENOMEM; /* errno is ENOMEM too, as glibc */
    *out = p;
    return 0;
}

void *sl_valloc(size_t n)
{
    if (unlikely(sl_small_limit == 0) && memcheck_names())
        return aligned_by_name(SL_PAGE, n);
    return alloc_aligned(SL_PAGE, n);
}

void *sl_pvalloc(size_t n)
{
    if (n > PTRDIFF_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    n = n ? align_up(n, SL_PAGE) : SL_PAGE;
    if (unlikely(sl_small_limit == 0) && memcheck_names())
        return aligned_by_name(SL_PAGE, n);
    return alloc_aligned(SL_PAGE, n);
}

/* Is size what was asked for p? Exactly for page runs and huge mappings
 * (they record the request); for a slab object, its size class. */
static bool size_matches(const void *p, size_t size, size_t align)
{
    uintptr_t e = pagemap_get((uintptr_t)p);
    if (e & PM_HUGE)
        return ((struct huge *)pagemap_region(e))->req_size == (size ? size : 1);
    if (e & PM_ZERO)
        return size == 0;
    struct page *head = page_head(page_of(p));
    if (head->h.kind == PG_RUN) {
        size_t req = heap_run_request((void *)p);
        if (unlikely(head->run.sampled) && req <= SL_SMALL_MAX && size <= SL_SMALL_MAX) /* as its class */
            return size_class(size ? size : 1) == size_class(req);
        return req == (size ? size : 1);
    }
    unsigned c = align <= SL_GRAIN ? size_class(size) : aligned_class(size, align);
    return c == slab_of_page(head)->cls;
}

sl_cold void free_sized_slow(void *p, size_t align, size_t size, bool c_name)
{
    if (c_name && memcheck_names())
        return sl_free(p);
    if (!p)
        return;
    if (checked_ptr(p, pagemap_get((uintptr_t)p)))
        return checked_free_sized(p, size);
    usable_checked(p, "free");
    if (!size_matches(p, size, align))
        sl_fatal("sized free with the wrong size:", p, "size given", size);
    sl_free(p);
}

void sl_free_aligned_sized(void *p, size_t align, size_t size) { dealloc_sized(p, align, size, true); }

void sl_free_sized(void *p, size_t size) { dealloc_sized(p, 0, size, true); }

/* ---- libc names ------------------------------------------------------- */

#if SL_OVERRIDE
#define SL_ALIAS(name, target) extern __typeof(target) name __attribute__((alias(#target), visibility("default")));
SL_ALIAS(malloc, sl_malloc)
SL_ALIAS(free, sl_free)
SL_ALIAS(cfree, sl_free)
SL_ALIAS(calloc, sl_calloc)
SL_ALIAS(aligned_alloc, sl_aligned_alloc)
SL_ALIAS(memalign, sl_memalign)
SL_ALIAS(posix_memalign, sl_posix_memalign)
SL_ALIAS(valloc, sl_valloc)
SL_ALIAS(pvalloc, sl_pvalloc)
SL_ALIAS(malloc_usable_size, sl_usable_size)
SL_ALIAS(free_sized, sl_free_sized)
SL_ALIAS(free_aligned_sized, sl_free_aligned_sized)
SL_ALIAS(__libc_malloc, sl_malloc)
SL_ALIAS(__libc_free, sl_free)
SL_ALIAS(__libc_calloc, sl_calloc)
SL_ALIAS(__libc_memalign, sl_memalign)
SL_ALIAS(__libc_valloc, sl_valloc)
SL_ALIAS(__libc_pvalloc, sl_pvalloc)
#endif
