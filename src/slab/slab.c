/* slab.c — slab mechanics: init, lazy carving, remote free and collection
 * (the remote-free bitmap: slab.h).
 * Policy (which slab to use, when to release) is in heap.c. */
#include "slab.h"

#include "../base/fatal.h"

/* In .bss (filled at the first heap's creation), not .data: a 20 KiB
 * initialised table would be paged in whole at load. */
struct slab_geom slab_geom[SL_NIDS];

void slab_geom_init(void)
{
    size_class_init();
    for (unsigned c = 0; c < SL_NCLASSES; c++)
        slab_geom[c] = (struct slab_geom){ .size = class_size[c], .pages = class_pages[c], .type = PB_SLAB,
                                           .key = 1 };
}

void slab_init(struct slab *s, unsigned id)
{
    const struct slab_geom *g = &slab_geom[id];
    s->free = NULL;
    atomic_store_explicit(slab_remote(s), 0, memory_order_relaxed);
    s->next = s->prev = NULL;
    s->carved = 0;
    s->link_off = g->link_off;
    s->size = g->size;
    s->used = 0;
    s->unlinked = 0;
    s->capacity = (uint16_t)(((size_t)g->pages << SL_PAGE_SHIFT) / g->size);
    s->cls = (uint16_t)id;
    s->state = SLAB_CURRENT;
}

void slab_set_owner(struct slab *s, uintptr_t owner_word, uint32_t tag)
{
    _Atomic uint32_t *t = page_tag((uintptr_t)slab_base(s));
    for (unsigned i = 0; i < s->h.npages; i++)
        st_relaxed(&t[i], tag ? tag | i << TAG_PAGE_SHIFT : 0);
    atomic_store_explicit(&s->owner, owner_word, memory_order_release);
}

bool slab_carve(struct slab *s)
{
    if (s->carved >= s->capacity)
        return false;
    /* every object that starts before the end of the page holding the first
     * uncarved one: at least one, about a page's worth */
    uint32_t at = (uint32_t)s->carved * s->size;
    uint32_t stop = (uint32_t)align_up(at + 1, SL_PAGE);
    uint32_t k = (stop - at + s->size - 1) / s->size;
    if (k > (uint32_t)(s->capacity - s->carved))
        k = s->capacity - s->carved;
    uint8_t *first = slab_base(s) + at;
    /* claimed before the constructor runs, and s->free read after it, so a
     * constructor that allocates from its own cache carves further on */
    s->carved = (uint16_t)(s->carved + k);
    void (*ctor)(void *) = s->cls >= SL_NCLASSES ? slab_geom[s->cls].ctor : NULL;
    if (ctor)
        for (uint32_t i = 0; i < k; i++)
            ctor(first + (size_t)i * s->size);
    for (uint32_t i = 0; i + 1 < k; i++)
        *slab_link(s, first + (size_t)i * s->size) = first + (size_t)(i + 1) * s->size;
    *slab_link(s, first + (size_t)(k - 1) * s->size) = s->free;
    s->free = first;
    return true;
}

bool slab_relink(struct slab *s)
{
    if (!s->unlinked)
        return false;
    uintptr_t base = (uintptr_t)slab_base(s), end = base + (uintptr_t)s->carved * s->size;
    void *head = s->free; /* each object is pushed: the list ends up in descending address order */
    uintptr_t link_off = s->link_off;
    unsigned n = 0, grains = s->size >> SL_GRAIN_SHIFT;
    /* the object starts in a bitmap word (slabs are page aligned, so words
     * start with the slab): the same in every word when the size in
     * grains divides 64, else built object by object */
    uint64_t every = grains < 64 && !(64 % grains) ? ~(uint64_t)0 / (((uint64_t)1 << grains) - 1) : 0;
    uintptr_t next = base; /* the next object start, when built */
    for (uintptr_t w = base; w < end && n < s->unlinked; w += 64 * SL_GRAIN) { /* until all are found */
        uint64_t starts = every;
        if (!every)
            for (; next < end && next < w + 64 * SL_GRAIN; next += s->size)
                starts |= bitmap_bit(next);
        else if (end - w < 64 * SL_GRAIN) /* the word holding the carved end */
            starts &= ((uint64_t)1 << ((end - w) >> SL_GRAIN_SHIFT)) - 1;
        for (uint64_t f = starts & ~ld_relaxed(bitmap_word(w)); f; f &= f - 1) {
            uintptr_t p = w + ((uintptr_t)__builtin_ctzll(f) << SL_GRAIN_SHIFT);
            *(void **)(p + link_off) = head;
            head = (void *)p;
            n++;
        }
    }
    if (n != s->unlinked)
        sl_fatal("heap corruption: a slab's free objects are miscounted at", (void *)base, "found", n);
    s->free = head;
    s->unlinked = 0;
    return true;
}

/* Remote-free bits of the word at w that are not live: a double free (freed
 * by another thread and by the owner, or by two threads, one after the
 * owner took the other's bit), or a pointer that is no object start. */
