/* remote_batch.c — frees of objects of other heaps' malloc slabs, batched
 * per thread and pushed as remote records (slab.h).
 *
 * The free fast path reads only the page tag of a remote object (heap.h);
 * the object goes into the freeing heap's batch, neither read nor written.
 * A flush takes the batch whole and sorts it by address. A run of objects
 * that share a bitmap word (so one page, so one slab) is validated against
 * that word, loaded once: each object must be aligned, live, and not
 * already in the run (an object twice in the batch is twice in one run).
 * The run becomes one record, written into one of its objects (its mask of
 * live bits); a slab's records, side by side after the sort, are chained
 * and pushed with one compare-and-swap. A double free across batches is
 * caught where it always was: the owner clears each record's bits as it
 * collects, and finds a second copy's bit clear. So a remote free reads
 * the bitmap line the owner writes on every allocation once per run
 * instead of once per free, writes one object per run, and swaps the
 * remote head once per slab.
 *
 * Invariants: the batch holds objects of malloc slabs the heap did not own
 * when they were added, each still live (bit set) and counted as used in
 * its slab, so no slab with a batched object is released. A slot is
 * written before the count is raised, and the count is zeroed before
 * anything of a flush is pushed: a thread that fork leaves behind
 * mid-flush loses that batch (a bounded leak) and never pushes an object
 * twice; the child flushes the batches of the heaps fork orphaned
 * (heaps.c). A bad pointer is reported when its batch is flushed, before
 * anything is written for it.
 */
#include <stdatomic.h>

#include "heap.h"

void remote_push_tagged(struct heap *h, void *first, void *last, uint32_t t, unsigned n)
{
    uintptr_t head = tag_slab_head(first, t);
    stat_add(h->stats, STAT_free_remote, n);
    if (remote_push(page_rhead(head), first, (void **)last)) {
        struct slab *s = slab_of_page(page_of((void *)head));
        heap_wake(atomic_load_explicit(&s->owner, memory_order_relaxed), s);
    }
}

/* Validate ps[0, k) (objects in one bitmap word, in address order) and
 * make them one record, written into ps[k - 1]; its page tag in *t. NULL
 * if the slab changed hands since they were batched (orphaned, or adopted
 * by h): then they were freed one by one. */
static void *make_record(struct heap *h, const uintptr_t *ps, unsigned k, uint32_t *t)
{
    uintptr_t rec = ps[k - 1];
    *t = ld_relaxed(page_tag(rec));
    if (!*t || tag_relative(h, *t) < TAG_MINE_LIMIT) {
        for (unsigned i = k; i--;)
            heap_free_block_now((void *)ps[i]);
        return NULL;
    }
    uint64_t live = ld_relaxed(bitmap_word(rec)), mask = 0;
    for (unsigned i = k; i--;) {
        uintptr_t q = ps[i];
        uint64_t bit = bitmap_bit(q);
        if (unlikely((q & (SL_GRAIN - 1)) || !(live & bit) || (mask & bit)))
            heap_bad_free((void *)q, (uintptr_t)block_of((void *)q) | PM_BLOCK, "free");
        mask |= bit;
    }
    *record_mask_word((void *)rec) = mask;
    return (void *)rec;
}

void remote_batch_flush(struct heap *h)
{
    uintptr_t v[RBATCH_CAP];
    unsigned n = h->rbatch_n;
    /* taken whole before anything is pushed (see the top), and sorted: by
     * class (a counting sort; a slab's objects are all of one class), then
     * by address within a class (an insertion sort: a class's objects come
     * mostly in allocation order, ascending or, off a relinked free list,
     * descending, so a group that ends lower than it starts is reversed
     * first), so the objects of a bitmap word, and the words of a slab,
     * side by side */
    unsigned at[SL_NCLASSES + 1] = { 0 };
    for (unsigned i = 0; i < n; i++)
        at[h->rbatch_cls[i] + 1]++;
    for (unsigned c = 1; c <= SL_NCLASSES; c++)
        at[c] += at[c - 1];
    for (unsigned i = 0; i < n; i++)
        v[at[h->rbatch_cls[i]]++] = (uintptr_t)h->rbatch[i];
    for (unsigned c = 0, from = 0; c < SL_NCLASSES; from = at[c++]) {
        if (at[c] - from > 1 && v[from] > v[at[c] - 1])
            for (unsigned i = from, j = at[c] - 1; i < j; i++, j--) {
                uintptr_t x = v[i];
                v[i] = v[j];
                v[j] = x;
            }
        for (unsigned i = from + 1; i < at[c]; i++) {
            uintptr_t x = v[i];
            unsigned j = i;
            for (; j > from && v[j - 1] > x; j--)
                v[j] = v[j - 1];
            v[j] = x;
        }
    }
    h->rbatch_n = 0;
    h->rbatch_bytes = 0;
    atomic_signal_fence(memory_order_seq_cst);
    /* each word's objects are one record; a slab's records one chain */
    uintptr_t first = 0, last = 0;
    uint32_t first_tag = 0;
    unsigned count = 0;
    for (unsigned i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && v[j] >> 10 == v[i] >> 10; j++)
            ;
        uint32_t t;
        uintptr_t rec = (uintptr_t)make_record(h, &v[i], j - i, &t);
        if (rec && first && tag_slab_head((void *)rec, t) == tag_slab_head((void *)first, first_tag)) {
            *(uintptr_t *)last = rec; /* malloc slabs: the link is word 0 */
            last = rec;
            count += j - i;
        } else if (rec) {
            if (first)
                remote_push_tagged(h, (void *)first, (void *)last, first_tag, count);
            first = last = rec;
            first_tag = t;
            count = j - i;
        }
    }
    if (first)
        remote_push_tagged(h, (void *)first, (void *)last, first_tag, count);
}

void remote_batch_add(struct heap *h, void *p, uint32_t t)
{
    unsigned n = h->rbatch_n, cls = t & ((1u << TAG_PAGE_SHIFT) - 1);
    h->rbatch[n] = p;
    h->rbatch_cls[n] = (uint8_t)cls;
    atomic_signal_fence(memory_order_seq_cst); /* the slot before the count (see the top) */
    h->rbatch_n = n + 1;
    h->rbatch_bytes += class_size[cls];
    if (n + 1 == RBATCH_CAP || h->rbatch_bytes >= RBATCH_BYTES)
        remote_batch_flush(h);
}
