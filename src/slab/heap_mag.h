/* heap_mag.h — a heap's magazines and the small malloc fast path.
 *
 * Magazines (tcmalloc's per-thread free lists, for the malloc classes): a
 * small free by the thread that owns the object's slab pushes the object
 * onto the heap's magazine of its class, up to its depth (class_mag_cap:
 * 64 KiB, 16 to 256; a burst of frees grows it to its room, heap.c:
 * mag_grow); malloc pops the magazine before the current slab. An
 * object in a magazine keeps its live bit and still counts as used in its
 * slab; what marks it free is its second word, set to heap_cookie (a
 * random value per process) by the free that pushes it and cleared by the
 * malloc that pops it (glibc's tcache keys its entries the same way). So a
 * magazine round trip writes no bitmap word: malloc touches only the
 * heap's magazine and the object, and free reads the bitmap word
 * (never-returned pointers, objects on a slab's free list) and the
 * object's cookie. Objects leave a magazine by malloc, or by a flush back
 * into the slabs (heap_mag_flush: thread exit, sl_purge, a bulk free of
 * the class; and the trim, heap_mag_trim: 4 times a tick, the objects at the
 * bottom that no malloc reached, mag_trim.h), which clears their bits. Paths that take the live bit for
 * "live" in bulk, without reading objects (the owner's collect of remote
 * frees, sl_free_bulk), mask the magazine's objects out or flush it first.
 * Only objects of the heap's own slabs enter it, so only the owner ever
 * writes their bitmap words, as before. A full magazine sends the free to
 * the slab.
 */
#ifndef SL_HEAP_MAG_H
#define SL_HEAP_MAG_H

#include "heap.h"

/* A magazine is a stack growing down through its part of h->mag, between
 * a MAG_LIMIT mark below its room and a NULL end (size_class.h):
 *   mark MAG_LIMIT, [.. top) stale, [top .. end) objects, end NULL
 * So malloc pops *top unless it is the NULL end, and free pushes at top - 1
 * unless that slot is the mark: one load and one compare each, no count.
 * A magazine that is empty after a flush, or was never used, is idle: its
 * top is the shared mag_idle + 1, which reads as empty to malloc and full
 * to free, so the first free after goes to heap_free_mag_full_slow, which
 * lays the magazine out then. So only the classes a thread frees touch the
 * pages of its part of h->mag.
 * The object on top is kept beside the top, in mag_first (mag_set writes
 * both), so that malloc knows what it returns after one load instead of
 * two (the top, then the slot it names); the slot below is read off that
 * path. Measured (interleaved runs, medians): bench_sizes' 8-64 B band
 * 0.063 -> 0.056 s and 64-512 B 0.061 -> 0.049 s (tcmalloc 0.048, 0.046),
 * bench_slots level (0.131 against 0.131 s; cachegrind's read misses in
 * malloc 70 K against 75 K a million replacements), 73 -> 76
 * instructions a pair (bench/pair.sh). Lists linked through the objects
 * (tcmalloc's, glibc tcache's shape) were as fast on the small bands, but
 * malloc then reads the object it returns, cold in a large working set:
 * bench_slots 0.131 -> 0.164 s, 4x the read misses in malloc.
 * Measured again without mag_first (malloc 17 and free 43 instructions,
 * 72 a pair): bench_sizes' two small bands level, but `bench_pair N runs`
 * 0.432 against 0.345 s (medians of 21 interleaved runs, slower in 19),
 * malloc waiting on the top the last free stored: kept. */
#define MAG_LIMIT ((void *)1)
extern void *mag_none[1]; /* { NULL }: the empty magazines of heap_empty */
extern void *mag_idle[2]; /* { MAG_LIMIT, NULL } */
#define MAG_IDLE (&mag_idle[1])
sl_inline void **mag_end(struct heap *h, unsigned cls) { return &h->room->mag[class_mag_end[cls]]; }
sl_inline unsigned mag_depth(struct heap *h, unsigned cls)
{
    unsigned d = (unsigned)class_mag_cap[cls] << h->mag_shift[cls];
    return d < class_mag_room[cls] ? d : class_mag_room[cls];
}
sl_inline void **mag_mark(struct heap *h, unsigned cls) { return mag_end(h, cls) - mag_depth(h, cls) - 1; }
sl_inline void mag_set(struct heap *h, size_t cls, void **top)
{
    st_release64(&h->mag_top[cls], top); /* after its slots: free_state_find reads them */
    h->mag_first[cls] = *top;
}
sl_inline unsigned mag_count(struct heap *h, unsigned cls)
{
    void **top = __atomic_load_n(&h->mag_top[cls], __ATOMIC_RELAXED);
    return top == MAG_IDLE || top == mag_none ? 0 : (unsigned)(mag_end(h, cls) - top);
}

