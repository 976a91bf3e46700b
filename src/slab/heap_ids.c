/* heap_ids.c — the user cache ids (slab/heap.h: SL_NCLASSES up to
 * SL_NIDS): a cache's id and geometry handed out (heap_id_open), its empty
 * slabs given back from this thread's heap and the orphans' (heap_id_shrink),
 * and every slab of it freed from every heap at its close (heap_id_close).
 * slab_geom of user ids, and every heap's slots of one while a cache-wide
 * operation runs, are under heaps_lock (heaps.c). A closed id's slots are
 * reset by their owner before any use (heap_id_sync): its key no longer
 * matches.
 */
#include "heap_lists.h"

static uint32_t key_seq = 1; /* last key handed out; 1 is the malloc classes' */
unsigned heap_ids_hi = SL_NCLASSES; /* above every id opened so far (heaps_lock) */

int heap_id_open(const struct slab_geom *g)
{
    int id = -1;
    heaps_lock_for_check();
    for (unsigned i = SL_NCLASSES; i < SL_NIDS; i++)
        if (!slab_geom[i].key) {
            slab_geom[i] = *g;
            if (++key_seq == 0)
                key_seq = 2;
            slab_geom[i].key = key_seq;
            id = (int)i;
            if (i >= heap_ids_hi)
                heap_ids_hi = i + 1;
            break;
        }
    heaps_unlock_for_check();
    return id;
}

size_t heap_id_shrink(unsigned id)
{
    size_t released = 0;
    heaps_lock_for_freeing();
    struct heap *h = tls_heap;
    if (h != &heap_empty && heap_id_live(h, id)) {
        heap_reclaim_id(h, id, false, &h->room->pcache, &released);
        page_cache_drain(&h->room->pcache);
    }
    for (struct heap *o = heaps_orphans(); o; o = o->orphan_next)
        if (heap_id_live(o, id))
            heap_reclaim_id(o, id, false, NULL, &released);
    heaps_unlock_for_check();
    return released;
}

/* Free a slab of a closing cache whatever it holds: its live objects'
 * bits are cleared, so any later use of them is a reported bad free. */
static void slab_discard(struct slab *s, uint64_t *live)
{
    unsigned pending = slab_remote_take_all(s); /* freed by other threads, not taken */
    *live += (uint64_t)(s->used - pending);
    uint8_t *base = slab_base(s);
    size_t bytes = (size_t)slab_geom[s->cls].pages << SL_PAGE_SHIFT;
    for (size_t off = 0; off < bytes; off += 64 * SL_GRAIN)
        st_relaxed(bitmap_word((uintptr_t)base + off), 0);
    slab_own(s, NULL);
    s->state = 0;
    page_free(NULL, base);
}

static void discard_list(struct slab *s, uint64_t *live, size_t *n)
{
    while (s) {
        struct slab *next = s->next;
        slab_discard(s, live);
        ++*n;
        s = next;
    }
}

size_t heap_id_close(unsigned id, uint64_t *live)
{
    size_t n = 0;
    *live = 0;
    heaps_lock_for_freeing();
    uint32_t key = slab_geom[id].key;
    for (struct heap *h = heaps_all(); h; h = h->all_next) {
        if (heap_key(h, id) != key)
            continue;
        /* the slots stay as they are: the key no longer matches, so the
         * owner resets them before any use (heap_id_sync) */
        if (*heap_cur(h, id) != &slab_none) {
            slab_discard(*heap_cur(h, id), live);
            n++;
        }
        discard_list(*heap_partial(h, id), live, &n);
        discard_list(*heap_full(h, id), live, &n);
    }
    size_t bytes = n * ((size_t)slab_geom[id].pages << SL_PAGE_SHIFT);
    /* its counts go to the totals, and its slots start again at 0 for the
     * next cache of this id (threads using a cache being destroyed is
     * undefined: no owner writes them now) */
    uint64_t c[STAT_COUNT] = { 0 };
    for (struct heap *h = heaps_all();; h = h->all_next) {
        struct heap *x = h ? h : &heap_empty;
        c[STAT_alloc_small] += ld_relaxed(&x->counts.alloc[id]);
        c[STAT_free_small] += ld_relaxed(&x->counts.free[id]) - ld_relaxed(&x->counts.remote[id]);
        st_relaxed(&x->counts.alloc[id], 0);
        st_relaxed(&x->counts.free[id], 0);
        st_relaxed(&x->counts.remote[id], 0);
        st_relaxed(&x->counts.bulk[id], 0);
        if (!h)
            break;
    }
    stat_add_shared(STAT_alloc_small, c[STAT_alloc_small]);
    stat_add_shared(STAT_free_small, c[STAT_free_small]);
    slab_geom[id].key = 0;
    heaps_unlock_for_check();
    return bytes;
}
