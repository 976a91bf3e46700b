/* heap_check.c — the slab layer's part of sl_check (with the page layer's
 * walk of every pageblock, page_check.c), and the figures of what is in use
 * (heap_usage: mallinfo, jemalloc's mallctl).
 *
 * Checked, with heaps_lock held, for a process whose other threads are not
 * allocating or freeing at that moment (sl_check reads owner-private state):
 *   - every page cache: each parked run is a run of the kind its stack
 *     holds (stack 0 PG_SLAB, stack 1 PG_RUN: the kind and the list that
 *     holds a run agree), of the stack's length, not live (no bitmap bit,
 *     a slab with no owner); the cache's page count;
 *   - every heap's slab lists: the current slab, the partial and full
 *     lists, by state, owner and cache id;
 *   - every allocated run (handed over by page_check): a live slab has the
 *     geometry of its cache id; its free list holds objects of the slab,
 *     at object starts, carved, whose bitmap bits are clear; its
 *     remote-free bits are all live bits; used == carved - |free| -
 *     unlinked; the bitmap bits set in it are exactly `used`, all at
 *     carved object starts (the objects in its owner's magazine among
 *     them: each at a carved object start of a slab of that heap and
 *     class, with the cookie in its second word and no remote-free bit).
 *     Every page of a live malloc-class slab carries its owner's page tag
 *     and class; every other allocated page a zero tag. Only a slab's head
 *     page has the FULL bit in its remote summary. A slab with no owner and a run that is
 *     not live (run.req 0: block.h) must be parked in a page cache (a run:
 *     or in the shared run cache, page/runcache.c), with no bit set. A live run has no bit either. (In a child forked while other
 *     threads ran, a run such a thread was freeing at that instant is
 *     stranded: neither live nor parked. That is tolerated there, and only
 *     there.)
 */
#include <string.h>

#include "../base/fatal.h"
#include "../os/os.h"
#include "heap_lists.h"
#include "heap_free.h"

#define FAIL(what, p, detail, num) sl_fatal("sl_check: " what, (p), (detail), (num))

/* Runs parked in page caches: an open-addressing set, mapped for the
 * check; if that mapping fails (the check of a process out of memory), a
 * search of every page cache instead (mask 0). */
struct parked {
    uintptr_t *slot;
    size_t mask;
};

static bool pcache_holds(struct page_cache *pc, uintptr_t run)
{
    for (unsigned t = 0; t < PCACHE_TYPES; t++)
        for (unsigned n = 1; n <= PCACHE_MAX_PAGES; n++)
            for (unsigned i = 0; i < pc->count[t][n]; i++)
                if ((uintptr_t)pc->runs[t][n][i] == run)
                    return true;
    return false;
}

static size_t slot_of(const struct parked *ps, uintptr_t run)
{
    size_t i = (size_t)(run >> SL_PAGE_SHIFT) * 0x9e3779b97f4a7c15ull & ps->mask;
    while (ps->slot[i] && ps->slot[i] != run)
        i = (i + 1) & ps->mask;
    return i;
}

static bool parked_has(const struct parked *ps, uintptr_t run)
{
    if (ps->mask)
        return ps->slot[slot_of(ps, run)] == run;
    for (struct heap *h = heaps_all(); h; h = h->all_next)
        if (pcache_holds(&h->room->pcache, run))
            return true;
    return false;
}

struct ctx {
    struct parked parked;
    bool forked; /* a fork child: runs other threads had in hand are stranded */
    size_t stranded;
    size_t slabs_by_state[SLAB_NOTIFY + 1], listed_by_state[SLAB_NOTIFY + 1];
};

/* Live-object bits set in a run's pages (whole pages: whole bitmap words);
 * a run has none of its own, so any is a stray bit. */
static size_t bits_in(uintptr_t base, size_t bytes)
{
    size_t n = 0;
    for (uintptr_t a = base; a < base + bytes; a += SL_GRAIN * 64)
        n += (size_t)popcount64(ld_relaxed(bitmap_word(a)));
    return n;
}

