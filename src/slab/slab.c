/* slab.c — slab mechanics: init, lazy carving, remote free and collection
 * (the remote-free bitmap: slab.h).
 * Policy (which slab to use, when to release) is in heap.c. */
#include "slab.h"

#include "../base/fatal.h"
#include "../os/os.h"
#include "../page/antifrag.h"

/* In .bss (filled at the first heap's creation), not .data: a 20 KiB
 * initialised table would be paged in whole at load. */
struct slab_geom slab_geom[SL_NIDS];

void slab_geom_init(void)
{
    size_class_init();
    for (unsigned c = 0; c < SL_NCLASSES; c++) {
        unsigned objects = (unsigned)(((size_t)class_pages[c] << SL_PAGE_SHIFT) / class_size[c]);
        slab_geom[c] = (struct slab_geom){ .size = class_size[c], .pages = class_pages[c],
                                           .type = af_slab_type(objects), .key = 1 };
    }
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
    s->constructed = 0;
    s->capacity = (uint16_t)(((size_t)g->pages << SL_PAGE_SHIFT) / g->size);
    s->cls = (uint16_t)id;
    s->state = SLAB_CURRENT;
    __atomic_store_n(&s->h.prof, 0, __ATOMIC_RELAXED); /* no sampled object yet (block.h) */
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
    s->constructed = s->carved; /* (a constructor that carved further on counted its own) */
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

/* A remote-free bit on an object without its freer's mark: freed again
 * (say by its owner, in bulk) and handed out since, or written after its
 * free. */
static sl_noinline _Noreturn void collect_unmarked(struct slab *s, const void *p)
{
    sl_fatal("double free (or write after free) of", p, "size class", s->size);
}

/* Move word w's remote-free bits out of the live bitmap, or into the
 * magazine below *top down to stop while it has room (top NULL: none);
 * how many were unlinked. The magazine's objects are live there but
 * free: masked out of the check. With mark (malloc classes), each
 * object's second word must hold it: checked as the object is filled
 * (one pass, its address computed once) or unlinked. Under the remote
 * lock; the remote word is cleared before the live one, so a thread that
 * fork stops between the two leaves objects live (a bounded leak), never
 * a remote bit on an object that is not. Inline: the magazine's top
 * stays in a register across the words of a slab. */
sl_inline unsigned collect_word(struct slab *s, uintptr_t w, void **mag, uint64_t mark, void ***top, void **stop)
{
    _Atomic uint64_t *rw = rbitmap_word(w);
    uint64_t m = ld_relaxed(rw);
    if (!m)
        return 0;
    st_relaxed(rw, 0);
    _Atomic uint64_t *bw = bitmap_word(w);
    uint64_t v = ld_relaxed(bw), live = v;
    for (; mag && *mag; mag++)
        if ((uintptr_t)*mag >> 10 == w >> 10)
            live &= ~bitmap_bit((uintptr_t)*mag);
    if (unlikely(m & ~live))
        collect_bad(s, w, m & ~live);
    if (top) { /* their freers' mark is the magazine's cookie: they go in as they are */
        void **t = *top;
        for (; m && t > stop; m &= m - 1) {
            uint64_t *p = (uint64_t *)(w + ((uintptr_t)__builtin_ctzll(m) << SL_GRAIN_SHIFT));
            if (unlikely(p[1] != mark))
                collect_unmarked(s, p);
            __atomic_store_n(--t, (void *)p, __ATOMIC_RELAXED); /* free_state_find reads the slots */
        }
        *top = t;
    }
    unsigned n = 0;
    if (mark) /* the objects unlinked, counted as they are checked */
        for (uint64_t f = m; f; f &= f - 1, n++) {
            uint64_t *p = (uint64_t *)(w + ((uintptr_t)__builtin_ctzll(f) << SL_GRAIN_SHIFT));
            if (unlikely(p[1] != mark))
                collect_unmarked(s, p);
        }
    else
        n = popcount64(m);
    st_relaxed(bw, v & ~m);
    return n;
}

unsigned slab_collect(struct slab *s, void **mag, struct slab **held, uint64_t mark, struct mag_fill *fill)
{
    uint32_t sum = atomic_load_explicit(slab_remote(s), memory_order_relaxed);
    if (!(sum & ~SLAB_FULL_BIT)) /* no group marked, and not locked */
        return 0;
    sl_assert(!fill || mark); /* a magazine holds malloc-class objects only */
    sum = remote_lock(s, held) >> 1;
    uintptr_t base = (uintptr_t)slab_base(s), end = base + ((uintptr_t)s->h.npages << SL_PAGE_SHIFT);
    unsigned sh = remote_sum_shift(s->h.npages), n = 0;
    void **top = fill ? fill->top : NULL, **stop = fill ? fill->mark + 1 : NULL;
    for (; sum; sum &= sum - 1) {
        uintptr_t w = base + ((uintptr_t)__builtin_ctz(sum) << sh << 10);
        for (unsigned k = 0; k < 1u << sh && w < end; k++, w += 64 * SL_GRAIN)
            n += fill ? collect_word(s, w, mag, mark, &top, stop) : collect_word(s, w, mag, mark, NULL, NULL);
    }
    remote_unlock(s, held, 0);
    s->unlinked = (uint16_t)(s->unlinked + n);
    s->used = (uint16_t)(s->used - n);
    unsigned filled = fill ? (unsigned)(fill->top - top) : 0;
    if (fill)
        fill->top = top;
    return n + filled;
}

unsigned slab_remote_take_all(struct slab *s)
{
    uintptr_t base = (uintptr_t)slab_base(s), end = base + ((uintptr_t)s->h.npages << SL_PAGE_SHIFT);
    unsigned n = 0;
    remote_lock(s, NULL);
    for (uintptr_t w = base; w < end; w += 64 * SL_GRAIN) {
        n += (unsigned)popcount64(ld_relaxed(rbitmap_word(w)));
        st_relaxed(rbitmap_word(w), 0);
    }
    remote_unlock(s, NULL, 0);
    return n;
}

bool slab_take_freed(struct slab *s, uint64_t mark)
{
    uintptr_t base = (uintptr_t)slab_base(s), end = base + ((uintptr_t)s->h.npages << SL_PAGE_SHIFT);
    /* first a look without the lock: a slab whose remote frees still come
     * (a busy program's) is not kept waiting on it, nor its freers on us */
    unsigned n = 0;
    for (uintptr_t w = base; w < end; w += 64 * SL_GRAIN)
        n += (unsigned)popcount64(ld_relaxed(rbitmap_word(w)));
    if (n != s->capacity)
        return false;
    uint32_t old = remote_lock(s, NULL);
    bool ok = true;
    n = 0;
    for (uintptr_t w = base; w < end && ok; w += 64 * SL_GRAIN) {
        uint64_t m = ld_relaxed(rbitmap_word(w));
        n += (unsigned)popcount64(m);
        ok = !(m & ~ld_relaxed(bitmap_word(w))); /* else a double free: the owner's collect reports it */
        for (uint64_t f = mark ? m : 0; f && ok; f &= f - 1)
            ok = ((uint64_t *)(w + ((uintptr_t)__builtin_ctzll(f) << SL_GRAIN_SHIFT)))[1] == mark;
    }
    if (!ok || n != s->capacity) {
        remote_unlock(s, NULL, old);
        return false;
    }
    for (uintptr_t w = base; w < end; w += 64 * SL_GRAIN) { /* the remote word first, as collect_word */
        st_relaxed(rbitmap_word(w), 0);
        st_relaxed(bitmap_word(w), 0);
    }
    remote_unlock(s, NULL, 0);
    s->used = 0;
    s->free = NULL;
    s->unlinked = 0;
    return true;
}

bool slab_free_remote(struct slab *s, void *p, struct slab **held)
{
    uintptr_t q = (uintptr_t)p, base = (uintptr_t)slab_base(s);
    uint32_t old = remote_lock(s, held);
    remote_set(q, bitmap_bit(q), s->size);
    return remote_unlock_marked(s, held, old, remote_sum_bit(base, q, remote_sum_shift(s->h.npages)));
}

void remote_double_free(uintptr_t q, uint64_t twice, uint32_t size)
{
    sl_fatal("double free of",
             (void *)(align_down(q, 64 * SL_GRAIN) + ((uintptr_t)__builtin_ctzll(twice) << SL_GRAIN_SHIFT)),
             "size class", size);
}

/* Spin for a lock held by another thread, for a few dozen plain stores
 * unless it was preempted: then yield. */
uint32_t remote_lock_slow(struct slab *s, struct slab **held)
{
    if (held) { /* a signal handler that interrupted this thread inside a remote lock (a
                 * free into the slab, or its owner's collection) */
        if (*held == s)
            sl_fatal("malloc or free from a signal handler that interrupted sluice inside the same slab:",
                     slab_base(s), "size class", s->size);
        /* another slab: its lock is held by this thread; this one is
         * taken unrecorded (a fork from a handler inside this handler
         * would leave it to the thread itself) */
        return remote_lock(s, NULL);
    }
    _Atomic uint32_t *rh = slab_remote(s);
    for (unsigned spins = 0;; spins++) {
        uint32_t old = ld_relaxed(rh);
        if (!(old & SLAB_REMOTE_LOCK)) {
            if (atomic_compare_exchange_weak_explicit(rh, &old, old | SLAB_REMOTE_LOCK, memory_order_acquire,
                                                      memory_order_relaxed))
                return old;
            continue;
        }
        if (spins < 64)
            cpu_relax();
        else
            os_yield();
    }
}

bool slab_remote_unstick(struct slab *s)
{
    _Atomic uint32_t *rh = slab_remote(s);
    uint32_t v = ld_relaxed(rh);
    if (!(v & SLAB_REMOTE_LOCK))
        return false;
    st_relaxed(rh, SLAB_REMOTE_GROUPS);
    return v & SLAB_FULL_BIT;
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
    /* Past constructed, a carve was in progress when fork came (carved is
     * claimed before the constructor runs, slab_carve): none of those
     * objects was handed out or linked yet, so they are given back to the
     * uncarved tail and carved (constructed) again when needed. If some
     * are live or free all the same (a constructor that allocated from its
     * own cache), the others stay lost, marked live: a bounded leak, never
     * an unconstructed object handed out. */
    bool tail_clean = true;
    for (unsigned i = s->constructed; i < s->carved; i++)
        tail_clean &= !(on_free[i / 64] >> (i % 64) & 1) && !bitmap_test((uintptr_t)(base + (size_t)i * s->size));
    for (unsigned i = s->constructed; i < s->carved && !tail_clean; i++)
        if (!(on_free[i / 64] >> (i % 64) & 1))
            bitmap_set_owner((uintptr_t)(base + (size_t)i * s->size));
    if (tail_clean)
        s->carved = s->constructed;
    /* neither live nor free: lost mid-operation */
    for (unsigned i = 0; i < s->constructed; i++) {
        uint8_t *p = base + (size_t)i * s->size;
        if ((on_free[i / 64] >> (i % 64) & 1) || bitmap_test((uintptr_t)p))
            continue;
        *slab_link(s, p) = s->free;
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
