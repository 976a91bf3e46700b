/* slab.h — a slab: a run of pages holding objects of one cache (a malloc
 * size class or a user object cache), described in its head page descriptor
 * (the kernel keeps struct slab in struct page the same way).
 *
 * Free objects are chained through the word at link_off: 0 (the object's
 * first word) except for caches with a constructor, whose objects keep
 * their constructed state while free, so the link sits after the object
 * (the kernel's SLUB does the same). Three lists:
 *   free    owner-private freelist: alloc pops, owner frees push. No atomics.
 *   remote  frees by other threads: a LIFO of records pushed with one CAS,
 *           taken whole by the owner (atomic exchange) on its slow path. A
 *           record is a run of freed objects that share a bitmap word,
 *           written into one of them (the record object): its link (at
 *           link_off) holds the next record, and its second word the run's
 *           mask of live bits, its own among them. Nothing is written into
 *           the run's other objects, and the owner clears the whole mask
 *           with one store and reads no object but the record's. Slabs
 *           whose objects keep constructed state (link_off != 0) have no
 *           room for a mask: a record is one object, its mask implied.
 *           The list head is not in struct slab but in the block's remote
 *           heads (block.h), as a 32-bit word: the first record's grain in
 *           the block << 1, | SLAB_FULL_BIT (0: empty); the links are whole
 *           pointers. Collected objects become unlinked (below).
 *   carve   objects never handed out yet are carved lazily, a page at a
 *           time, so a fresh slab touches only what it uses.
 *   unlinked  objects the owner freed in bulk (bulk.c) or collected from the
 *           remote list are on no list: their
 *           live bits are cleared and counted here, and nothing is written
 *           into them. When the free list runs dry, slab_relink finds them
 *           again in the bitmap (carved objects with no live bit that are
 *           not in the owner's magazine) a bitmap word at a time, and
 *           pushes them onto the free list.
 * Counts: used == carved - |free| - unlinked (objects on the remote list and
 * in the owner's magazine count as used).
 *
 * States (field state, owner-only):
 *   CURRENT  the heap's allocation slab for its cache (heap.cur)
 *   PARTIAL  on the heap's partial list for its cache
 *   FULL     malloc classes: on no list; SLAB_FULL_BIT is set in remote. The
 *            first remote free clears the bit and pushes the slab onto the
 *            owner heap's notify stack (through slab.next), so the owner
 *            finds it again. User caches: on the heap's full list, which
 *            the owner scans for remote frees (no notify stack, so that
 *            destroying a cache never races a push).
 *   NOTIFY   on no list, a notify push is in flight: the owner freed into a
 *            FULL slab after a remote freer had cleared the bit. It waits
 *            for the notify stack and is never released before.
 * owner is the owning heap's address, tagged with bit 0 for user caches, so
 * the malloc free fast path (owner == heap) never takes a user cache's
 * object; it is set when the slab is created or adopted and is 0 once the
 * slab is released, so a stale descriptor never matches a heap.
 */
#ifndef SL_SLAB_H
#define SL_SLAB_H

#include "../page/block.h"
#include "size_class.h"

struct heap;

/* Cache ids: 0..SL_NCLASSES-1 are the malloc size classes, the rest user
 * object caches (sl_cache_create). */
#define SL_NIDS 512

/* What a slab of a cache id looks like; set when the id is opened, read by
 * every slab of it. key: nonzero while the id is open, unique per cache. */
struct slab_geom {
    uint32_t size;     /* object stride, a multiple of 16 */
    uint16_t pages;    /* slab length */
    uint16_t link_off; /* where a free object keeps its link */
    uint8_t type;      /* enum pb_type of the blocks its slabs come from */
    uint32_t key;
    void (*ctor)(void *);
    const char *name; /* user caches; NULL for the malloc classes */
};
extern struct slab_geom slab_geom[SL_NIDS];
void slab_geom_init(void); /* the malloc classes' entries; before the first slab */

sl_inline uintptr_t slab_owner_word(struct heap *h, unsigned id)
{
    return (uintptr_t)h | (id >= SL_NCLASSES);
}

enum slab_state { SLAB_CURRENT = 1, SLAB_PARTIAL, SLAB_FULL, SLAB_NOTIFY };
#define SLAB_FULL_BIT 1u

