/* remote_batch.c — frees of objects of other heaps' malloc slabs, batched
 * per thread and handed to their owners through the remote-free bitmap
 * (slab.h).
 *
 * The free fast path reads only the page tag of a remote object (heap.h);
 * the slow path checks that it is an object start, writes the remote-free
 * mark into its second word (heap.h) and puts it in the freeing heap's
 * batch.
 * A flush takes the batch whole and groups it by size class. A run of
 * objects side by side that share a bitmap word (so one page, so one slab)
 * becomes one mask, each object checked on the way (not twice in the run;
 * that it is an object start was checked at its free, before its mark was
 * written), and is set in the remote-free bitmap with a plain load and
 * store under the slab's remote lock: a bit already set there is a double
 * free (freed twice in the batch, or by another batch not yet taken),
 * reported at once. A run of words of one slab takes the lock once, and
 * its release marks the summary: one atomic per slab. The
 * owner's live bitmap is not read here: the owner checks each bit it takes
 * against it (a bit not live is a double free, or a pointer that is no
 * object), so the live bitmap's line does not move to the freeing thread.
 *
 * Invariants: the batch holds objects of malloc slabs the heap did not own
 * when they were added, each counted as used in its slab until its owner
 * takes its bit, so no slab with a batched object is released. A slot is
 * written before the count is raised, and the count is zeroed before
 * anything of a flush is set: a thread that fork leaves behind mid-flush
 * loses that batch (a bounded leak) and never frees an object twice; the
 * child flushes the batches of the heaps fork orphaned (heaps.c).
 */
#include <stdatomic.h>
#include <string.h>

#include "../base/drain.h"
#include "../base/fatal.h"
#include "heap_free.h"

/* Release slab s's remote lock (old: the summary it had), marking the
 * groups sum, for n objects whose remote-free bits are set; wake the owner
 * if it was FULL. */
static bool unlock_slab(struct heap *h, struct slab *s, uint32_t old, uint32_t sum, unsigned n)
{
    stat_add(h->stats, STAT_free_remote, n); /* pushed to the owner (the per-cache counts had them at their free) */
    return remote_unlock_marked(s, &h->remote_held, old, sum) &&
           heap_wake(atomic_load_explicit(&s->owner, memory_order_relaxed), s);
}

/* v[0, n): h's batch, grouped by class (a counting sort, stable; a slab's
 * objects are all of one class), so that a class's objects, which come in
 * allocation order, make runs of one bitmap word and one slab. Not sorted
 * by address: a merge sort cost more than the atomic ORs it saved
 * (xmalloc-test 1.47 against 1.12 without it; crossfree 0.094 against
 * 0.090 s). A batch of one class (rbatch_mixed clear: most of them) is
 * copied as it is; otherwise only the classes from the batch's lowest to
 * its highest are counted. */
static void batch_group(const struct heap *h, uintptr_t *v, unsigned n)
{
    if (!h->rbatch_mixed) {
        memcpy(v, h->rbatch, n * sizeof v[0]);
        return;
    }
    unsigned at[SL_NCLASSES + 1], lo = SL_NCLASSES, hi = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned c = h->rbatch_cls[i];
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    memset(&at[lo], 0, (hi - lo + 2) * sizeof at[0]);
    for (unsigned i = 0; i < n; i++)
        at[h->rbatch_cls[i] + 1]++;
    for (unsigned c = lo + 1; c <= hi; c++)
        at[c] += at[c - 1];
    for (unsigned i = 0; i < n; i++)
        v[at[h->rbatch_cls[i]]++] = (uintptr_t)h->rbatch[i];
}

void remote_batch_flush(struct heap *h)
{
    uintptr_t v[RBATCH_CAP];
    unsigned n = h->rbatch_n;
    if (!n) /* a thread's exit, a drain: mostly nothing batched */
        return;
    /* taken whole before anything is pushed (see the top) */
    batch_group(h, v, n);
    __atomic_store_n(&h->rbatch_n, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h->rbatch_bytes, 0, __ATOMIC_RELAXED); /* mallinfo reads it */
    h->rbatch_mixed = 0;
    atomic_signal_fence(memory_order_seq_cst);
    /* a run of one slab's words under one hold of its remote lock */
    struct slab *locked = NULL;
    uint32_t old = 0, sum = 0;
    unsigned count = 0;
    bool tell = false; /* an owner had no slab waiting: the reclaimer looks (notify.c) */
    for (unsigned i = 0, j; i < n; i = j) {
        /* the run: objects side by side that share a bitmap word (each
         * an object start: checked at its free, heap_free.c), its bits
         * gathered as it is found; an object twice in it is a double free */
        uint64_t mask = bitmap_bit(v[i]);
        for (j = i + 1; j < n && v[j] >> 10 == v[i] >> 10; j++) {
            uint64_t bit = bitmap_bit(v[j]);
            if (unlikely(mask & bit))
                heap_bad_free((void *)v[j], (uintptr_t)block_of((void *)v[j]) | PM_BLOCK, "free");
            mask |= bit;
        }
        uint32_t t = ld_relaxed(page_tag(v[i]));
        if (!t || tag_relative(h, t) < TAG_MINE_LIMIT) {
            /* the slab changed hands since they were batched (orphaned,
             * or adopted by h): freed one by one, no remote lock held */
            if (locked)
                tell |= unlock_slab(h, locked, old, sum, count);
            locked = NULL;
            for (unsigned k = j; k-- > i;) {
                *mag_cookie((void *)v[k]) = 0; /* this thread's mark: freed anew below */
                unsigned id = slab_of_page(page_head(page_of((void *)v[k])))->cls;
                count_add(&h->counts.free[id], -(uint64_t)1); /* counted anew below, as what it is now */
                count_add(&h->counts.remote[id], -(uint64_t)1);
                heap_free_block_now((void *)v[k]);
            }
            continue;
        }
        unsigned cls = t & ((1u << TAG_PAGE_SHIFT) - 1);
        uintptr_t hd = tag_slab_head((void *)v[i], t);
        struct slab *s = slab_of_page(page_of((void *)hd));
        if (s != locked) {
            if (locked)
                tell |= unlock_slab(h, locked, old, sum, count);
            locked = s;
            old = remote_lock(s, &h->remote_held);
            sum = 0;
            count = 0;
        }
        remote_set(v[i], mask, class_size[cls]);
        sum |= remote_sum_bit(hd, v[i], remote_sum_shift(class_pages[cls]));
        count += j - i;
    }
    if (locked)
        tell |= unlock_slab(h, locked, old, sum, count);
    if (tell && !h->fork_orphan) /* not from fork's child handler */
        page_wake_reclaimer();
}

/* The reclaim registry's entry (base/drain.h): this thread's batch goes to
 * the owners now; other threads' go at their next flush (their own). */
static void drain_remote_batches(enum drain_depth depth, size_t want)
{
    (void)depth, (void)want;
    if (tls_heap != &heap_empty)
        remote_batch_flush(tls_heap);
}
static size_t batch_bytes(struct heap *h) { return __atomic_load_n(&h->rbatch_bytes, __ATOMIC_RELAXED); }
static size_t remote_batches_held(void) { return heaps_sum(batch_bytes); }
DRAIN_REGISTER(remote_batches_drain, .name = "remote_batches", .order = DRAIN_REMOTE_BATCHES,
               .depths = DRAIN_ALL_DEPTHS, .run = drain_remote_batches, .held = remote_batches_held);
