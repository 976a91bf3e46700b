/* heap_lists.h — internal to the slab layer (heap.c, heaps.c): the slab
 * lists of a heap and the operations both files need. Callers own the heap
 * (its thread, or heaps_lock for an orphan or a cache-wide operation).
 */
#ifndef SL_HEAP_LISTS_H
#define SL_HEAP_LISTS_H

#include "heap.h"

void slab_list_push(struct slab **head, struct slab *s);
void slab_list_unlink(struct slab **head, struct slab *s);
void slab_release(struct heap *h, struct slab *s, struct page_cache *pc);
void take_notified(struct heap *h, unsigned cls);
/* Push s onto h's notify stack; true if it was empty. */
bool heap_notify_push(struct heap *h, struct slab *s);
void take_woken(struct heap *h, unsigned id);
/* heap.c: lay out h's idle magazine of class cls, empty, at its depth. */
void mag_layout(struct heap *h, unsigned cls);
/* heaps.c: the list of every heap (all_next), for heap_check.c, under
 * heaps_lock. */
void heaps_lock_for_check(void);
void heaps_unlock_for_check(void);
struct heap *heaps_all(void);
bool heaps_forked(void); /* this process was forked while other threads had heaps */
extern unsigned heap_ids_hi; /* heaps.c: above every cache id opened so far (heaps_lock) */
/* heaps.c: adopt partial slabs of id from orphaned heaps; false if none. */
bool orphan_adopt(struct heap *h, unsigned id);

/* Make h the owner of slab s (NULL: no owner), page tags included. */
sl_inline void slab_own(struct slab *s, struct heap *h)
{
    if (!h)
        return slab_set_owner(s, 0, 0);
    slab_set_owner(s, slab_owner_word(h, s->cls), s->cls < SL_NCLASSES ? heap_page_tag(h, s->cls) : 0);
}

sl_inline void partial_push(struct heap *h, struct slab *s)
{
    s->state = SLAB_PARTIAL;
    slab_list_push(heap_partial(h, s->cls), s);
}

#endif
