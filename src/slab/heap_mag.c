/* heap_mag.c — a heap's magazines leaving them other than by malloc:
 * the flush (thread exit, sl_purge, a bulk free of the class, a boost)
 * and the trim (mag_trim.h's policy, 4 times a decay tick from the
 * owner's slow paths). The owner does both (or heaps_lock's holder for an
 * orphan); the objects go back to their slabs with their live bits
 * cleared and their cookie kept, counted in mag_adj (heap.h) so that
 * pushes = pops + adj + count stays true. The magazine layout and the
 * inline pops and pushes are heap_mag.h's.
 */
#include "heap_free.h"

#include "heap_lists.h"

/* The objects of magazine cls's slots [top, stop), taken off it already
 * (its top moved past them), go back to their slabs; they left it other
 * than by malloc (mag_adj, heap.h). */
void heap_mag_to_slabs(struct heap *h, unsigned cls, void **top, void **stop)
{
    count_add(&h->mag_adj[cls], (uint64_t)(stop - top));
    for (; top < stop; top++) {
        void *p = *top; /* keeps the cookie: free, on its slab (free_state.c) */
        bitmap_clear_owner((uintptr_t)p);
        slab_push_owned(h, slab_of_page(page_head(page_of(p))), p, (void **)p);
    }
}

void heap_mag_flush_class(struct heap *h, unsigned cls)
{
    void **top = h->mag_top[cls];
    mag_set(h, cls, MAG_IDLE);
    h->mags_held[cls / 64] &= ~((uint64_t)1 << (cls % 64));
    if (top != MAG_IDLE)
        heap_mag_to_slabs(h, cls, top, mag_end(h, cls));
}

/* Give back the k objects at the bottom of h's magazine of class cls (0 <
 * k <= its count): those there longest. The rest move down to its end, in
 * their order, and the top follows them; while they move, a reader
 * (free_state_find) may find an object in two slots, or one given back
 * still in its slot: free either way. */
static void mag_trim_class(struct heap *h, unsigned cls, unsigned k)
{
    void **top = h->mag_top[cls], **end = mag_end(h, cls);
    if (top + k == end)
        return heap_mag_flush_class(h, cls); /* idle now: its next layout is at its class's depth */
    heap_mag_to_slabs(h, cls, end - k, end);
    for (void **from = end - k, **to = end; from > top;) {
        --from;
        __atomic_store_n(--to, *from, __ATOMIC_RELAXED);
    }
    mag_set(h, cls, top + k);
}

/* out of magazine cls so far, for mag_trim.h */
static uint64_t mag_out(struct heap *h, unsigned cls)
{
    uint64_t pops, slab;
    heap_pops(h, cls, &pops, &slab);
    return pops + ld_relaxed(&h->mag_adj[cls]);
}

void heap_mag_look(struct heap *h, uint64_t now)
{
    h->look_ms = now;
    for (unsigned w = 0; w < sizeof h->mags_held / sizeof h->mags_held[0]; w++)
        for (uint64_t held = h->mags_held[w]; held; held &= held - 1) {
            unsigned cls = w * 64 + (unsigned)__builtin_ctzll(held);
            mag_trim_look(&h->trim_seen[cls], mag_count(h, cls), mag_out(h, cls));
        }
}

void heap_mag_trim(struct heap *h, uint64_t now)
{
    h->look_ms = h->trim_ms = now;
    for (unsigned w = 0; w < sizeof h->mags_held / sizeof h->mags_held[0]; w++)
        for (uint64_t held = h->mags_held[w]; held; held &= held - 1) {
            unsigned cls = w * 64 + (unsigned)__builtin_ctzll(held);
            uint32_t take = mag_trim_take(&h->trim_seen[cls], mag_count(h, cls), mag_out(h, cls));
            if (take) {
                mag_trim_class(h, cls, take);
                stat_add(h->stats, STAT_mag_trim_objects, take);
            }
        }
    stat_add(h->stats, STAT_mag_trim_passes, 1);
}

/* Only the magazines laid out (mags_held): a thread's exit visits the
 * classes it freed, not all SL_NCLASSES. */
void heap_mag_flush(struct heap *h)
{
    for (unsigned w = 0; w < sizeof h->mags_held / sizeof h->mags_held[0]; w++)
        while (h->mags_held[w])
            heap_mag_flush_class(h, w * 64 + (unsigned)__builtin_ctzll(h->mags_held[w]));
}
