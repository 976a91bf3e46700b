/* heap_free.h — the small free fast path (the owner's, into its magazine),
 * remote-free batches, the free-path contract (where a freed object can be)
 * and the reports of misuse.
 *
 * The cookie is also the mark of a remote free: a thread that frees
 * another heap's malloc-class object (one by one or in bulk) writes it
 * into the object's second word. So every malloc-class object that is
 * free but keeps its live bit (in a magazine; in a remote batch or the
 * remote-free bitmap, until its owner takes it) carries the cookie: a free
 * of an object that carries it is a double free if the structure that
 * holds it confirms it (free_state.c: the cookie is a hint, since a
 * program may copy a freed object's bytes into a live one), reported at
 * once, and the owner's collect checks that every object it takes still
 * carries it. Without the mark, an object freed by another thread and
 * then by its owner (or freed by its owner into the magazine and then by
 * another thread) could be handed out again by the magazine before the
 * owner took the remote bit, which would then free it under its new user;
 * with it, that object has lost the mark (malloc clears it) when its
 * remote bit is taken, and the collect reports it instead. The remote
 * freer writes the mark without reading it (the line is usually in the
 * owner's cache: a store waits in the store buffer, a load would stall).
 * A collect that unlinks objects leaves the mark in them, so malloc from a
 * slab's free list clears the second word as it pops (the link's line). A
 * live object whose second word equals the cookie by chance (2^-64 for
 * data that never held a freed object's bytes) is looked for in the
 * structures that hold freed objects, found in none, and freed.
 */
#ifndef SL_HEAP_FREE_H
#define SL_HEAP_FREE_H

#include "heap_mag.h"

/* The owner freed into s (bulk: a chain of sl_free_bulk) and its free list
 * had been empty, or s became empty. */
void heap_free_local_slow(struct heap *h, struct slab *s, bool bulk);
/* Free of a live object p of slab s (validated) by whichever thread. */
void heap_free_object(struct slab *s, void *p);

/* Push p (no longer live) onto the free list of slab s that this thread
 * owns, its free-list link at `link`: no atomics. */
sl_inline void slab_push_owned(struct heap *h, struct slab *s, void *p, void **link)
{
    sl_assert(s->used > 0 && slab_is_object_start(s, p));
    void *f = s->free;
    *link = f;
    s->free = p;
    s->used--;
    /* the slow path has work when the slab was exhausted, or is empty and
     * not the current one (the current slab emptying is the common case of
     * an alloc/free pair and needs nothing) */
    if (unlikely(!f) || unlikely(!s->used && s->state != SLAB_CURRENT))
        heap_free_local_slow(h, s, false);
}

/* Free of p (validated, its bitmap word w to become v) into slab s that
 * this thread owns, its free-list link at `link`. */
sl_inline void heap_free_owned(struct heap *h, struct slab *s, void *p, void **link, _Atomic uint64_t *w,
                               uint64_t v)
{
    st_relaxed(w, v);
    heap_count_fast(h, counts.free, s->cls);
    slab_push_owned(h, s, p, link);
}

/* The free-path contract (free_state.c): where a freed object can be,
 * found in the structure that holds it. The cookie in an object's second
 * word is a hint; only a state found here is reported. */
enum free_state {
    FREE_NOT_FOUND,   /* live, as far as any structure knows */
    FREE_IN_BATCH,    /* in a thread's remote batch */
    FREE_REMOTE_BIT,  /* its remote-free bit set, not taken by its owner */
    FREE_IN_MAGAZINE, /* in its owner's magazine */
    FREE_ON_SLAB,     /* no live bit: on its slab's free list, or unlinked */
};
/* Where p, an object start of slab s, is free; self is the calling
 * thread's heap (heap_empty if none). */
enum free_state free_state_find(void *p, struct slab *s, struct heap *self);
/* Does h's remote batch hold p? Does any other heap's than self's (heaps.c;
 * false if the registry's lock is busy)? */
bool heap_batch_holds(struct heap *h, const void *p);
bool heaps_batch_holds(const void *p, struct heap *self);
/* Free of p (live bit set; a malloc-class object of h's, class cls) whose
 * second word holds the cookie: reported if free_state_find finds it
 * free, else pushed onto the magazine (a live object whose bytes only
 * looked like a freed one's). */
void heap_free_cookie_slow(struct heap *h, void *p, unsigned cls);
/* Before a free of p (an object start of malloc slab s, by any thread):
 * if its second word holds the cookie and free_state_find confirms it,
 * report a double free. */
void heap_free_hint_check(void *p, struct slab *s);
/* Is p (live bit set) free all the same: its cookie matches and
 * free_state_find confirms it? For realloc, malloc_usable_size. */
bool heap_is_freed(void *p);

/* Free of a 16-byte aligned address inside a pageblock (the caller looked
 * the pagemap up and tested the alignment: pagemap_is_block_grain).
 * Small frees by the owning thread stay here, into the magazine. The page
 * tag is read first (the block's header is always mapped, so any address
 * in a block may read it): it says whose slab, and which class, p is of.
 * Only for the heap's own slabs is the bitmap then read; a remote free
 * does not read the line the owner writes on every allocation (the slow
 * path batches it: remote_batch.c). Nothing is written before the bitmap
 * says p is live and its cookie says it is not in the magazine. */
