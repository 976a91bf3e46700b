/* heap_ids.h — a thread heap's slots by cache id (heap_ids.c): the malloc
 * classes' in the heap itself, the user caches' (sl_cache_create) in the
 * heap's struct heap_ids, valid while their key matches the cache's;
 * opening, shrinking and closing a user cache id in every heap. */
#ifndef SL_HEAP_IDS_H
#define SL_HEAP_IDS_H

#include "heap.h"

/* User cache ids (sl_cache_create): open one for geometry g (NULL if all
 * are in use); shrink this thread's and orphaned heaps' empty slabs of it
 * (bytes released); close it, releasing every slab of it in every heap
 * (live objects released go to *live). */
int heap_id_open(const struct slab_geom *g);
size_t heap_id_shrink(unsigned id);
size_t heap_id_close(unsigned id, uint64_t *live);
/* The slots of cache id in heap h (a malloc class or a user cache). */
sl_inline struct heap_ids *heap_ids(struct heap *h) { return atomic_load_explicit(&h->ids, memory_order_relaxed); }
sl_inline struct slab **heap_cur(struct heap *h, unsigned id)
{
    return id < SL_NCLASSES ? &h->cur[id] : &heap_ids(h)->cur[id - SL_NCLASSES];
}
sl_inline struct slab **heap_partial(struct heap *h, unsigned id)
{
    return id < SL_NCLASSES ? &h->partial[id] : &heap_ids(h)->partial[id - SL_NCLASSES];
}
sl_inline struct slab **heap_full(struct heap *h, unsigned id) { return &heap_ids(h)->full[id - SL_NCLASSES]; }
sl_inline uint32_t heap_key(struct heap *h, unsigned id) { return heap_ids(h)->key[id - SL_NCLASSES]; }

/* Make this thread's slots for user id belong to the cache with key; false
 * (ENOMEM) if its slots for user caches could not be made. */
bool heap_id_sync_slow(struct heap *h, unsigned id, uint32_t key);
sl_inline bool heap_id_sync(struct heap *h, unsigned id, uint32_t key)
{
    return likely(heap_key(h, id) == key) || heap_id_sync_slow(h, id, key);
}

#endif
