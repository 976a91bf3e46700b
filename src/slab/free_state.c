/* free_state.c — the free-path contract: where a freed slab object can be,
 * and the one check that every way back into sluice (free, free_sized, the
 * C++ deletes, realloc, malloc_usable_size, sl_free_bulk, sl_cache_free,
 * sl_cache_free_bulk, a remote batch's flush, a collect) relies on before it
 * reports a double free.
 *
 * The states of a malloc-class object p of heap H's slab s, and what
 * catches a second free of p in each, by H (the owner) or by another
 * thread T:
 *
 *   state of p                 live bit  remote bit  2nd word   caught by
 *   -------------------------  --------  ----------  ---------  ----------------------------------
 *   live (handed out)             1          0       user data  (no misuse: the free goes on)
 *   in H's magazine               1          0       cookie     H: hint, then H's magazine
 *                                                                T: hint, then H's magazine (read by T)
 *   in a remote batch of U        1          0       cookie     H, T: hint, then U's batch
 *                                                                U: hint, then its own batch
 *   remote bit set, not taken     1          1       cookie     H, T: hint, then the remote bit;
 *                                                                T also at its flush (bit set twice)
 *   on s's free list / unlinked   0          0       cookie     H: the live bit (fast path);
 *                                                                T: hint, then the live bit
 *   slab gone (page cache, free)  tag gone   -       -          the page tag, then heap_bad_free
 *   pageblock unmapped            -          -       -          the pagemap: a foreign pointer
 *
 * The cookie (heap_cookie, random per process) in the second word is only
 * a hint: a program may copy a freed object's bytes into a live one (glibc's
 * tst-tcfree3 does), so a match is confirmed in the structure that holds
 * the object before anything is reported (free_state_find). An
 * unconfirmed match is a live object: its free goes on. Objects reach a
 * free list with the cookie (a magazine flush and a free past a full
 * magazine write it; a collect leaves the freer's), so another thread's
 * free of one is confirmed by the live bit at once. Where the cookie is
 * absent (a bulk free by the owner writes nothing into its objects), a
 * second free by another thread sets a remote bit that the owner's collect
 * checks against the live bit and the mark: still reported, at the
 * collect. User caches carry no cookie: the live bit and the remote bit
 * are read at every free (heap_free_object).
 *
 * Races: a state is read without the owner's cooperation. Each structure
 * is published with release stores (a magazine's top, a batch's count),
 * read here with acquire loads, so that a slot found holding p was written
 * after p was last handed out: a legitimately held pointer is never found
 * free. An object in flight between states (a flush, a collect) can be
 * missed by a second free that races it; the collect's checks report it
 * then.
 */
#include "heap_free.h"

#include "heap_lists.h"

/* Does the magazine of class cls of heap h hold p? Any thread may ask. */
static bool magazine_holds(struct heap *h, unsigned cls, const void *p)
{
    void **top = __atomic_load_n(&h->mag_top[cls], __ATOMIC_ACQUIRE);
    for (void *q; (q = __atomic_load_n(top, __ATOMIC_RELAXED)); top++)
        if (q == p)
            return true;
    return false;
}

bool heap_batch_holds(struct heap *h, const void *p)
{
    unsigned n = __atomic_load_n(&h->rbatch_n, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n && i < RBATCH_CAP; i++)
        if (__atomic_load_n(&h->rbatch[i], __ATOMIC_RELAXED) == p)
            return true;
    return false;
}

enum free_state free_state_find(void *p, struct slab *s, struct heap *self)
{
    uintptr_t a = (uintptr_t)p;
    /* upstream first: batch -> remote bit -> magazine or free list, so an
     * object that moves on while it is looked for is met further down */
    if (self != &heap_empty && heap_batch_holds(self, p))
        return FREE_IN_BATCH;
    if (heaps_batch_holds(p, self))
        return FREE_IN_BATCH;
    if (ld_relaxed(rbitmap_word(a)) & bitmap_bit(a))
        return FREE_REMOTE_BIT;
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (owner && !(owner & 1) && s->cls < SL_NCLASSES && magazine_holds((struct heap *)owner, s->cls, p))
        return FREE_IN_MAGAZINE;
    if (!bitmap_test(a))
        return FREE_ON_SLAB;
    return FREE_NOT_FOUND;
}

/* p's second word holds the cookie and its slab is s: report it if it is
 * free (op names the call), else return. */
static void confirm(void *p, struct slab *s, const char *op)
{
    if (free_state_find(p, s, tls_heap) != FREE_NOT_FOUND)
        heap_bad_free(p, pagemap_get((uintptr_t)p), op);
}

void heap_free_cookie_slow(struct heap *h, void *p, unsigned cls)
{
    confirm(p, slab_of_page(page_head(page_of(p))), "free");
    heap_mag_push(h, p, cls); /* live: its bytes only looked like a freed object's */
}

void heap_free_hint_check(void *p, struct slab *s)
{
    if (unlikely(*mag_cookie(p) == __atomic_load_n(&heap_cookie, __ATOMIC_RELAXED)))
        confirm(p, s, "free");
}

bool heap_is_freed(void *p)
{
    uint32_t t = ld_relaxed(page_tag((uintptr_t)p)); /* runs and user caches: tag 0, no cookie */
    if (!t || *mag_cookie(p) != __atomic_load_n(&heap_cookie, __ATOMIC_RELAXED))
        return false;
    return free_state_find(p, slab_of_page(page_head(page_of(p))), tls_heap) != FREE_NOT_FOUND;
}
