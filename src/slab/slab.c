/* slab.c — slab mechanics: init, lazy carving, remote free and collection.
 * Policy (which slab to use, when to release) is in heap.c. */
#include "slab.h"

#include "../base/fatal.h"

void slab_init(struct slab *s, struct heap *owner, unsigned cls, uint32_t size, unsigned npages)
{
    s->free = NULL;
    atomic_store_explicit(&s->remote, 0, memory_order_relaxed);
    s->next = s->prev = NULL;
    s->carve = 0;
    s->size = size;
    s->used = 0;
    s->capacity = (uint16_t)(((size_t)npages << SL_PAGE_SHIFT) / size);
    s->cls = (uint16_t)cls;
    s->state = SLAB_CURRENT;
    atomic_store_explicit(&s->owner, owner, memory_order_release);
}

bool slab_carve(struct slab *s)
{
    uint32_t end = (uint32_t)s->capacity * s->size;
    if (s->carve >= end)
        return false;
    /* every object that starts before the end of the page holding the first
     * uncarved one: at least one, about a page's worth */
    uint32_t stop = (uint32_t)align_up(s->carve + 1, SL_PAGE);
    if (stop > end)
        stop = end;
    uint32_t k = (stop - s->carve + s->size - 1) / s->size;
    uint8_t *first = slab_base(s) + s->carve;
    for (uint32_t i = 0; i + 1 < k; i++)
        *(void **)(first + (size_t)i * s->size) = first + (size_t)(i + 1) * s->size;
    *(void **)(first + (size_t)(k - 1) * s->size) = s->free;
    s->free = first;
    s->carve += k * s->size;
    return true;
}

unsigned slab_collect(struct slab *s)
{
    uintptr_t r = atomic_load_explicit(&s->remote, memory_order_relaxed);
    if (!r || r == SLAB_FULL_BIT)
        return 0;
    r = atomic_exchange_explicit(&s->remote, 0, memory_order_acquire);
    unsigned n = 0;
    void *last = NULL;
    for (void *p = (void *)r; p; p = *(void **)p) {
        if (unlikely(!bitmap_test((uintptr_t)p)))
            sl_fatal("double free of", p, "size class", s->size);
        bitmap_clear_owner((uintptr_t)p);
        last = p;
        n++;
    }
    *(void **)last = s->free;
    s->free = (void *)r;
    s->used = (uint16_t)(s->used - n);
    return n;
}

bool slab_free_remote(struct slab *s, void *p)
{
    uintptr_t old = atomic_load_explicit(&s->remote, memory_order_relaxed);
    do {
        *(void **)p = (void *)(old & ~SLAB_FULL_BIT);
    } while (!atomic_compare_exchange_weak_explicit(&s->remote, &old, (uintptr_t)p, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return old & SLAB_FULL_BIT;
}

bool slab_is_object_start(struct slab *s, const void *p)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)slab_base(s);
    return off < (uintptr_t)s->capacity * s->size && off % s->size == 0;
}
