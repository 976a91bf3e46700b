/* bulk.c — sl_free_bulk and sl_alloc_bulk: the SLUB detached-freelist bulk
 * operations in user space.
 *
 * Free (the kernel's build_detached_freelist): the last object of the array
 * opens a detached freelist; scanning backwards with a bounded look-ahead
 * (LOOKAHEAD_MISSES objects of other slabs in a row end it), the objects of
 * the same slab join it with no synchronisation, and their entries are set
 * to NULL, as kmem_cache_free_bulk does (the array holds freed pointers
 * either way). The chain is published with one operation: for a slab this
 * thread owns, a count (its objects become unlinked: slab.h; nothing is
 * written into them, so a batch freed long after it was filled costs no
 * miss on its objects, and the slab links them when it next needs them);
 * for another thread's slab, its bits set in the remote-free bitmap a
 * bitmap word at a time under the slab's remote lock, whose release marks
 * the summary (slab.h): one atomic per slab, and nothing is written into
 * the objects there either. Another heap's malloc slab is known from the
 * page tag alone, as in sl_free: its geometry is its class's, and neither
 * its descriptor nor the live bitmap (lines its owner writes) is read.
 *
 * Every object is still validated a bitmap word at a time: against the
 * live bitmap for this thread's slabs (the bits are cleared here; the
 * class's magazine, whose objects keep their bits, is flushed into the
 * slabs first), so a double free inside one batch, or of an object
 * already free, is caught;
 * for another thread's, against the chain's own bits (an object twice in
 * the batch) and the remote-free bits already set (the OR returns them: an
 * array that comes back to a word, or another thread's earlier free); the
 * owner checks the rest against the live bitmap when it takes the bits.
 *
 * Alloc: take the current slab's whole freelist at once, refilling from
 * the slab layer until n objects are out; all or none.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "../base/fatal.h"
#include "../prof/prof.h"
#include "../slab/heap_free.h"
#include "bulk.h"

#define LOOKAHEAD_MISSES 16 /* other-slab entries in a row before a chain is closed */

/* Validate p (live, start of an object) and return its slab, or NULL if p
 * is not a slab object (a run, a huge mapping, a bad pointer: sl_free
 * handles and reports those one by one). */
static struct slab *slab_of_live(void *p)
{
    uintptr_t e = pagemap_get((uintptr_t)p);
    if (!(e & PM_BLOCK) || !bitmap_test((uintptr_t)p))
        return NULL;
    struct page *head = page_head(page_of(p));
    return head->h.kind == PG_SLAB ? slab_of_page(head) : NULL;
}

/* Publish n objects of slab s: for this thread's slab, their live bits are
 * cleared already and they become unlinked (slab.h: nothing is written into
 * them, no atomics); for another thread's, their remote-free bits are set
 * already under its remote lock (old: the summary it had), and its release
 * marks the groups sum. */
static void splice(struct heap *h, struct slab *s, unsigned id, uint32_t old, uint32_t sum, unsigned n, bool own)
{
    if (own) {
        bool had_free = s->free || s->unlinked;
        s->unlinked = (uint16_t)(s->unlinked + n);
        s->used = (uint16_t)(s->used - n);
        count_add(&h->counts.free[id], n);
        count_add(&h->counts.bulk[id], n);
        if (!had_free || (!s->used && s->state != SLAB_CURRENT))
            heap_free_local_slow(h, s, true);
        return;
    }
    bool was_full = remote_unlock_marked(s, &h->remote_held, old, sum);
    stat_add(h->stats, STAT_free_remote, n);
    count_add(&h->counts.free[id], n);
    count_add(&h->counts.remote[id], n);
    count_add(&h->counts.bulk[id], n);
    if (was_full && heap_wake(atomic_load_explicit(&s->owner, memory_order_relaxed), s))
        page_wake_reclaimer(); /* a FULL slab stays its owner's until this wakes it */
}

/* A chain met an object whose live bit is gone (double free, or a pointer
 * twice in the batch): unless a misaligned pointer in ptrs[from, to) took
 * that bit first (the run below skips the alignment test), report q. */
