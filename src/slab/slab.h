/* slab.h — a slab: a run of pages holding objects of one cache (a malloc
 * size class or a user object cache), described in its head page descriptor
 * (the kernel keeps struct slab in struct page the same way).
 *
 * Free objects are chained through the word at link_off: 0 (the object's
 * first word) except for caches with a constructor, whose objects keep
 * their constructed state while free, so the link sits after the object
 * (the kernel's SLUB does the same). Three lists:
 *   free    owner-private freelist: alloc pops, owner frees push. No atomics.
 *   remote  frees by other threads, on no list: they go to the block's
 *           remote-free bitmap (block.h) under the slab's remote lock, bit
 *           31 of the slab's summary word (the word is not in struct slab
 *           but in the block's remote heads). A freeing thread takes the
 *           lock with one compare-and-swap, sets the objects' bits with
 *           plain loads and stores (a bit already set is a double free,
 *           reported), and releases it with one store that also marks the
 *           summary: bit 0 is SLAB_FULL_BIT (cleared), bit g + 1 says that
 *           words g << sh .. of the slab may hold bits (sh:
 *           remote_sum_shift, so that 30 bits cover the slab). So a batch
 *           of one slab's objects costs one atomic, however many words it
 *           spans. Nothing is written into the objects and nothing into
 *           the live bitmap, so a remote free pulls no line its owner
 *           writes. The owner takes the lock on its slow path, takes each
 *           marked word's bits, checks them against the live bitmap (a bit
 *           not live there is a double free) and clears them there, and
 *           releases the lock with the summary cleared; the objects become
 *           unlinked (below). Objects with bits in the remote-free bitmap
 *           count as used, so a slab is released only when it has none
 *           (slab_release checks).
 *           The lock is a spin lock held for a few dozen plain stores; a
 *           thread records the slab it locks in its heap (remote_held), so
 *           a fork child frees the locks of the threads fork left behind
 *           (slab_remote_unstick).
 *   carve   objects never handed out yet are carved lazily, a page at a
 *           time, so a fresh slab touches only what it uses.
 *   unlinked  objects the owner freed in bulk (bulk.c) or took from the
 *           remote-free bitmap are on no list: their
 *           live bits are cleared and counted here, and nothing is written
 *           into them. When the free list runs dry, slab_relink finds them
 *           again in the bitmap (carved objects with no live bit: those in
 *           the owner's magazine keep theirs) a bitmap word at a time, and
 *           pushes them onto the free list.
 * Counts: used == carved - |free| - unlinked (objects with remote-free bits
 * and objects in the owner's magazine count as used).
 *
 * States (field state, owner-only):
 *   CURRENT  the heap's allocation slab for its cache (heap.cur)
 *   PARTIAL  on the heap's partial list for its cache
 *   FULL     malloc classes: on no list; SLAB_FULL_BIT is set in remote. The
 *            first remote free clears the bit and pushes the slab onto the
 *            owner heap's notify stack of its class (through slab.next), so
 *            the owner finds it again at its next refill of the class; if
 *            remote frees empty it while the owner idles, the reclaimer
 *            takes it back instead (notify.c). User caches: on the heap's full list, which
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
void slab_geom_init(void); /* the malloc classes' entries and their magazines' layout; before the first heap */

sl_inline uintptr_t slab_owner_word(struct heap *h, unsigned id)
{
    return (uintptr_t)h | (id >= SL_NCLASSES);
}

enum slab_state { SLAB_CURRENT = 1, SLAB_PARTIAL, SLAB_FULL, SLAB_NOTIFY };
#define SLAB_FULL_BIT 1u
#define SLAB_REMOTE_LOCK (1u << 31)
#define SLAB_REMOTE_GROUPS 0x7ffffffeu /* every group's summary bit */

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
    uint16_t constructed;       /* owner: objects whose constructor has run (the
                                 * carved ones but a carve in progress) */
};
_Static_assert(sizeof(struct slab) <= sizeof(struct page), "slab fits in its page descriptor");

