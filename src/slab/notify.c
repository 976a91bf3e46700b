/* notify.c — the notify stacks' second reader: slabs that other threads'
 * frees emptied whole, taken back from an idle owner by the reclaimer.
 *
 * A FULL slab that gets a remote free goes onto its owner's notify stack
 * of its class (heap.c, heap_wake), and the owner takes the stack on its
 * next refill of that class. An owner that stays on its fast paths, or
 * allocates nothing of that class, never does: redis's
 * main thread, whose lazy-free thread frees a whole database, kept every
 * slab of it resident (262 MiB of 400,000 keys, for as long as it ran).
 * So the reclaimer looks at every heap's stacks once a tick; once the
 * policy (decay.h, decay_owner_idle) finds an owner idle for a class (it
 * has not taken that class's stack for a tick), it takes the stack whole, keeps the slabs whose every object another thread freed
 * (slab_take_freed), and pushes the rest back for the owner. The slabs it
 * keeps go back to the page layer, whose decay then purges them.
 *
 * Why a slab on the notify stack can be taken from under a live owner: it
 * is on none of the owner's lists (FULL: the owner finds it only through
 * the stack, which the exchange took), and an object of it can reach the
 * owner again only as a live object the owner frees; with every object's
 * remote-free bit set, none is live or in the owner's magazine, so the
 * owner has nothing to do with it. A second free of one after it is gone
 * finds its pages' tags cleared: reported as a free of a slab given back
 * (free_state.c). Only the owner writes the state of a slab it pushed
 * back; this file writes nothing into those.
 *
 * Runs under heaps_lock (which fork takes, so no fork sees a stack taken
 * and not given back, and orphans are the lock holder's), and frees the
 * slabs it keeps to the page layer before releasing it (heaps_lock ->
 * page heap lock, as orphan_adopt): a slab with no owner that is neither
 * parked nor free exists only under the lock, where sl_check (which
 * takes it) cannot see one. Fork orphans are left to their adoption
 * (their slabs may need repair first).
 */
#include "heap_lists.h"

static bool waits(struct heap *h, unsigned c)
{
    return atomic_load_explicit(&h->notify[c], memory_order_relaxed) && !h->fork_orphan;
}

bool heaps_notify_waiting(void)
{
    bool waiting = false;
    heaps_lock_for_check();
    for (struct heap *h = heaps_all(); h && !waiting; h = h->all_next)
        for (unsigned c = 0; c < SL_NCLASSES && !waiting; c++)
            waiting = waits(h, c);
    heaps_unlock_for_check();
    return waiting;
}

/* h's owner is judged idle for class c: take that stack, keep the emptied
 * slabs on *out (unowned, linked through next), push the rest back. */
static void take_emptied(struct heap *h, unsigned c, struct slab **out, size_t *pages)
{
    struct slab *s = atomic_exchange_explicit(&h->notify[c], NULL, memory_order_acquire);
    while (s) {
        struct slab *next = s->next;
        if (slab_take_freed(s, h->cookie)) {
            s->state = 0;
            slab_own(s, NULL);
            s->next = *out;
            *out = s;
            *pages += s->h.npages;
        } else {
            heap_notify_push(h, s);
        }
        s = next;
    }
}

size_t heaps_take_emptied(uint64_t now, uint64_t tick_ms)
{
    struct slab *taken = NULL;
    size_t pages = 0, slabs = 0;
    heaps_lock_for_check();
    for (struct heap *h = heaps_all(); h; h = h->all_next)
        for (unsigned c = 0; c < SL_NCLASSES; c++)
            if (decay_owner_idle(&h->notify_watch[c], waits(h, c), ld_relaxed(&h->notify_gen[c]), now, tick_ms))
                take_emptied(h, c, &taken, &pages);
    for (struct slab *s = taken; s; s = s->next)
        slabs++;
    if (slabs) { /* counted before their pages go: whoever sees the pages gone sees the count */
        stat_add_shared(STAT_slab_release, slabs);
        stat_add_shared(STAT_slab_taken_idle, slabs);
    }
    for (struct slab *s = taken, *next; s; s = next) {
        next = s->next;
        s->next = NULL;
        page_free(NULL, slab_base(s));
    }
    heaps_unlock_for_check();
    return pages << SL_PAGE_SHIFT;
}
