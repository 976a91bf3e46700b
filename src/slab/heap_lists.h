/* heap_lists.h — internal to the slab layer (heap.c, heaps.c, heap_ids.c, ...): the slab
 * lists of a heap and the operations both files need. Callers own the heap
 * (its thread, or heaps_lock for an orphan or a cache-wide operation).
 */
#ifndef SL_HEAP_LISTS_H
#define SL_HEAP_LISTS_H

#include "heap.h"
#include "heap_ids.h"

void slab_list_push(struct slab **head, struct slab *s);
void slab_list_unlink(struct slab **head, struct slab *s);
void slab_release(struct heap *h, struct slab *s, struct page_cache *pc);
void take_notified(struct heap *h, unsigned cls);
/* Push s onto h's notify stack; true if it was empty. */
bool heap_notify_push(struct heap *h, struct slab *s);
void take_woken(struct heap *h, unsigned id);
/* heap.c: lay out h's idle magazine of class cls, empty, at its depth. */
void mag_layout(struct heap *h, unsigned cls);
/* heaps.c: the list of every heap (all_next) and of the orphans
 * (orphan_next), for heap_check.c, heap_ids.c, notify.c and slabinfo.c,
 * under heaps_lock. */
void heaps_lock_for_check(void);
void heaps_unlock_for_check(void);
struct heap *heaps_all(void);
struct heap *heaps_orphans(void);
bool heaps_forked(void); /* this process was forked while other threads had heaps */
/* heaps.c, for heap_ids.c: heaps_lock for work that may free pages (this
 * thread's heap is made first; released by heaps_unlock_for_check); is
 * h's slot for id live (a malloc class, or an open cache's id); collect
 * h's slabs of id, releasing the empty ones (pages to pc, may be NULL;
 * bytes added to *released, may be NULL), with keep_current false the
 * current slab too. Under heaps_lock. */
void heaps_lock_for_freeing(void);
bool heap_id_live(struct heap *h, unsigned id);
void heap_reclaim_id(struct heap *h, unsigned id, bool keep_current, struct page_cache *pc, size_t *released);
extern unsigned heap_ids_hi; /* heap_ids.c: above every cache id opened so far (heaps_lock) */
/* heaps.c: adopt partial slabs of id from orphaned heaps; false if none. */
bool orphan_adopt(struct heap *h, unsigned id);

/* Make h the owner of slab s (NULL: no owner), page tags included. */
sl_inline void slab_own(struct slab *s, struct heap *h)
{
    if (!h)
        return slab_set_owner(s, 0, 0);
    slab_set_owner(s, slab_owner_word(h, s->cls), s->cls < SL_NCLASSES ? heap_page_tag(h, s->cls) : 0);
}

/* Mark cache id as one h may hold slabs of (heap.h ids_held): before any
 * slab of id enters h's current slot or its lists (kept before by the
 * fence: a fork may stop the thread between the two, and the child
 * reclaims the orphaned heap by its marks). */
sl_inline void heap_hold_id(struct heap *h, unsigned id)
{
    h->ids_held[id / 64] |= (uint64_t)1 << (id % 64);
    atomic_signal_fence(memory_order_seq_cst);
}

sl_inline void partial_push(struct heap *h, struct slab *s)
{
    heap_hold_id(h, s->cls);
    s->state = SLAB_PARTIAL;
    slab_list_push(heap_partial(h, s->cls), s);
}

#endif