static sl_noinline _Noreturn void chain_bad(void **ptrs, size_t from, size_t to, uintptr_t q)
{
    for (size_t i = from; i < to; i++)
        if ((uintptr_t)ptrs[i] & (SL_GRAIN - 1))
            q = (uintptr_t)ptrs[i];
    heap_bad_free((void *)q, pagemap_get(q), "free");
}

/* An object q of class cls of another thread's malloc slab s at lo joins
 * a chain: it must be an object start (the mark goes into its second word,
 * so into no other object); a mark there already is a hint of a double
 * free, reported if confirmed (slab/free_state.c), as in sl_free; then it
 * gets the mark, which the owner checks when it takes the bit. */
sl_inline void chain_mark(struct slab *s, uintptr_t q, uintptr_t lo, unsigned cls)
{
    if (unlikely(!class_object_start(cls, (uint32_t)(q - lo))))
        heap_bad_free((void *)q, pagemap_get(q), "free");
    heap_free_hint_check((void *)q, s);
    *mag_cookie((void *)q) = heap_cookie;
}

/* One chain: the objects of slab s (npages long, objects of size bytes
 * filling span bytes of it) from ptrs[n] (the chain's first, p, validated)
 * down, with a bounded look-ahead. Another thread's slab's descriptor is
 * not read (the caller may have its geometry from its page tag). Objects are handled one
 * bitmap word at a time; avail holds what may still join the chain from
 * the word, and each object is checked against it before anything is
 * written for it. For this thread's slabs avail starts as the live word,
 * loaded once, and the word is stored once with the chain's bits cleared
 * (only the owner writes it, so the loaded value stays exact); for
 * another thread's it starts full, and the chain's bits (~avail) are set
 * in the remote-free bitmap when the chain leaves the word.
 * The common case, a batch of one slab's objects, is the first loop: the
 * run of entries of s right below p, nothing set to NULL (the caller skips
 * the run), alignment tested once for the run (per object for another
 * thread's slab, whose bits are set before the run ends). Past the first
 * entry of another slab, the second loop: look-ahead, NULL entries,
 * consumed entries set to NULL. own is a constant in each of the two
 * copies. id is s's cache id (a malloc class's objects get the mark). */