static void check_slab(struct slab *s, struct ctx *c)
{
    uint8_t *base = slab_base(s);
    size_t bytes = (size_t)s->h.npages << SL_PAGE_SHIFT;
    if (!atomic_load_explicit(&s->owner, memory_order_relaxed)) {
        if (!parked_has(&c->parked, (uintptr_t)base) && !(c->forked && ++c->stranded))
            FAIL("slab with no owner is in no page cache:", base, "pages", s->h.npages);
        if (bits_in((uintptr_t)base, bytes))
            FAIL("parked slab has live-object bits:", base, NULL, 0);
        return;
    }
    const struct slab_geom *g = &slab_geom[s->cls];
    struct heap *owner = (struct heap *)(atomic_load_explicit(&s->owner, memory_order_relaxed) & ~(uintptr_t)1);
    if (s->cls >= SL_NIDS || !g->key || g->pages != s->h.npages || g->size != s->size ||
        s->capacity != bytes / s->size || s->link_off != g->link_off)
        FAIL("slab does not have its cache's geometry:", base, "cache id", s->cls);
    if (s->state < SLAB_CURRENT || s->state > SLAB_NOTIFY || s->carved > s->capacity)
        FAIL("slab in no state:", base, "state", s->state);
    if (owner->fork_orphan)
        return; /* its thread stopped at fork, maybe mid-operation: repaired before use */
    c->slabs_by_state[s->state]++;
    size_t nfree = 0;
    for (void *p = s->free; p; p = *slab_link(s, p)) {
        uintptr_t off = (uintptr_t)p - (uintptr_t)base;
        if (off >= (uintptr_t)s->carved * s->size || off % s->size || ++nfree > s->capacity)
            FAIL("slab free list holds a stray pointer:", p, "size class", s->size);
        if (bitmap_test((uintptr_t)p))
            FAIL("object on a slab free list is marked live:", p, "size class", s->size);
    }
    size_t nremote = 0; /* remote frees not taken yet: each a live object */
    for (uintptr_t w = (uintptr_t)base; w < (uintptr_t)base + bytes; w += 64 * SL_GRAIN) {
        uint64_t m = ld_relaxed(rbitmap_word(w));
        if (m & ~ld_relaxed(bitmap_word(w)))
            FAIL("object freed by another thread is not marked live:",
                 (void *)(w + ((uintptr_t)__builtin_ctzll(m & ~ld_relaxed(bitmap_word(w))) << SL_GRAIN_SHIFT)),
                 "size class", s->size);
        nremote += popcount64(m);
    }
    if (s->unlinked > s->carved || s->used != s->carved - nfree - s->unlinked || nremote > s->used)
        FAIL("slab count wrong (used != carved - free - unlinked):", base, "used", s->used);
    size_t live = 0;
    for (uintptr_t a = (uintptr_t)base; a < (uintptr_t)base + bytes; a += SL_GRAIN) {
        if (!(ld_relaxed(bitmap_word(a)) & bitmap_bit(a)))
            continue;
        uintptr_t off = a - (uintptr_t)base;
        if (off % s->size || off >= (uintptr_t)s->carved * s->size)
            FAIL("live-object bit not at a carved object start:", (void *)a, "size class", s->size);
        live++;
    }
    if (live != s->used) /* the objects in its owner's magazine among them */
        FAIL("slab's live-object bits disagree with its count:", base, "bits", live);
}

/* The page tags of an allocated run: its owner's for a malloc-class slab,
 * else 0 (block.h). */
static void check_tags(struct page *head)
{
    uint32_t want = 0;
    if (head->h.kind == PG_SLAB) {
        struct slab *s = slab_of_page(head);
        uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
        if (owner && s->cls < SL_NCLASSES)
            want = heap_page_tag((struct heap *)owner, s->cls);
    }
    _Atomic uint32_t *t = page_tag((uintptr_t)page_addr(head));
    _Atomic uint32_t *rh = page_rhead((uintptr_t)page_addr(head));
    for (unsigned i = 0; i < head->h.npages; i++) {
        if (ld_relaxed(&t[i]) != (want ? want | i << TAG_PAGE_SHIFT : 0))
            FAIL("page tag does not name the page's slab:", (uint8_t *)page_addr(head) + ((size_t)i << SL_PAGE_SHIFT),
                 "tag", ld_relaxed(&t[i]));
        /* only a slab's head page can be FULL (a late remote mark may
         * leave summary bits on a page whose slab was released: slab.h) */
        if ((i || head->h.kind != PG_SLAB) && (ld_relaxed(&rh[i]) & SLAB_FULL_BIT))
            FAIL("remote FULL bit on a page that is no slab's head:",
                 (uint8_t *)page_addr(head) + ((size_t)i << SL_PAGE_SHIFT), "word", ld_relaxed(&rh[i]));
    }
}