sl_inline struct slab *slab_of_page(struct page *pg) { return (struct slab *)(void *)pg; }
/* The remote-free summary word of slab s (see above). */
sl_inline _Atomic uint32_t *slab_remote(struct slab *s) { return page_rhead((uintptr_t)page_addr((struct page *)(void *)s)); }
/* The summary's word-group shift for a slab of npages pages: 4 bitmap words
 * (1 KiB each) per page, at most 30 groups. */
sl_inline unsigned remote_sum_shift(unsigned npages)
{
    unsigned sh = 0;
    while (((npages * (SL_PAGE >> 10) - 1) >> sh) >= 30)
        sh++;
    return sh;
}
/* The summary bit of the bitmap word holding q, in the slab at base. */
sl_inline uint32_t remote_sum_bit(uintptr_t base, uintptr_t q, unsigned sh)
{
    return 2u << ((q - base) >> 10 >> sh);
}
uint32_t remote_lock_slow(struct slab *s, struct slab **held);
/* Take s's remote lock; returns the summary as it was (lock bit clear).
 * held: the slot of the heap on whose behalf this thread works
 * (heap.remote_held), or NULL under a lock that fork takes. */
sl_inline uint32_t remote_lock(struct slab *s, struct slab **held)
{
    _Atomic uint32_t *rh = slab_remote(s);
    if (held) {
        if (unlikely(*held))
            return remote_lock_slow(s, held); /* a signal handler inside this thread's lock */
        *held = s;
        atomic_signal_fence(memory_order_seq_cst); /* the slot before the lock: fork sees it */
    }
    uint32_t old = ld_relaxed(rh) & ~SLAB_REMOTE_LOCK;
    if (likely(atomic_compare_exchange_weak_explicit(rh, &old, old | SLAB_REMOTE_LOCK, memory_order_acquire,
                                                     memory_order_relaxed)))
        return old;
    return remote_lock_slow(s, NULL);
}
/* Release s's remote lock, the summary becoming sum. Release: the owner
 * that takes the lock next may reuse the objects whose bits were set. */
sl_inline void remote_unlock(struct slab *s, struct slab **held, uint32_t sum)
{
    atomic_store_explicit(slab_remote(s), sum, memory_order_release);
    if (held && *held == s) { /* not a nested hold's (remote_lock_slow) */
        atomic_signal_fence(memory_order_seq_cst);
        *held = NULL;
    }
}
/* A remote-free bit found set already: a double free (freed by another
 * thread or batch, not yet taken). Reports the first of twice, in the
 * word at q, and aborts. */
_Noreturn void remote_double_free(uintptr_t q, uint64_t twice, uint32_t size);
/* Under s's remote lock: set the remote-free bits m of the word at q (the
 * objects were live: checked by the caller before, or by the owner
 * after), objects of size bytes; a bit of m set already is a double free,
 * reported. */
sl_inline void remote_set(uintptr_t q, uint64_t m, uint32_t size)
{
    _Atomic uint64_t *w = rbitmap_word(q);
    uint64_t v = ld_relaxed(w);
    if (unlikely(v & m))
        remote_double_free(q, v & m, size);
    st_relaxed(w, v | m);
}
/* Release s's remote lock after a remote free that set bits in the groups
 * of sum: the FULL bit goes. True if it was set (old: the summary
 * remote_lock returned): the caller must tell the owner (heap_wake). */
sl_inline bool remote_unlock_marked(struct slab *s, struct slab **held, uint32_t old, uint32_t sum)
{
    remote_unlock(s, held, (old & ~SLAB_FULL_BIT) | sum);
    return old & SLAB_FULL_BIT;
}
sl_inline uint8_t *slab_base(struct slab *s) { return page_addr((struct page *)(void *)s); }
sl_inline void **slab_link(struct slab *s, void *p) { return (void **)((uint8_t *)p + s->link_off); }
/* Has another thread freed object a of s, its bit not taken by the owner
 * yet? Read by the owner's free of a user cache's object (whose remote
 * frees set their bit at once; malloc classes have the mark instead,
 * heap.h): the word only when the summary says some group has bits. */