sl_inline void chain_build(struct heap *h, struct slab *s, unsigned npages, uint32_t size, uintptr_t span,
                            void **ptrs, size_t *np, bool own, unsigned id)
{
    bool mark = !own && id < SL_NCLASSES;
    size_t n = *np, j = n;
    uintptr_t p = (uintptr_t)ptrs[n], lo = (uintptr_t)slab_base(s);
    _Atomic uint64_t *bm = bitmap_word(lo) - ((lo >> 10) & (BLOCK_BITMAP_WORDS - 1)); /* the block's bitmap */
    unsigned gsh = remote_sum_shift(npages);
    uintptr_t wk = p >> 10; /* the word loaded */
    uint64_t value = own ? ld_relaxed(&bm[wk & (BLOCK_BITMAP_WORDS - 1)]) : ~(uint64_t)0;
    uint64_t avail = value & ~bitmap_bit(p), misaligned = 0;
    if (mark)
        chain_mark(s, p, lo, id);
    uint32_t sum = own ? 0 : remote_sum_bit(lo, p, gsh);
    uint32_t old = own ? 0 : remote_lock(s, &h->remote_held);
/* the chain leaves word wk for the word of q */
#define CHAIN_SWITCH(q)                                                                                               \
    do {                                                                                                              \
        if (own) {                                                                                                    \
            if (avail != value)                                                                                       \
                st_relaxed(&bm[wk & (BLOCK_BITMAP_WORDS - 1)], avail);                                                \
            value = avail = ld_relaxed(&bm[((q) >> 10) & (BLOCK_BITMAP_WORDS - 1)]);                                  \
        } else {                                                                                                      \
            remote_set(wk << 10, ~avail, size);                                                                       \
            avail = ~(uint64_t)0;                                                                                     \
            sum |= remote_sum_bit(lo, (q), gsh);                                                                      \
        }                                                                                                             \
        wk = (q) >> 10;                                                                                               \
    } while (0)
    /* An entry in the word of the last one is in the same page, so in s
     * (slabs are whole pages): only a new word is tested against s's span.
     * A pointer into s's tail past its last object has no live bit, so the
     * owner's check reports it (here, or at the owner's collect). */
    while (j) {
        uintptr_t q = (uintptr_t)ptrs[j - 1];
        if (unlikely(q >> 10 != wk)) {
            if (q - lo >= span)
                break;
            CHAIN_SWITCH(q);
        }
        j--;
        misaligned |= q;
        if (!own && unlikely(q & (SL_GRAIN - 1)))
            chain_bad(ptrs, j, n, q);
        if (mark)
            chain_mark(s, q, lo, id);
        if (unlikely(!bit_take64(&avail, q >> SL_GRAIN_SHIFT)))
            chain_bad(ptrs, j, n, q);
    }
    if (unlikely(misaligned & (SL_GRAIN - 1)))
        chain_bad(ptrs, j, n, 0);
    unsigned count = (unsigned)(n - j) + 1, misses = 0;
    size_t first_miss = SIZE_MAX;
    while (j) {
        uintptr_t q = (uintptr_t)ptrs[--j];
        if (q - lo >= span) {
            if (!q)
                continue;
            if (first_miss == SIZE_MAX)
                first_miss = j;
            if (++misses == LOOKAHEAD_MISSES)
                break;
            continue;
        }
        misses = 0;
        if (unlikely(q & (SL_GRAIN - 1)))
            heap_bad_free((void *)q, pagemap_get(q), "free");
        if (mark)
            chain_mark(s, q, lo, id);
        if (q >> 10 != wk)
            CHAIN_SWITCH(q);
        if (unlikely(!bit_take64(&avail, q >> SL_GRAIN_SHIFT)))
            heap_bad_free((void *)q, pagemap_get(q), "free");
        count++;
        ptrs[j] = NULL;
    }
#undef CHAIN_SWITCH
    if (own && avail != value)
        st_relaxed(&bm[wk & (BLOCK_BITMAP_WORDS - 1)], avail);
    if (!own)
        remote_set(wk << 10, ~avail, size);
    splice(h, s, id, old, sum, count, own);
    n = first_miss == SIZE_MAX ? 0 : first_miss + 1; /* skip what the chain consumed */
    while (n && !ptrs[n - 1])
        n--;
    *np = n;
}

