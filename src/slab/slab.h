/* slab.h — a slab: a run of 1-8 pages holding objects of one size class,
 * described in its head page descriptor (the kernel keeps struct slab in
 * struct page the same way).
 *
 * Free objects are chained through their first word. Three lists:
 *   free    owner-private freelist: alloc pops, owner frees push. No atomics.
 *   remote  frees by other threads: a LIFO pushed with one CAS, taken whole
 *           by the owner (atomic exchange) on its slow path.
 *   carve   objects never handed out yet are carved lazily, a page at a
 *           time, so a fresh slab touches only what it uses.
 * Invariant: used == capacity - |free| - |remote| - uncarved objects.
 *
 * States (field state, owner-only):
 *   CURRENT  the heap's allocation slab for its class (heap.cur)
 *   PARTIAL  on the heap's partial list for its class
 *   FULL     on no list; SLAB_FULL_BIT is set in remote. The first remote
 *            free clears the bit and pushes the slab onto the owner heap's
 *            notify stack (through slab.next), so the owner finds it again.
 *   NOTIFY   on no list, a notify push is in flight: the owner freed into a
 *            FULL slab after a remote freer had cleared the bit. It waits
 *            for the notify stack and is never released before.
 * owner is set when the slab is created or adopted and is NULL once the
 * slab is released, so a stale descriptor never matches a heap.
 */
#ifndef SL_SLAB_H
#define SL_SLAB_H

#include "../page/block.h"

struct heap;

enum slab_state { SLAB_CURRENT = 1, SLAB_PARTIAL, SLAB_FULL, SLAB_NOTIFY };
#define SLAB_FULL_BIT ((uintptr_t)1)

struct slab {
    struct page_hdr h;          /* page layer: kind PG_SLAB, npages */
    void *free;                 /* owner */
    _Atomic(struct heap *) owner; /* written by the owner, read by all */
    _Atomic uintptr_t remote;   /* any thread pushes; owner takes */
    struct slab *next, *prev;   /* owner: partial list; FULL: notify stack */
    uint32_t carve;             /* owner: offset of the first uncarved object */
    uint32_t size;              /* object size */
    uint16_t used, capacity;    /* owner */
    uint16_t cls;               /* cache (size class) id */
    uint8_t state;              /* enum slab_state, owner */
};
_Static_assert(sizeof(struct slab) <= sizeof(struct page), "slab fits in its page descriptor");

sl_inline struct slab *slab_of_page(struct page *pg) { return (struct slab *)(void *)pg; }
sl_inline uint8_t *slab_base(struct slab *s) { return page_addr((struct page *)(void *)s); }

/* Lay a fresh slab over a page run; nothing carved yet. */
void slab_init(struct slab *s, struct heap *owner, unsigned cls, uint32_t size, unsigned npages);
/* Carve up to a page of never-used objects onto the free list; false if none left. */
bool slab_carve(struct slab *s);
/* Take the remote list onto the free list, checking each object against the
 * bitmap (a double free shows up here). Returns the number taken. */
unsigned slab_collect(struct slab *s);
/* Remote free (another thread's slab): validate, push with one CAS; returns
 * true if the slab was FULL and the caller must notify its owner. */
bool slab_free_remote(struct slab *s, void *p);
/* Is p the start of an object of this slab (for error messages)? */
bool slab_is_object_start(struct slab *s, const void *p);

#endif