/* The pops of class cls, unbiased: a magazine's (*mag) and a slab's
 * (*slab). Any thread; the bias read under pops_seq (see struct heap). */
sl_inline void heap_pops(struct heap *h, unsigned cls, uint64_t *mag, uint64_t *slab)
{
    for (;;) { /* acquire loads, no fence (ThreadSanitizer knows no fences): a
                * count or bias the writer stored (release) after making
                * pops_seq odd keeps the second load of it from reading older */
        uint32_t seq = atomic_load_explicit(&h->pops_seq, memory_order_acquire);
        uint64_t bm = atomic_load_explicit(&h->pops_bias[0][cls], memory_order_acquire);
        uint64_t bs = atomic_load_explicit(&h->pops_bias[1][cls], memory_order_acquire);
        *mag = atomic_load_explicit(&h->mag_pops[cls], memory_order_acquire) - bm;
        *slab = atomic_load_explicit(&h->slab_pops[cls], memory_order_acquire) - bs;
        if (!(seq & 1) && atomic_load_explicit(&h->pops_seq, memory_order_relaxed) == seq)
            return;
    }
}

/* h's counts of cache id as the program made them (heap_counts): a
 * malloc class's mallocs are counted in three places, by where they took
 * the object (the magazine: mag_pops; a slab on the fast path or after a
 * refill: slab_pops; any other way: counts.alloc); its frees into a magazine are not
 * counted when they are made (one add less on the free fast path, and one
 * line less: 45 -> 44 instructions), since every object that entered a
 * magazine by free has left it by malloc, left it otherwise (mag_adj), or
 * is in it now:
 *   pushes = mag_pops + mag_adj + mag_count.
 * Read by any thread without the owner's cooperation, like every count:
 * the owner moves the top before it counts a pop, so a reader that reads
 * the pops first never counts a push that a malloc took back twice; a
 * reader racing a flush or a collect may be off by what moved meanwhile,
 * as a walk of any counts is off by what changed during it. */
sl_inline uint64_t heap_count_alloc(struct heap *h, unsigned id)
{
    uint64_t n = ld_relaxed(&h->counts.alloc[id]), mag, slab;
    if (id >= SL_NCLASSES)
        return n;
    heap_pops(h, id, &mag, &slab);
    return n + mag + slab;
}
sl_inline uint64_t heap_count_free(struct heap *h, unsigned id)
{
    uint64_t n = ld_relaxed(&h->counts.free[id]), pops, slab;
    if (id >= SL_NCLASSES)
        return n;
    heap_pops(h, id, &pops, &slab); /* before the top: see above */
    unsigned held = mag_count(h, id);
    return n + pops + held + ld_relaxed(&h->mag_adj[id]);
}

/* The word of a free object that holds heap_cookie while it is in a
 * magazine (objects are at least 16 bytes; word 0 is the free-list link). */
sl_inline uint64_t *mag_cookie(void *p) { return (uint64_t *)p + 1; }
/* h's magazine of cache id from its top (NULL-ended), or NULL for a user
 * cache (slab_collect's mask). */
sl_inline void **heap_mag_of(struct heap *h, unsigned id) { return id < SL_NCLASSES ? h->mag_top[id] : NULL; }

/* Take the remote frees of s, a slab of h's (its owner, or heaps_lock for
 * an orphan): slab_collect with h's magazine as the mask and, for a malloc
 * class, the cookie as the freers' mark. */
sl_inline unsigned heap_slab_collect(struct heap *h, struct slab *s, struct mag_fill *fill)
{
    return slab_collect(s, heap_mag_of(h, s->cls), &h->remote_held, s->cls < SL_NCLASSES ? heap_cookie : 0, fill);
}

/* Take p, the head of slab s's free list, its link at `link` (slab_link;
 * a malloc class's is the object's first word): the owner's one free-list
 * pop, for malloc's fast and slow paths and the object caches'. */
sl_inline void slab_pop_owned(struct slab *s, void *p, void **link)
{
    s->free = *link;
    s->used++;
    bitmap_set_owner((uintptr_t)p);
}

