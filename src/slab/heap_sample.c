/* heap_sample.c — a heap's small-malloc counts as sample countdowns
 * (slab/heap.h, struct heap: mag_pops and slab_pops with pops_bias): the
 * rewrite of a bias (pops_rebias, under pops_seq, with its record for a
 * fork child: heap_pops_settle), arming a heap when profiling starts
 * (heap_sample_arm), and the malloc that reaches its class's sample point
 * (heap_alloc_sampled_slow). Everything here is the heap's owner's.
 */
#include "heap_mag.h"

#include "../prof/prof.h"
#include "heap_run.h"

/* Rebias h's count k of class cls (0 mag_pops, 1 slab_pops) so that the
 * add `left` from now makes 0 (left 0: never, the bias cleared), taking
 * `less` mallocs out of what it has counted. The owner; pops_seq odd
 * meanwhile (heap_pops). */
static void pops_rebias(struct heap *h, unsigned k, unsigned cls, uint64_t left, uint64_t less)
{
    _Atomic uint64_t *count = k ? &h->slab_pops[cls] : &h->mag_pops[cls];
    uint64_t real = ld_relaxed(count) - ld_relaxed(&h->pops_bias[k][cls]) - less;
    uint64_t at = left ? -left : real; /* left adds to 0; or the count itself, bias 0 */
    h->pops_next.count = at;
    h->pops_next.bias = at - real;
    h->pops_next.k = k;
    h->pops_next.cls = cls;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint32_t seq = ld_relaxed(&h->pops_seq);
    st_relaxed(&h->pops_seq, seq + 1);
    atomic_store_explicit(count, at, memory_order_release); /* after the odd pops_seq: heap_pops */
    atomic_store_explicit(&h->pops_bias[k][cls], at - real, memory_order_release);
    atomic_store_explicit(&h->pops_seq, seq + 2, memory_order_release);
}

void heap_pops_settle(struct heap *h)
{
    uint32_t seq = ld_relaxed(&h->pops_seq);
    if (!(seq & 1))
        return;
    unsigned k = h->pops_next.k, cls = h->pops_next.cls;
    st_relaxed(k ? &h->slab_pops[cls] : &h->mag_pops[cls], h->pops_next.count);
    st_relaxed(&h->pops_bias[k][cls], h->pops_next.bias);
    st_relaxed(&h->pops_seq, seq + 1);
}

void heap_sample_arm(struct heap *h)
{
    for (unsigned c = 0; c < SL_NCLASSES; c++)
        for (unsigned k = 0; k < 2; k++)
            pops_rebias(h, k, c, 1, 0);
    h->prof_armed = true;
}

void *heap_alloc_sampled_slow(size_t n, unsigned k)
{
    struct heap *h = tls_heap;
    unsigned cls = size_class_small(n);
    uint64_t *armed = &h->sample_armed[k][cls / 64], bit = (uint64_t)1 << (cls % 64), left;
    bool take = prof_class_tick(class_size[cls], !(*armed & bit), &left);
    *armed |= bit;
    /* taken, the malloc is not this count's: a run, or with no page for
     * one the class object, unsampled, as a malloc that may find the
     * magazine drained meanwhile (heap_alloc_run's retry drains) */
    pops_rebias(h, k, cls, left, take);
    if (take) {
        void *p = heap_alloc_run(n, 0, NULL);
        if (!p)
            return heap_alloc_small_quiet(n);
        page_of(p)->run.sampled = true;
        prof_record(p, n, class_size[cls], 0, NULL);
        return p;
    }
    /* the object the count was for, where the malloc found it */
    void *p = h->mag_first[cls];
    if (!k) {
        mag_set(h, cls, h->mag_top[cls] + 1);
    } else {
        struct slab *s = h->cur[cls];
        p = s->free;
        slab_pop_owned(s, p, (void **)p);
    }
    *mag_cookie(p) = 0;
    return p;
}