sl_inline void heap_free_block_tagged(void *p, uint32_t tag)
{
    uintptr_t a = (uintptr_t)p;
    struct heap *h = tls_heap;
    uint32_t x = tag_relative(h, tag);
    if (unlikely(x >= TAG_MINE_LIMIT))
        return heap_free_block_slow(p, x);
    _Atomic uint64_t *w = bitmap_word(a);
    uint64_t v = ld_relaxed(w);
    uintptr_t bit = a >> SL_GRAIN_SHIFT; /* mod 64: the bit in w */
    if (unlikely(!bit_test64(v, bit)))
        return heap_free_block_slow(p, x);
    unsigned cls = x & ((1u << TAG_PAGE_SHIFT) - 1);
    if (unlikely(*mag_cookie(p) == h->cookie))
        return heap_free_cookie_slow(h, p, cls);
    heap_mag_push(h, p, cls);
}
/* The same, with p's page tag loaded by the caller (a sized free has read
 * it for the class). */
sl_inline void heap_free_block(void *p) { heap_free_block_tagged(p, ld_relaxed(page_tag((uintptr_t)p))); }

/* malloc_usable_size's fast path, free's checks without the write: is p
 * a live malloc-class object (then its usable size goes to *n)? If not,
 * the caller takes the full check, which reports what is not live. Live
 * here is: a 16-byte aligned address in a pageblock (the block's header
 * is then mapped), a page tag (a malloc slab's page; runs, user caches
 * and zero-size slots have none), its live bit (an object start, not on
 * a free list; checked mode's pointers never have one), and a second word
 * that is not the cookie. An object that is free but keeps its live bit
 * (in a magazine, in a remote batch, with its remote-free bit set) always
 * carries the cookie (the table in free_state.c), so it goes to the full
 * check, which finds it there and reports it; so does a live object
 * whose bytes only look freed, which the full check finds live. redis
 * sizes every allocation and every free this way (2.7 calls a malloc):
 * ~94 instructions a call through the full check, 33 here. */
sl_inline bool heap_usable_fast(const void *p, size_t *n)
{
    uintptr_t a = (uintptr_t)p;
    if (unlikely(!pagemap_is_block_grain(a)))
        return false;
    uint32_t t = ld_relaxed(page_tag(a));
    if (unlikely(!t) || unlikely(!bit_test64(ld_relaxed(bitmap_word(a)), a >> SL_GRAIN_SHIFT)) ||
        unlikely(*mag_cookie((void *)p) == heap_cookie)) /* set once, before the first heap */
        return false;
    *n = class_size[t & ((1u << TAG_PAGE_SHIFT) - 1)];
    return true;
}

/* Free of p in a pageblock now, whoever owns it (validated here). */
void heap_free_block_now(void *p);

/* Batched remote frees (remote_batch.c). A free of an object of another
 * heap's malloc slab (page tag t) goes into the freeing heap's batch,
 * unread and unwritten; the batch is flushed when it holds RBATCH_CAP
 * objects or RBATCH_BYTES, and when the thread exits, drains (sl_purge, a
 * watermark boost) or is orphaned by fork. A flush sets each run of
 * objects that share a bitmap word in the remote-free bitmap, a slab's
 * words under one hold of its remote lock (slab.h). */
void remote_batch_flush(struct heap *h);
/* Add p (page tag t) to h's batch (the order of the writes: remote_batch.c's top). */
sl_inline void remote_batch_add(struct heap *h, void *p, uint32_t t)
{
    unsigned n = h->rbatch_n, cls = t & ((1u << TAG_PAGE_SHIFT) - 1);
    __atomic_store_n(&h->rbatch[n], p, __ATOMIC_RELAXED); /* free_state_find reads the batch */
    h->rbatch_cls[n] = (uint8_t)cls;
    h->rbatch_mixed |= (uint8_t)(cls ^ h->rbatch_cls[0]); /* the first's, for n == 0 */
    atomic_signal_fence(memory_order_seq_cst); /* the slot before the count (remote_batch.c, the top) */
    __atomic_store_n(&h->rbatch_n, n + 1, __ATOMIC_RELEASE);
    uint32_t bytes = h->rbatch_bytes + class_size[cls];
    __atomic_store_n(&h->rbatch_bytes, bytes, __ATOMIC_RELAXED);
    count_add(&h->counts.free[cls], 1); /* freed now, as far as the program is concerned */
    count_add(&h->counts.remote[cls], 1);
    if (n + 1 == RBATCH_CAP || bytes >= RBATCH_BYTES)
        remote_batch_flush(h);
}

/* Usable size of a live block-backed allocation at p (validated). */
size_t heap_usable_size(void *p);
/* Free p to cache id (a user cache, or a malloc class), validating
 * everything; reports and aborts on misuse. */
void heap_free_to_cache(unsigned id, void *p);
/* Report that p (live; of slab s, or NULL if not a slab object) was freed
 * to cache id it does not belong to, and abort. */
_Noreturn void heap_wrong_cache_free(unsigned id, struct slab *s, const void *p);
/* Report a free of p that is not a live allocation, and abort. */
_Noreturn void heap_bad_free(const void *p, uintptr_t pm_entry, const char *op);

#endif
