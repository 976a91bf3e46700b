/* realloc.c — realloc and reallocarray, and their libc names.
 *
 * One pagemap lookup decides: a live slab object stays if the new size
 * keeps its class; a live run grows or shrinks in place if its pages (or
 * its neighbours') allow; a huge mapping is resized by mremap; anything
 * else moves (a new block, a copy, a free). The two in-place cases of
 * slab objects and runs of the same page count are inline
 * (realloc_plain), the rest out of line (realloc_slow). Misuse is
 * reported as free reports it (usable_checked, malloc.c).
 *
 * Profiling (prof/prof.h): realloc counts the bytes it adds past its
 * block's usable size; a growth that crosses a sample point moves a slab
 * object to a sampled block, and takes a run's or a mapping's sample
 * anew where it grows in place. As glibc: realloc(p, 0) frees p and
 * returns NULL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../huge/huge.h"
#include "../prof/prof.h"
#include "../slab/heap.h"
#include "../slab/heap_run.h"
#include "checked.h"
#include "fast.h"
#include "sluice.h"

/* Referenced from malloc.c so that a static link (libsluice.a), which takes
 * only the objects it needs, always brings this one with malloc. */
sl_hidden char sl_realloc_linked;

static void count_realloc(enum sl_stat id)
{
    struct heap *h = tls_heap;
    if (h != &heap_empty)
        stat_add(h->stats, id, 1);
}

/* Above this, a realloc's block is a page run even where malloc's would
 * be a slab object (16-32 KiB): a run grows and shrinks in place (its
 * pages, then its neighbours'), where a growing object would move at
 * every class, 2-4 KiB apart. Measured on bench/realloc_grow (strings
 * appended to up to 64 KiB): with slab objects up to 32 KiB, 0.129 s ->
 * 0.164 s and peak RSS 11.4 -> 16.8 MB; with this, as before. */
#define REALLOC_RUN_MIN (SL_SMALL_MAX / 2)

/* Profiling: realloc counts the bytes it adds beyond the block's usable
 * size (a buffer grown a byte at a time counts its length once, not the
 * sum of its lengths), so only a realloc that leaves its block or grows
 * it in place counts: is this one sampled? */
static bool realloc_sampled(size_t old, size_t n)
{
    return unlikely(prof_on) && n > old && prof_tick(n - old);
}

/* A block grown in place by a sampled realloc (realloc_sampled): its
 * sample is taken anew, at its new size; mark: its sampled flag. */
static void realloc_resample(bool *mark, void *p, size_t n, size_t counted)
{
    if (*mark)
        prof_free(p);
    *mark = true;
    prof_record(p, n, counted, 0, NULL);
}

/* Move p (old usable bytes) to a new allocation of n bytes; sampled
 * (realloc_sampled said so): to a sampled block. */
static void *realloc_move(void *p, size_t old, size_t n, bool sampled)
{
    void *q = sampled                                                     ? alloc_sampled(n, 0, false, n - old)
              : n > REALLOC_RUN_MIN && n <= SL_SMALL_MAX && !sl_checked ? heap_alloc_run(n, 0, NULL)
              : unlikely(prof_on)                                        ? alloc_unsampled(n, 0, false) /* counted already */
                                                                         : alloc(n);
    if (!q)
        return NULL; /* p stays valid */
    memcpy(q, p, old < n ? old : n);
    sl_free(p);
    count_realloc(STAT_realloc_move);
    return q;
}

static sl_noinline void *realloc_huge_or_bad(void *p, uintptr_t e, size_t n)
{
    size_t old = usable_checked(p, "realloc"); /* aborts on a bad pointer */
    bool sampled = realloc_sampled(old, n);
    if (!sampled && checked_ptr(p, e))
        return checked_realloc(p, n);
    int saved = errno;
    if (!checked_ptr(p, e) && (e & PM_HUGE) && n > HUGE_MIN) {
        bool was_sampled = ((struct huge *)pagemap_region(e))->sampled;
        void *q = huge_realloc(pagemap_region(e), p, n);
        if (q) {
            if (unlikely(was_sampled) && q != p) /* moved by mremap: the sample goes with it */
                prof_move(p, q);
            if (unlikely(sampled))
                realloc_resample(&((struct huge *)pagemap_region(pagemap_get((uintptr_t)q)))->sampled, q, n, n - old);
            count_realloc(STAT_realloc_inplace);
            return q;
        }
        errno = saved; /* refused in place: the move may still succeed */
    }
    return realloc_move(p, old, n, sampled);
}