static sl_noinline _Noreturn void collect_bad(struct slab *s, uintptr_t w, uint64_t bad)
{
    void *p = (void *)(w + ((uintptr_t)__builtin_ctzll(bad) << SL_GRAIN_SHIFT));
    if (slab_is_object_start(s, p))
        sl_fatal("double free of", p, "size class", s->size);
    sl_fatal("free of an interior pointer", p, "size class", s->size);
}

/* Move word w's remote-free bits out of the live bitmap; how many. The
 * magazine's objects are live there but free: masked out of the check. */
static unsigned collect_word(struct slab *s, uintptr_t w, void **mag)
{
    _Atomic uint64_t *rw = rbitmap_word(w);
    if (!ld_relaxed(rw))
        return 0;
    uint64_t m = atomic_exchange_explicit(rw, 0, memory_order_acquire); /* the freeing threads were done with the objects */
    _Atomic uint64_t *bw = bitmap_word(w);
    uint64_t v = ld_relaxed(bw), live = v;
    for (; mag && *mag; mag++)
        if ((uintptr_t)*mag >> 10 == w >> 10)
            live &= ~bitmap_bit((uintptr_t)*mag);
    if (unlikely(m & ~live))
        collect_bad(s, w, m & ~live);
    st_relaxed(bw, v & ~m);
    return (unsigned)popcount64(m);
}

unsigned slab_collect(struct slab *s, void **mag)
{
    _Atomic uint32_t *rh = slab_remote(s);
    uint32_t sum = atomic_load_explicit(rh, memory_order_relaxed);
    if (!(sum & ~SLAB_FULL_BIT))
        return 0;
    sum = atomic_exchange_explicit(rh, 0, memory_order_acquire) >> 1;
    uintptr_t base = (uintptr_t)slab_base(s), end = base + ((uintptr_t)s->h.npages << SL_PAGE_SHIFT);
    unsigned sh = remote_sum_shift(s->h.npages), n = 0;
    for (; sum; sum &= sum - 1) {
        uintptr_t w = base + ((uintptr_t)__builtin_ctz(sum) << sh << 10);
        for (unsigned k = 0; k < 1u << sh && w < end; k++, w += 64 * SL_GRAIN)
            n += collect_word(s, w, mag);
    }
    s->unlinked = (uint16_t)(s->unlinked + n);
    s->used = (uint16_t)(s->used - n);
    return n;
}

unsigned slab_remote_take_all(struct slab *s)
{
    uintptr_t base = (uintptr_t)slab_base(s), end = base + ((uintptr_t)s->h.npages << SL_PAGE_SHIFT);
    unsigned n = 0;
    atomic_store_explicit(slab_remote(s), 0, memory_order_relaxed);
    for (uintptr_t w = base; w < end; w += 64 * SL_GRAIN)
        if (ld_relaxed(rbitmap_word(w)))
            n += (unsigned)popcount64(atomic_exchange_explicit(rbitmap_word(w), 0, memory_order_relaxed));
    return n;
}

bool slab_free_remote(struct slab *s, void *p)
{
    uintptr_t q = (uintptr_t)p, base = (uintptr_t)slab_base(s);
    if (remote_set(q, bitmap_bit(q)))
        sl_fatal("double free of", p, "size class", s->size);
    return remote_mark(slab_remote(s), remote_sum_bit(base, q, remote_sum_shift(s->h.npages)));
}

void slab_repair(struct slab *s)
{
    uint64_t on_free[(UINT16_MAX + 1) / 64] = { 0 }; /* object index (capacity is 16-bit) -> on the free list */
    uint8_t *base = slab_base(s);
    unsigned nfree = 0;
    for (void **link = &s->free; *link; link = slab_link(s, *link)) {
        uintptr_t off = (uintptr_t)*link - (uintptr_t)base;
        unsigned i = (unsigned)(off / s->size);
        if (off >= (uintptr_t)s->carved * s->size || off % s->size || (on_free[i / 64] >> (i % 64) & 1)) {
            *link = NULL; /* a half-written link: the rest is found again below */
            break;
        }
        on_free[i / 64] |= (uint64_t)1 << (i % 64);
        bitmap_clear_owner((uintptr_t)*link);
        nfree++;
    }
    for (unsigned i = 0; i < s->carved; i++) {
        uint8_t *p = base + (size_t)i * s->size;
        if ((on_free[i / 64] >> (i % 64) & 1) || bitmap_test((uintptr_t)p))
            continue;
        *slab_link(s, p) = s->free; /* neither live nor free: lost mid-operation */
        s->free = p;
        nfree++;
    }
    s->used = (uint16_t)(s->carved - nfree);
    s->unlinked = 0;
}

bool slab_is_object_start(struct slab *s, const void *p)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)slab_base(s);
    return off < (uintptr_t)s->capacity * s->size && off % s->size == 0;
}