struct slab {
    struct page_hdr h;          /* page layer: kind PG_SLAB, npages */
    void *free;                 /* owner */
    _Atomic uintptr_t owner;    /* slab_owner_word; written by the owner, read by all */
    struct slab *next, *prev;   /* owner: partial list; FULL: notify stack */
    uint16_t carved;            /* owner: objects carved so far */
    uint16_t link_off;          /* free-list link offset in an object */
    uint32_t size;              /* object stride */
    uint16_t used, capacity;    /* owner */
    uint16_t cls;               /* cache id */
    uint8_t state;              /* enum slab_state, owner */
    uint16_t unlinked;          /* owner: free objects on no list (see above) */
};
_Static_assert(sizeof(struct slab) <= sizeof(struct page), "slab fits in its page descriptor");

sl_inline struct slab *slab_of_page(struct page *pg) { return (struct slab *)(void *)pg; }
/* The remote list head of slab s (see above), and its encoding. */
sl_inline _Atomic uint32_t *slab_remote(struct slab *s) { return page_rhead((uintptr_t)page_addr((struct page *)(void *)s)); }
sl_inline uint32_t remote_word(const void *p) { return (uint32_t)(((uintptr_t)p & (SL_BLOCK - 1)) >> SL_GRAIN_SHIFT << 1); }
sl_inline void *remote_object(const void *in_block, uint32_t w)
{
    w >>= 1;
    return w ? (uint8_t *)block_of(in_block) + ((size_t)w << SL_GRAIN_SHIFT) : NULL;
}
/* Push the chain of records first .. (the record whose link is last_link)
 * onto the remote list at rh with one CAS; true if the FULL bit was set
 * (the caller must tell the owner: heap_wake). */
sl_inline bool remote_push(_Atomic uint32_t *rh, void *first, void **last_link)
{
    uint32_t old = atomic_load_explicit(rh, memory_order_relaxed);
    do {
        *last_link = remote_object(first, old);
    } while (!atomic_compare_exchange_weak_explicit(rh, &old, remote_word(first), memory_order_acq_rel,
                                                    memory_order_relaxed));
    return old & SLAB_FULL_BIT;
}
/* A remote record's mask of live bits (see above), and writing one. */
sl_inline uint64_t *record_mask_word(void *rec) { return (uint64_t *)rec + 1; }
sl_inline uint64_t record_mask(uint16_t link_off, void *rec)
{
    return link_off ? bitmap_bit((uintptr_t)rec) : *record_mask_word(rec);
}
sl_inline uint8_t *slab_base(struct slab *s) { return page_addr((struct page *)(void *)s); }
sl_inline void **slab_link(struct slab *s, void *p) { return (void **)((uint8_t *)p + s->link_off); }
sl_inline bool slab_owned_by(struct slab *s, struct heap *h)
{
    return (atomic_load_explicit(&s->owner, memory_order_relaxed) & ~(uintptr_t)1) == (uintptr_t)h;
}

/* Lay a fresh slab of cache id over a page run; nothing carved yet, no
 * owner (slab_set_owner gives it one). */
void slab_init(struct slab *s, unsigned id);
/* Make owner_word the slab's owner (0: none) and tag every page of it with
 * tag | its place in the slab << 6 (block.h's page tags; tag 0 for no owner
 * and for user caches: then the pages' tags are 0). Every change of a
 * slab's owner goes through here, so that the tags never name a slab that
 * is gone. */
void slab_set_owner(struct slab *s, uintptr_t owner_word, uint32_t tag);
/* Carve up to a page of never-used objects onto the free list, running the
 * cache's constructor on each; false if none left. */
bool slab_carve(struct slab *s);
/* Link the unlinked objects onto the free list (the owner, its free list
 * empty; mag: its magazine of s's class from the top, NULL-ended, or NULL
 * for a user cache). False if there were none. */
bool slab_relink(struct slab *s, void **mag);
/* Take the remote list: each record's objects are checked against the
 * bitmap (a double free shows up here), their bits cleared a word at a
 * time, and they become unlinked. Returns the number taken. */
unsigned slab_collect(struct slab *s);
/* Remote free (another thread's slab; p validated): push a record of p
 * alone with one CAS; returns true if the slab was FULL and the caller
 * must notify its owner. */
bool slab_free_remote(struct slab *s, void *p);
/* Make the counts of a slab whose owner may have stopped mid-operation (a
 * thread that did not survive fork) agree again: objects on the free list
 * are not live, carved objects neither live nor free go on the free list
 * (the unlinked ones among them), and used == carved - |free|. A free
 * list that leaves the slab is cut. */
void slab_repair(struct slab *s);
/* Is p the start of an object of this slab (for error messages)? */
bool slab_is_object_start(struct slab *s, const void *p);

#endif