/* A small malloc of n bytes whose count reached its class's sample
 * point (heap_pop_tick made 0: on mag_pops, k 0, or slab_pops, k 1): the
 * next point drawn and the count rebiased first (a malloc made meanwhile,
 * by a drain's shrinker or a signal handler, finds it whole), then the
 * malloc served, sampled (a page run of its own, run.sampled, recorded)
 * unless the profiler declines. The object its count was for is still
 * where the malloc found it. */
void *heap_alloc_sampled_slow(size_t n, unsigned k);

/* Small malloc of n bytes (n <= SL_SMALL_MAX), counted (heap_pop_tick):
 * the magazine's pop, else the current slab's. */
sl_inline void *heap_alloc_small(size_t n)
{
    struct heap *h = tls_heap;
    size_t cls = size_class_small(n); /* size_t: no zero extension on its uses as an index */
    void *p = h->mag_first[cls];
    if (likely(p)) {
        if (unlikely(heap_pop_tick(h, mag_pops, cls)))
            return heap_alloc_sampled_slow(n, 0);
        mag_set(h, cls, h->mag_top[cls] + 1);
        *mag_cookie(p) = 0; /* live bit kept while in the magazine */
    } else {
        struct slab *s = h->cur[cls];
        p = s->free;
        if (unlikely(!p))
            return heap_alloc_small_slow(n, false);
        if (unlikely(heap_pop_tick(h, slab_pops, cls)))
            return heap_alloc_sampled_slow(n, 1);
        slab_pop_owned(s, p, (void **)p);
        *mag_cookie(p) = 0; /* a freer's mark that a collect left (see the top) */
    }
    return p;
}

/* A small malloc that the sampler has counted already, or must not count
 * (an aligned malloc counted by bytes, realloc's new block, checked mode's
 * blocks): counted in counts.alloc, never sampled here (heap.c). */
void *heap_alloc_small_quiet(size_t n);

/* Profiling has started (the constructor): this thread's heap's counts
 * are biased to reach 0 at their next add, so that each class's next
 * malloc draws its first gap (heap_sample_arm); every other heap is
 * armed by its owner, at its next small malloc's slow path (a thread a
 * library's constructor started before sluice's: its mallocs until then
 * are not sampled). */
void heaps_sample_arm(void);

/* Empty h's magazines (or only class cls's) into their slabs, clearing
 * the objects' live bits (the owner, or heaps_lock for an orphan). */
void heap_mag_flush(struct heap *h);
void heap_mag_flush_class(struct heap *h, unsigned cls);
/* The objects of magazine cls's slots [top, stop), taken off it already,
 * back to their slabs (heap_mag.c). */
void heap_mag_to_slabs(struct heap *h, unsigned cls, void **top, void **stop);
/* The magazines' trim (mag_trim.h), at time now (ms), by the owner: a
 * look at each of h's magazines (their low water bounded closer), or the
 * trim (each gives back to its slabs most of the objects at its bottom
 * that no malloc reached since the last trim). */
void heap_mag_look(struct heap *h, uint64_t now);
void heap_mag_trim(struct heap *h, uint64_t now);
/* Free of p (validated; a malloc-class object of h's) whose magazine is
 * full: straight onto its slab, its live bit cleared; in a burst, the
 * magazine grows, or at its room gives half back to the slabs, and p is
 * pushed; or idle: the magazine is laid out and p pushed. (The class is
 * read again from the page tag: passed along, the free fast path kept it
 * in a register of its own, one instruction more a pair.) */
void heap_free_mag_full_slow(struct heap *h, void *p);

/* Push p (validated, not in the magazine) onto h's magazine of class cls,
 * or free it to its slab if the magazine is full. Not counted: the push
 * is (heap_count_free). */
sl_inline void heap_mag_push(struct heap *h, void *p, unsigned cls)
{
    void **top = h->mag_top[cls] - 1;
    sl_assert((ld_relaxed(page_tag((uintptr_t)p)) & ((1u << TAG_PAGE_SHIFT) - 1)) == cls);
    if (unlikely(*top == MAG_LIMIT))
        return heap_free_mag_full_slow(h, p);
    *mag_cookie(p) = h->cookie; /* counted by the top's move: heap_count_free */
    __atomic_store_n(top, p, __ATOMIC_RELAXED); /* read by free_state_find */
    st_release64(&h->mag_top[cls], top);
    h->mag_first[cls] = p;
}

#endif