sl_inline bool slab_freed_remotely(struct slab *s, uintptr_t a)
{
    return (ld_relaxed(slab_remote(s)) & (SLAB_REMOTE_GROUPS | SLAB_REMOTE_LOCK)) &&
           (ld_relaxed(rbitmap_word(a)) & bitmap_bit(a));
}
sl_inline bool slab_owned_by(struct slab *s, struct heap *h)
{
    return (atomic_load_explicit(&s->owner, memory_order_relaxed) & ~(uintptr_t)1) == (uintptr_t)h;
}

/* Lay a fresh slab of cache id over a page run; nothing carved yet, no
 * owner (slab_set_owner gives it one). */
void slab_init(struct slab *s, unsigned id);
/* Make owner_word the slab's owner (0: none) and tag every page of it with
 * tag | its place in the slab << TAG_PAGE_SHIFT (block.h's page tags; tag 0 for no owner
 * and for user caches: then the pages' tags are 0). Every change of a
 * slab's owner goes through here, so that the tags never name a slab that
 * is gone. */
void slab_set_owner(struct slab *s, uintptr_t owner_word, uint32_t tag);
/* Carve up to a page of never-used objects onto the free list, running the
 * cache's constructor on each; false if none left. */
bool slab_carve(struct slab *s);
/* Link the unlinked objects onto the free list (the owner, its free list
 * empty). False if there were none. */
bool slab_relink(struct slab *s);
/* Where a collect may put objects instead of unlinking them: the owner's
 * magazine of the slab's class (slab/heap.h), a stack growing down from
 * top to above mark. Each object pushed keeps its live bit, and its second
 * word: the mark its freer wrote, which is the magazine's cookie. */
struct mag_fill {
    void **top, **mark;
};
/* Take the remote frees: each marked word's bits are checked against the
 * live bitmap less the objects in mag (the owner's magazine of s's class
 * from the top, NULL-ended, or NULL: those are live there but free, so a
 * remote free of one is a double free), and, with a nonzero mark (malloc
 * classes: heap_cookie), each object's second word against the mark its
 * freer wrote; the objects go to fill while it has room (fill may be
 * NULL), the rest have their bits cleared and become unlinked. Returns the
 * number taken. */
unsigned slab_collect(struct slab *s, void **mag, struct slab **held, uint64_t mark, struct mag_fill *fill);
/* Take every remote-free bit of the slab's range, whatever the summary
 * says (a slab being discarded, under a lock fork takes); returns how many. */
unsigned slab_remote_take_all(struct slab *s);
/* Take every object of s at once if other threads freed them all (each
 * has its remote-free bit, on a live object carrying mark: as
 * slab_collect checks; anything else is left for the owner's collect to
 * report): the bits are cleared and true returned; s is then empty and
 * nobody's to free into, for its taker to release. For a slab off every
 * list of its owner (on its notify stack), under a lock that fork takes. */
bool slab_take_freed(struct slab *s, uint64_t mark);
/* Remote free (another thread's slab; p validated): one bit and the
 * summary under the remote lock (held: see remote_lock); returns true if
 * the slab was FULL and the caller must notify its owner. */
bool slab_free_remote(struct slab *s, void *p, struct slab **held);
/* In a fork child: s's remote lock was held by a thread that fork left
 * behind (its heap's remote_held). Free it, with every group marked (the
 * thread may have set some bits); true if the FULL bit was set, which the
 * holder would have cleared: the caller tells the owner (heap_wake). */
bool slab_remote_unstick(struct slab *s);
/* Make the counts of a slab whose owner may have stopped mid-operation (a
 * thread that did not survive fork) agree again: objects on the free list
 * are not live, carved objects neither live nor free go on the free list
 * (the unlinked ones among them; those of a carve whose constructor calls
 * had not all run go back to the uncarved tail: they may be unconstructed),
 * and used == carved - |free|. A free list that leaves the slab is cut. */
void slab_repair(struct slab *s);
/* Is p the start of an object of this slab (for error messages)? */
bool slab_is_object_start(struct slab *s, const void *p);

#endif