void bulk_free(void **ptrs, size_t n, unsigned expect, void (*free_one)(void *p))
{
    struct heap *h = heap_get_for_free();
    if (!h) { /* no memory for a heap: free one by one */
        for (size_t i = 0; i < n; i++)
            if (ptrs[i])
                expect == ANY_CACHE ? free_one(ptrs[i]) : heap_free_to_cache(expect, ptrs[i]);
        return;
    }
    stat_add(h->stats, STAT_bulk_free_calls, 1);
    /* the metadata of a batch freed long after it was filled is cold: its
     * page descriptors' and bitmap words' lines are asked for at once
     * (every eighth object's, so every page's for objects up to 512
     * bytes), not one miss after another as the chains reach them. A
     * prefetch never faults, so bad pointers are harmless here. */
    for (size_t i = 0; i < n; i += 8) { /* addresses as integers: an entry may be NULL */
        uintptr_t a = (uintptr_t)ptrs[i], b = align_down(a, SL_BLOCK);
        __builtin_prefetch((void *)(b + page_index((void *)a) * sizeof(struct page)));
        __builtin_prefetch((void *)(b + BLOCK_BITMAP_OFF + ((a >> 10) & (BLOCK_BITMAP_WORDS - 1)) * 8));
    }
    /* build_detached_freelist: the last object opens a chain; scanning
     * backwards, objects of its slab join it; LOOKAHEAD_MISSES objects of
     * other slabs in a row close it. */
    while (n) {
        void *p = ptrs[--n];
        if (!p)
            continue;
        /* another heap's malloc slab, from its page tag alone (as a remote
         * free in sl_free): neither its descriptor nor the live bitmap is
         * read, the owner checks the bits when it takes them */
        uint32_t t;
        if (expect == ANY_CACHE && pagemap_is_block_grain((uintptr_t)p) && (t = ld_relaxed(page_tag((uintptr_t)p))) &&
            tag_relative(h, t) >= TAG_MINE_LIMIT) {
            unsigned cls = t & ((1u << TAG_PAGE_SHIFT) - 1), pages = class_pages[cls];
            uint32_t size = class_size[cls];
            struct slab *s = slab_of_page(page_of((void *)tag_slab_head(p, t)));
            chain_build(h, s, pages, size, ((uintptr_t)pages << SL_PAGE_SHIFT) / size * size, ptrs, &n, false, cls);
            continue;
        }
        struct slab *s = slab_of_live(p);
        if (!s) { /* runs, huge mappings, and the report of a bad pointer */
            expect == ANY_CACHE ? free_one(p) : heap_free_to_cache(expect, p);
            continue;
        }
        if (s->cls != expect && expect != ANY_CACHE)
            heap_wrong_cache_free(expect, s, p);
        uintptr_t span = (uintptr_t)s->capacity * s->size;
        if (slab_owned_by(s, h)) {
            /* the magazine's objects are live in the bitmap, but free: back
             * to the slabs first, so that the chain's check sees them free */
            if (s->cls < SL_NCLASSES && unlikely(*heap_mag_of(h, s->cls))) {
                heap_mag_flush_class(h, s->cls);
                if (!bitmap_test((uintptr_t)p))
                    heap_bad_free(p, pagemap_get((uintptr_t)p), "free");
            }
            /* a user cache's objects that other threads freed are live until
             * taken (malloc classes carry the mark instead, slab/heap.h):
             * taken first, so that the chain's check sees them free */
            if (s->cls >= SL_NCLASSES &&
                unlikely(ld_relaxed(slab_remote(s)) & (SLAB_REMOTE_GROUPS | SLAB_REMOTE_LOCK))) {
                heap_slab_collect(h, s, NULL);
                if (!bitmap_test((uintptr_t)p))
                    heap_bad_free(p, pagemap_get((uintptr_t)p), "free");
            }
            chain_build(h, s, s->h.npages, s->size, span, ptrs, &n, true, s->cls);
        }
        else
            chain_build(h, s, s->h.npages, s->size, span, ptrs, &n, false, s->cls); /* user caches: no mark */
    }
}

/* n objects of cache id from this thread's slabs, all or none. */
size_t bulk_alloc(struct heap *h, unsigned id, size_t n, void **out)
{
    size_t got = 0;
    while (got < n) {
        struct slab *s = heap_refill(h, id);
        if (!s) {
            bulk_free(out, got, id, NULL); /* objects of id, all of them */
            errno = ENOMEM;
            return 0;
        }
        /* take the whole freelist, give back what is not needed */
        void *p = s->free;
        size_t took = 0;
        while (p && got < n) {
            out[got++] = p;
            if (id < SL_NCLASSES)
                *mag_cookie(p) = 0; /* a freer's mark that a collect left */
            bitmap_set_owner((uintptr_t)p);
            p = *slab_link(s, p);
            took++;
        }
        s->free = p;
        s->used = (uint16_t)(s->used + took);
        count_add(&h->counts.alloc[id], took); /* before a failure's bulk_free counts them back */
    }
    return n;
}

void bulk_prof_free(void **ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)ptrs[i];
        if (!a || !(pagemap_get(a) & PM_BLOCK) || !bitmap_test(a))
            continue;
        struct page *head = page_head(page_of(ptrs[i]));
        if (head->h.kind == PG_SLAB && __atomic_load_n(&head->h.prof, __ATOMIC_RELAXED))
            prof_free(ptrs[i]);
    }
}