/* One pagemap lookup decides: a slab object stays if n keeps its class, a
 * page run grows or shrinks in place if its neighbours allow, a huge
 * mapping is resized by mremap; anything else moves. */
/* Everything but the two in-place cases sl_realloc handles itself: NULL,
 * 0, huge and foreign pointers, misuse, a run that changes its page count,
 * and moves. */
static sl_noinline void *realloc_slow(void *p, size_t n)
{
    if (!p)
        return alloc(n);
    if (n == 0) {
        sl_free(p);
        return NULL;
    }
    uintptr_t a = (uintptr_t)p;
    if (unlikely(!pagemap_is_block(a)))
        return realloc_huge_or_bad(p, pagemap_get(a), n);
    struct page *run = run_head_at(a); /* a run: its head, live while run.req is nonzero */
    if (unlikely(run ? !__atomic_load_n(&run->run.req, __ATOMIC_RELAXED) : !bitmap_test(a)))
        return realloc_huge_or_bad(p, pagemap_get(a), n);
    if (!run) {
        struct slab *s = slab_of_page(page_head(page_of(p)));
        if (*mag_cookie(p) == heap_cookie && heap_is_freed(p)) /* freed */
            heap_bad_free(p, pagemap_get((uintptr_t)p), "realloc");
        if (n <= s->size && size_class(n) == s->cls) { /* the cookie matched by chance */
            count_realloc(STAT_realloc_inplace);
            return p;
        }
        return realloc_move(p, s->size, n, realloc_sampled(s->size, n));
    }
    size_t old = (size_t)run->h.npages << SL_PAGE_SHIFT;
    bool sampled = realloc_sampled(old, n);
    if (n > REALLOC_RUN_MIN && n <= MEDIUM_MAX && heap_resize_run(p, n)) {
        if (unlikely(sampled))
            realloc_resample(&run->run.sampled, p, n, n - old);
        count_realloc(STAT_realloc_inplace);
        return p;
    }
    return realloc_move(p, old, n, sampled);
}

/* The in-place cases inline, with no call: a live slab object that stays in
 * its class, and a live run whose new size keeps its page count (a growing
 * buffer's common case: only the size is recorded). The flat block bitmap
 * first, as sl_free. */
sl_inline void *realloc_plain(void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    if (unlikely(!n || !pagemap_is_block(a))) /* NULL is no block */
        return realloc_slow(p, n);
    struct page *run = run_head_at(a);
    if (run) {
        if (likely(__atomic_load_n(&run->run.req, __ATOMIC_RELAXED) && n > REALLOC_RUN_MIN && n <= MEDIUM_MAX &&
                   heap_run_pages(n) == run->h.npages)) {
            __atomic_store_n(&run->run.req, n, __ATOMIC_RELAXED);
            count_realloc(STAT_realloc_inplace);
            return p;
        }
    } else if (likely(bitmap_test(a) && *mag_cookie(p) != heap_cookie)) {
        struct slab *s = slab_of_page(page_head(page_of(p)));
        if (n <= s->size && size_class(n) == s->cls) {
            count_realloc(STAT_realloc_inplace);
            return p;
        }
    }
    return realloc_slow(p, n);
}

void *sl_realloc(void *p, size_t n) { return realloc_plain(p, n); }

void *sl_reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return sl_realloc(p, total); /* realloc's address: valgrind's where it replaced realloc */
}

#if SL_OVERRIDE
#define SL_ALIAS(name, target) extern __typeof(target) name __attribute__((alias(#target), visibility("default")));
SL_ALIAS(realloc, sl_realloc)
SL_ALIAS(reallocarray, sl_reallocarray)
SL_ALIAS(__libc_realloc, sl_realloc)
#endif