/* In a fork child, a slab that a thread stopped by fork was taking or
 * giving up: slab_set_owner writes the page tags before the owner word,
 * so its tags may be half written. Such a slab is stranded (on no list,
 * in no page cache): the child never allocates from it, and a free into
 * it finds no live bit. */
static bool tags_in_flight(struct page *head, struct ctx *c)
{
    if (!c->forked || head->h.kind != PG_SLAB)
        return false;
    uintptr_t owner = atomic_load_explicit(&slab_of_page(head)->owner, memory_order_relaxed) & ~(uintptr_t)1;
    return !owner || ((struct heap *)owner)->fork_orphan;
}

static void check_run(struct page *head, void *arg)
{
    struct ctx *c = arg;
    if (!tags_in_flight(head, c))
        check_tags(head);
    if (head->h.kind == PG_SLAB)
        return check_slab(slab_of_page(head), c);
    uintptr_t base = (uintptr_t)page_addr(head);
    size_t bits = bits_in(base, (size_t)head->h.npages << SL_PAGE_SHIFT);
    if (run_live(base)) {
        if (bits)
            FAIL("medium run has live-object bits inside:", (void *)base, "bits", bits);
        if (parked_has(&c->parked, base))
            FAIL("live medium run is parked in a page cache:", (void *)base, NULL, 0);
    } else if (bits || (!head->run.parked && !parked_has(&c->parked, base) && !(c->forked && ++c->stranded))) {
        FAIL("medium run neither live nor parked in a page cache:", (void *)base, "pages", head->h.npages);
    } else if (head->run.parked && parked_has(&c->parked, base)) {
        FAIL("medium run parked in a thread's page cache and the shared one:", (void *)base, NULL, 0);
    }
}

static void check_pcache(struct page_cache *pc, struct parked *ps)
{
    static const uint8_t kind_of_stack[PCACHE_TYPES] = { [PCACHE_SLABS] = PG_SLAB, [PCACHE_RUNS] = PG_RUN,
                                                         [PCACHE_BUF_SLABS] = PG_SLAB };
    size_t pages = 0;
    for (unsigned t = 0; t < PCACHE_TYPES; t++)
        for (unsigned n = 1; n <= PCACHE_MAX_PAGES; n++) {
            if (pc->count[t][n] > PCACHE_DEPTH)
                FAIL("page cache stack overfull:", pc, "pages", n);
            if (!!pc->count[t][n] != !!(pc->nonempty[t] & (1ull << (n - 1))))
                FAIL("page cache's non-empty mask disagrees with a stack:", pc, "pages", n);
            for (unsigned i = 0; i < pc->count[t][n]; i++) {
                uintptr_t run = (uintptr_t)pc->runs[t][n][i];
                struct page *head = page_of((void *)run);
                if (!(pagemap_get(run) & PM_BLOCK) || (run & (SL_PAGE - 1)) || head->h.kind != kind_of_stack[t] ||
                    head->h.npages != n || page_addr(page_head(head)) != (void *)run)
                    FAIL("page cache holds a run of another kind or length:", (void *)run, "kind", head->h.kind);
                if (t != PCACHE_RUNS && atomic_load_explicit(&slab_of_page(head)->owner, memory_order_relaxed))
                    FAIL("page cache holds a slab that has an owner:", (void *)run, NULL, 0);
                if (ps->mask) {
                    size_t k = slot_of(ps, run);
                    if (ps->slot[k])
                        FAIL("run parked twice in page caches:", (void *)run, NULL, 0);
                    ps->slot[k] = run;
                }
                pages += n;
            }
        }
    if (pages != pc->pages)
        FAIL("page cache page count wrong:", pc, "counted", pages);
}

static size_t pcache_runs(struct page_cache *pc)
{
    size_t n = 0;
    for (unsigned t = 0; t < PCACHE_TYPES; t++)
        for (unsigned k = 1; k <= PCACHE_MAX_PAGES; k++)
            n += pc->count[t][k];
    return n;
}

static void check_list(struct heap *h, unsigned id, struct slab *head, enum slab_state st, struct ctx *c)
{
    struct slab *prev = NULL;
    for (struct slab *s = head; s; prev = s, s = s->next) {
        if (s->state != st || s->prev != prev || s->cls != id || !slab_owned_by(s, h) ||
            c->listed_by_state[st]++ > (1u << 28))
            FAIL("heap slab list broken at slab", slab_base(s), "cache id", id);
    }
}

/* A magazine holds objects of h's own slabs of its class, at carved object
 * starts, live in the bitmap (check_slab counts them with the live ones),
 * each with the cookie in its second word and no remote-free bit. */
static void check_magazines(struct heap *h)
{
    for (unsigned c = 0; c < SL_NCLASSES; c++) {
        void **top = h->mag_top[c];
        if (h->mag_first[c] != *top)
            FAIL("magazine's first object is not the one on top:", h, "size class", class_size[c]);
        if ((top != MAG_IDLE) != (h->mags_held[c / 64] >> (c % 64) & 1))
            FAIL("magazine laid out or idle, but its heap says otherwise:", h, "size class", class_size[c]);
        if (top == MAG_IDLE)
            continue;
        if (top <= mag_mark(h, c) || top > mag_end(h, c) || *mag_end(h, c) || *mag_mark(h, c) != MAG_LIMIT)
            FAIL("magazine's top or marks out of place:", h, "size class", class_size[c]);
        for (; *top; top++) {
            void *p = *top;
            uintptr_t a = (uintptr_t)p;
            if (!(pagemap_get(a) & PM_BLOCK) || page_index(p) < BLOCK_HEADER_PAGES)
                FAIL("magazine holds a pointer outside every pageblock:", p, "size class", class_size[c]);
            struct page *head = page_head(page_of(p));
            struct slab *s = slab_of_page(head);
            if (head->h.kind != PG_SLAB || s->cls != c || !slab_owned_by(s, h) ||
                tag_relative(h, ld_relaxed(page_tag(a))) % (1u << TAG_PAGE_SHIFT) != c ||
                tag_relative(h, ld_relaxed(page_tag(a))) >= TAG_MINE_LIMIT || !slab_is_object_start(s, p) ||
                a - (uintptr_t)slab_base(s) >= (uintptr_t)s->carved * s->size)
                FAIL("magazine holds what is not an object of the heap's slabs of its class:", p, "size class",
                     class_size[c]);
            if (!bitmap_test(a))
                FAIL("object in a magazine is not marked live:", p, "size class", class_size[c]);
            if (*mag_cookie(p) != h->cookie)
                FAIL("object in a magazine was written after its free:", p, "size class", class_size[c]);
            if (ld_relaxed(rbitmap_word(a)) & bitmap_bit(a))
                FAIL("object in a magazine was freed again by another thread:", p, "size class", class_size[c]);
        }
    }
}

static void check_heap(struct heap *h, struct ctx *c)
{
    check_magazines(h);
    for (unsigned id = 0; id < SL_NIDS; id++) {
        if (id >= SL_NCLASSES && (!heap_key(h, id) || heap_key(h, id) != slab_geom[id].key))
            continue; /* slots of a closed cache, reset before any use */
        struct slab *cur = *heap_cur(h, id);
        if (cur != &slab_none) {
            if (cur->state != SLAB_CURRENT || cur->cls != id || !slab_owned_by(cur, h))
                FAIL("heap's current slab is not current:", slab_base(cur), "cache id", id);
            c->listed_by_state[SLAB_CURRENT]++;
        }
        check_list(h, id, *heap_partial(h, id), SLAB_PARTIAL, c);
        if (id >= SL_NCLASSES)
            check_list(h, id, *heap_full(h, id), SLAB_FULL, c);
        /* what a thread's exit visits (heap.h ids_held) covers every slab it holds */
        if ((cur != &slab_none || *heap_partial(h, id) || (id >= SL_NCLASSES && *heap_full(h, id))) &&
            !(h->ids_held[id / 64] >> (id % 64) & 1))
            FAIL("heap holds slabs of a cache id it has not marked:", h, "cache id", id);
    }
}

void heap_check_all(void)
{
    heaps_lock_for_check();
    struct ctx c;
    memset(&c, 0, sizeof c);
    size_t runs = 0;
    for (struct heap *h = heaps_all(); h; h = h->all_next)
        runs += pcache_runs(&h->room->pcache);
    size_t cap = 64;
    while (cap < 2 * runs)
        cap *= 2;
    c.parked.slot = os_map(cap * sizeof(uintptr_t));
    c.parked.mask = c.parked.slot ? cap - 1 : 0;
    c.forked = heaps_forked();
    for (struct heap *h = heaps_all(); h; h = h->all_next) {
        check_pcache(&h->room->pcache, &c.parked);
        if (!h->fork_orphan) /* lists of a thread stopped by fork: maybe mid-update */
            check_heap(h, &c);
    }
    page_check(check_run, &c);
    if (c.parked.slot)
        os_unmap(c.parked.slot, cap * sizeof(uintptr_t));
    /* every current and partial slab (and user caches' full ones) is listed
     * once; FULL malloc slabs and NOTIFY slabs sit on no heap list */
    if (c.slabs_by_state[SLAB_CURRENT] != c.listed_by_state[SLAB_CURRENT] ||
        c.slabs_by_state[SLAB_PARTIAL] != c.listed_by_state[SLAB_PARTIAL])
        FAIL("slabs by state disagree with the heaps' lists: current", NULL, "listed",
             c.listed_by_state[SLAB_CURRENT]);
    heaps_unlock_for_check();
}

/* ---- in use: mallinfo's uordblks, jemalloc's allocated and active ----- */

/* One allocated run, read without its owner's consent: racy by nature (a
 * statistic), so every field is read once and checked before it indexes. */
static void count_run(struct page *head, void *arg)
{
    struct heap_usage *u = arg;
    size_t bytes = (size_t)head->h.npages << SL_PAGE_SHIFT;
    if (head->h.kind == PG_RUN) {
        if (run_live((uintptr_t)page_addr(head))) {
            u->run_bytes += bytes;
            u->active_bytes += bytes;
        }
        return;
    }
    struct slab *s = slab_of_page(head);
    if (!atomic_load_explicit(&s->owner, memory_order_relaxed))
        return; /* parked in a page cache */
    unsigned used = __atomic_load_n(&s->used, __ATOMIC_RELAXED), cls = __atomic_load_n(&s->cls, __ATOMIC_RELAXED);
    if (atomic_load_explicit(slab_remote(s), memory_order_relaxed) & SLAB_REMOTE_GROUPS) {
        /* freed by other threads, not yet taken back: used, but not live */
        unsigned freed = 0;
        for (uintptr_t a = (uintptr_t)page_addr(head), end = a + bytes; a < end; a += 64 * SL_GRAIN)
            freed += popcount64(ld_relaxed(rbitmap_word(a)));
        used -= freed < used ? freed : used;
    }
    u->slab_bytes += (size_t)used * __atomic_load_n(&s->size, __ATOMIC_RELAXED);
    u->active_bytes += used ? bytes : 0;
    if (cls < SL_NCLASSES) {
        u->class_slabs[cls]++;
        u->class_objects[cls] += used;
    }
}

void heap_usage(struct heap_usage *u)
{
    memset(u, 0, sizeof *u);
    page_walk_runs(count_run, u);
    heaps_lock_for_check();
    for (struct heap *h = heaps_all(); h; h = h->all_next) { /* free, though used in their slabs */
        for (unsigned c = 0; c < SL_NCLASSES; c++) {
            size_t n = mag_count(h, c);
            u->slab_bytes -= n * class_size[c];
            u->class_objects[c] -= n < u->class_objects[c] ? n : u->class_objects[c];
        }
        u->slab_bytes -= heap_batch_bytes(h); /* freed, waiting in a remote batch */
    }
    heaps_unlock_for_check();
    if ((ptrdiff_t)u->slab_bytes < 0) /* counts read at different instants */
        u->slab_bytes = 0;
}
