/* heap.c — one thread heap: slab lists and states, the slow paths of small
 * malloc and free, medium runs, and the report of a bad free. The registry
 * of heaps (creation, thread exit, orphans, cache ids, fork) is heaps.c.
 *
 * A heap is changed only by its owner thread, or under heaps_lock when it is
 * an orphan (whoever holds the lock acts as its owner). Remote threads touch
 * only a slab's remote word and the heap's notify stack and woken counters.
 */
#define _GNU_SOURCE
#include "heap.h"

#include <errno.h>
#include <string.h>

#include "../base/drain.h"
#include "../base/events.h"
#include "../base/fatal.h"
#include "../meta/meta.h"
#include "../zero/zero.h"
#include "heap_lists.h"

struct slab slab_none;
struct heap_ids ids_none;
void *mag_none[1];
void *mag_idle[2] = { MAG_LIMIT, NULL };
uint64_t heap_cookie;
struct heap heap_empty = { .cur = { [0 ... SL_CLASS_ZERO] = &slab_none },
                           .tag = HEAP_TAG_NONE,
                           .mag_top = { [0 ... SL_CLASS_ZERO] = mag_none },
                           .ids = &ids_none };
__thread struct heap *tls_heap __attribute__((tls_model("initial-exec"))) = &heap_empty;

void heap_count(struct heap *h, enum sl_stat id, uint64_t n)
{
    if (h != &heap_empty)
        stat_add(h->stats, id, n);
    else
        stat_add_shared(id, n);
}

/* ---- slab lists -------------------------------------------------------- */

void slab_list_push(struct slab **head, struct slab *s)
{
    s->prev = NULL;
    s->next = *head;
    if (s->next)
        s->next->prev = s;
    *head = s;
}

void slab_list_unlink(struct slab **head, struct slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        *head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

/* Take s off whichever list of h its state puts it on. */
static void slab_unlist(struct heap *h, struct slab *s)
{
    if (s->state == SLAB_PARTIAL)
        slab_list_unlink(heap_partial(h, s->cls), s);
    else if (s->state == SLAB_FULL && s->cls >= SL_NCLASSES)
        slab_list_unlink(heap_full(h, s->cls), s);
}

/* Give an empty slab back to the page layer. pc may be NULL (orphans). */
/* Does any object of s have its live bit? (the debug build's check) */
static bool slab_has_live(struct slab *s)
{
    uintptr_t base = (uintptr_t)slab_base(s), end = base + ((uintptr_t)s->h.npages << SL_PAGE_SHIFT);
    for (uintptr_t w = base; w < end; w += 64 * SL_GRAIN)
        if (ld_relaxed(bitmap_word(w)))
            return true;
    return false;
}

void slab_release(struct heap *h, struct slab *s, struct page_cache *pc)
{
    sl_assert(!s->used);
    /* nothing is live, so a remote free not taken yet is a double free
     * (reported by the collect); none must outlive the slab */
    if (atomic_load_explicit(slab_remote(s), memory_order_acquire) & ~SLAB_FULL_BIT)
        heap_slab_collect(h, s, NULL);
    atomic_store_explicit(slab_remote(s), 0, memory_order_relaxed);
    sl_assert_expensive(!slab_has_live(s));
    slab_unlist(h, s);
    slab_own(s, NULL);
    s->state = 0;
    heap_count(h, STAT_slab_release, 1);
    page_free(pc, slab_base(s));
}

/* A remote free cleared the FULL bit of s: tell its owner. Heaps are never
 * unmapped, so the owner word is always safe to follow. */
void heap_wake(uintptr_t owner_word, struct slab *s)
{
    struct heap *owner = (struct heap *)(owner_word & ~(uintptr_t)1);
    if (owner_word & 1) { /* user cache: a counter, see take_woken */
        atomic_fetch_add_explicit(&heap_ids(owner)->woken[s->cls - SL_NCLASSES], 1, memory_order_release);
        return;
    }
    struct slab *old = atomic_load_explicit(&owner->notify, memory_order_relaxed);
    do {
        s->next = old;
    } while (!atomic_compare_exchange_weak_explicit(&owner->notify, &old, s, memory_order_release,
                                                    memory_order_relaxed));
}

/* Malloc classes: move the slabs that remote frees woke up back onto the
 * partial lists. */
void take_notified(struct heap *h)
{
    if (!atomic_load_explicit(&h->notify, memory_order_relaxed))
        return;
    struct slab *s = atomic_exchange_explicit(&h->notify, NULL, memory_order_acquire);
    while (s) {
        struct slab *next = s->next;
        if (s->state == SLAB_FULL || s->state == SLAB_NOTIFY)
            partial_push(h, s);
        s = next;
    }
}

/* User caches: a FULL slab stays on the heap's full list (so that
 * sl_cache_destroy finds every slab without racing a notify push); a remote
 * free that clears its FULL bit counts one wake-up, and the owner scans the
 * list until it has found that many woken slabs (or reached the end). */
void take_woken(struct heap *h, unsigned id)
{
    _Atomic uint32_t *woken = &heap_ids(h)->woken[id - SL_NCLASSES];
    if (!atomic_load_explicit(woken, memory_order_relaxed))
        return;
    uint32_t k = atomic_exchange_explicit(woken, 0, memory_order_acquire);
    for (struct slab *s = *heap_full(h, id); s && k;) {
        struct slab *next = s->next;
        if (atomic_load_explicit(slab_remote(s), memory_order_acquire) != SLAB_FULL_BIT) {
            slab_list_unlink(heap_full(h, id), s);
            partial_push(h, s);
            k--;
        }
        s = next;
    }
}

/* Lay out h's idle magazine of class cls (heap.h), empty, at its class's
 * depth. */
static void mag_layout(struct heap *h, unsigned cls)
{
    h->mag_shift[cls] = 0;
    h->mag_burst[cls] = 0;
    __atomic_store_n(mag_mark(h, cls), MAG_LIMIT, __ATOMIC_RELAXED); /* slots: free_state_find reads them */
    __atomic_store_n(mag_end(h, cls), NULL, __ATOMIC_RELAXED);
    mag_set(h, cls, mag_end(h, cls));
}

/* Collect the remote frees of s, a slab of h's. With fill (a malloc slow
 * path, so the magazine of s's class is empty), they go into that
 * magazine while it has room, as if the owner had freed them: no live bit
 * is cleared, no free list is built, and the mallocs that follow pop them
 * on the fast path; the rest become unlinked. */
static unsigned collect(struct heap *h, struct slab *s, bool fill)
{
    unsigned cls = s->cls;
    if (!fill)
        return heap_slab_collect(h, s, NULL);
    if (h->mag_top[cls] == MAG_IDLE)
        mag_layout(h, cls);
    struct mag_fill f = { .top = h->mag_top[cls], .mark = mag_mark(h, cls) };
    unsigned n = heap_slab_collect(h, s, &f);
    mag_set(h, cls, f.top);
    return n;
}

/* Has a collect with fill put objects into h's magazine of class cls? */
static bool mag_filled(struct heap *h, unsigned cls, bool fill) { return fill && *h->mag_top[cls]; }

/* An exhausted slab leaves the current position: it becomes FULL, unless
 * remote frees arrived meanwhile; then they are collected and it stays.
 * Returns true if s has free objects again (or, with fill, put some into
 * the magazine). */
static bool retire_or_collect(struct heap *h, struct slab *s, bool fill)
{
    for (;;) {
        uint32_t expected = 0;
        /* release: the remote freer that clears the bit takes s->next over */
        if (atomic_compare_exchange_strong_explicit(slab_remote(s), &expected, SLAB_FULL_BIT, memory_order_release,
                                                    memory_order_relaxed) ||
            expected == SLAB_FULL_BIT) {
            s->state = SLAB_FULL;
            if (s->cls >= SL_NCLASSES)
                slab_list_push(heap_full(h, s->cls), s);
            return false;
        }
        if (collect(h, s, fill)) {
            stat_add(h->stats, STAT_remote_collect, 1);
            return slab_relink(s) || mag_filled(h, s->cls, fill);
        }
    }
}

bool heap_id_sync_slow(struct heap *h, unsigned id, uint32_t key)
{
    struct heap_ids *ids = heap_ids(h);
    if (ids == &ids_none) {
        if (!(ids = meta_alloc(sizeof *ids))) /* zero: no key matches */
            return false;
        atomic_store_explicit(&h->ids, ids, memory_order_release);
    }
    unsigned i = id - SL_NCLASSES;
    ids->cur[i] = &slab_none;
    ids->partial[i] = ids->full[i] = NULL;
    atomic_store_explicit(&ids->woken[i], 0, memory_order_relaxed);
    ids->key[i] = key;
    return true;
}

/* ---- small malloc slow path -------------------------------------------- */

static struct slab *slab_new(struct heap *h, unsigned id)
{
    const struct slab_geom *g = &slab_geom[id];
    void *run = page_alloc(&h->pcache, (enum pb_type)g->type, g->pages, 1, PG_SLAB, NULL);
    if (!run)
        return NULL;
    struct slab *s = slab_of_page(page_of(run));
    slab_init(s, id);
    slab_own(s, h);
    stat_add(h->stats, STAT_slab_new, 1);
    return s;
}

/* Make cur[id] a slab with a non-empty free list, or NULL (ENOMEM); with
 * fill (heap_alloc_small_slow), remote frees collected may go to the
 * magazine instead, and the slab's free list may then be empty. */
static struct slab *refill(struct heap *h, unsigned id, bool fill)
{
    struct slab **cur = heap_cur(h, id), **partial = heap_partial(h, id);
    struct slab *s = *cur;
    if (s != &slab_none) {
        if (s->free || slab_relink(s))
            return s;
        if (collect(h, s, fill)) {
            stat_add(h->stats, STAT_remote_collect, 1);
            slab_relink(s);
            return s;
        }
        if (slab_carve(s) || retire_or_collect(h, s, fill))
            return s;
        *cur = &slab_none;
    }
    if (id < SL_NCLASSES)
        take_notified(h);
    else
        take_woken(h, id);
    for (int round = 0; round < 2; round++) {
        while ((s = *partial)) {
            slab_list_unlink(partial, s);
            s->state = SLAB_CURRENT;
            *cur = s;
            if (collect(h, s, fill))
                stat_add(h->stats, STAT_remote_collect, 1);
            if (s->free || slab_relink(s) || mag_filled(h, id, fill) || slab_carve(s) ||
                retire_or_collect(h, s, fill))
                return s;
            *cur = &slab_none;
        }
        if (round == 0 && !orphan_adopt(h, id))
            break;
    }
    s = slab_new(h, id);
    if (!s)
        return NULL;
    *cur = s;
    slab_carve(s);
    return s;
}

/* Every allocation that fails for want of memory drains the reclaim
 * registry (base/drain.h) and tries once more before it reports ENOMEM:
 * here for slab objects, zero-size slots, heaps and medium runs; in the
 * api layer for huge mappings and checked mode. */
struct slab *heap_refill(struct heap *h, unsigned id)
{
    struct slab *s;
    DRAIN_RETRY(s, refill(h, id, false));
    return s;
}

static sl_noinline void *zero_alloc_slow(void)
{
    void *p;
    DRAIN_RETRY(p, zero_alloc());
    return p;
}

void *heap_alloc_small_slow(struct heap *h, unsigned cls)
{
    if (unlikely(cls == SL_CLASS_ZERO))
        return zero_alloc_slow();
    if (h == &heap_empty) {
        DRAIN_RETRY(h, heap_get_slow());
        if (!h)
            return NULL;
    }
    heap_boost_check(h);
    struct slab *s;
    DRAIN_RETRY(s, refill(h, cls, true));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    void **top = h->mag_top[cls];
    void *p = *top;
    if (p) { /* remote frees collected into the magazine */
        mag_set(h, cls, top + 1);
        *mag_cookie(p) = 0;
    } else {
        p = s->free;
        s->free = *(void **)p;
        *mag_cookie(p) = 0;
        s->used++;
        bitmap_set_owner((uintptr_t)p);
    }
    stat_add(h->stats, STAT_alloc_small, 1);
    return p;
}

/* ---- free slow paths --------------------------------------------------- */

/* An empty slab s on the partial list goes back to the page layer unless
 * the list is short: one empty slab stays as a spare, so a cache that
 * oscillates around a slab boundary does not rebuild a slab on every
 * other call; after a bulk free, up to SLAB_SPARE_BYTES of its cache's
 * slabs do, so a batch that empties whole slabs does not rebuild them when
 * as many objects are allocated again (one by one, the magazine keeps a
 * slab from emptying). Spares go back with the other empty slabs at a
 * thread's exit, sl_purge and a watermark boost (heaps.c reclaim_id). */
#define SLAB_SPARE_BYTES (64u << 10)
static bool slab_spare_room(struct heap *h, struct slab *s, bool bulk)
{
    unsigned keep = bulk ? SLAB_SPARE_BYTES / ((unsigned)slab_geom[s->cls].pages << SL_PAGE_SHIFT) : 1, n = 0;
    for (struct slab *t = *heap_partial(h, s->cls); t; t = t->next)
        if (++n > (keep ? keep : 1))
            return false;
    return true;
}

/* The owner freed into s and its freelist had been empty, or s became empty. */
void heap_free_local_slow(struct heap *h, struct slab *s, bool bulk)
{
    if (s->state == SLAB_FULL) {
        uint32_t expected = SLAB_FULL_BIT;
        bool cleared = atomic_compare_exchange_strong_explicit(slab_remote(s), &expected, 0, memory_order_relaxed,
                                                               memory_order_relaxed);
        if (s->cls >= SL_NCLASSES) {
            /* off the full list either way; a wake-up counted for it by a
             * remote freer only costs take_woken a longer scan */
            slab_list_unlink(heap_full(h, s->cls), s);
            partial_push(h, s);
        } else if (cleared) {
            partial_push(h, s);
        } else {
            s->state = SLAB_NOTIFY; /* a remote freer is pushing it to notify */
        }
    }
    if (!s->used && s->state == SLAB_PARTIAL && !slab_spare_room(h, s, bulk))
        slab_release(h, s, &h->pcache);
}

void heap_mag_flush_class(struct heap *h, unsigned cls)
{
    void **top = h->mag_top[cls];
    mag_set(h, cls, MAG_IDLE);
    for (; *top; top++) {
        void *p = *top; /* keeps the cookie: free, on its slab (free_state.c) */
        bitmap_clear_owner((uintptr_t)p);
        slab_push_owned(h, slab_of_page(page_head(page_of(p))), p, (void **)p);
    }
}

void heap_mag_flush(struct heap *h)
{
    for (unsigned c = 0; c < SL_NCLASSES; c++)
        heap_mag_flush_class(h, c);
}

/* A free of p, a malloc-class object start, by a thread that does not own
 * its slab: its second word gets the cookie, the mark that the owner's
 * collect checks (heap.h). Written, not read: the object's line is
 * usually in its owner's cache, and a store waits for it in the store
 * buffer where a load would stall the free. */
static void remote_mark(void *p) { *mag_cookie(p) = __atomic_load_n(&heap_cookie, __ATOMIC_RELAXED); }

/* Free of the run whose head descriptor is pg, at p (run_head_at): live
 * while pg->run.req is nonzero (block.h); the exchange lets one of two
 * racing frees through, and a head that is not live (a run parked in a
 * page cache) is a double free. */
static void run_free(void *p, struct page *pg)
{
    if (!__atomic_exchange_n(&pg->run.req, 0, __ATOMIC_RELAXED))
        heap_bad_free(p, (uintptr_t)block_of(p) | PM_BLOCK, "free");
    struct heap *h = tls_heap;
    if (likely(h != &heap_empty) && page_cache_push_run(&h->pcache, p, pg)) {
        stat_add(h->stats, STAT_free_medium, 1);
        return;
    }
    heap_count(h, STAT_free_medium, 1);
    page_free(h == &heap_empty ? NULL : &h->pcache, p);
}

/* Remote frees by threads that could get no heap (lock order: init.c). */
static sl_lock heapless_lock = SL_LOCK_INIT(LOCK_HEAPLESS);
sl_lock *heapless_fork_lock(void) { return &heapless_lock; }

/* Free of a live slab object (validated) of any cache: by its owner with no
 * atomics, else into the remote-free bitmap (slab.h). */
void heap_free_object(struct slab *s, void *p)
{
    struct heap *h = tls_heap;
    /* a thread that only frees (a consumer) gets a heap too, so its counts
     * stay thread-local instead of contending on a global atomic */
    if (h == &heap_empty && heap_get_slow())
        h = tls_heap;
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (owner == slab_owner_word(h, s->cls)) {
        /* nothing is written into p here: checked mode frees its blocks
         * this way, and their second word is its header's */
        if (s->cls < SL_NCLASSES)
            heap_free_hint_check(p, s);
        else if (slab_freed_remotely(s, (uintptr_t)p))
            heap_bad_free(p, pagemap_get((uintptr_t)p), "free");
        _Atomic uint64_t *w = bitmap_word((uintptr_t)p);
        return heap_free_owned(h, s, p, slab_link(s, p), w, ld_relaxed(w) & ~bitmap_bit((uintptr_t)p));
    }
    heap_count(h, STAT_free_remote, 1);
    if (s->cls < SL_NCLASSES) {
        heap_free_hint_check(p, s);
        remote_mark(p);
    }
    if (h == &heap_empty) { /* no heap, so no slot for the remote lock: a lock fork takes */
        lock_acquire(&heapless_lock);
        bool was_full = slab_free_remote(s, p, NULL);
        lock_release(&heapless_lock);
        if (was_full)
            heap_wake(owner, s);
        return;
    }
    if (slab_free_remote(s, p, &h->remote_held))
        heap_wake(owner, s);
}


/* A burst of frees: MAG_BURST frees in a row found h's magazine of class
 * cls full, with no malloc between them (a program that frees a batch
 * larger than the magazine, to allocate as many again: tcmalloc's thread
 * cache lists grow on the same pattern). The magazine doubles, up to its
 * room (size_class.h), so the next such batch stays on the fast paths;
 * mag_layout takes it back to its class's depth once it is emptied. Frees
 * and mallocs that alternate (a random walk that meets the full magazine
 * now and then) never grow it: a deeper magazine spreads their pushes and
 * pops over more lines (with every magazine at its room, bench_slots took
 * 0.1915 s against 0.1712, medians of 11 interleaved runs). false: it is
 * at its room already. */
#define MAG_BURST 64
static bool mag_grow(struct heap *h, unsigned cls)
{
    uint32_t now = (uint32_t)ld_relaxed(&h->stats[STAT_alloc_small]);
    if (now != h->mag_seen[cls]) {
        h->mag_seen[cls] = now;
        h->mag_burst[cls] = 0;
        return false;
    }
    if (++h->mag_burst[cls] < MAG_BURST || mag_depth(h, cls) == class_mag_room[cls])
        return false;
    __atomic_store_n(mag_mark(h, cls), NULL, __ATOMIC_RELAXED); /* a stale slot now, as any below the top */
    h->mag_shift[cls]++;
    __atomic_store_n(mag_mark(h, cls), MAG_LIMIT, __ATOMIC_RELAXED);
    h->mag_burst[cls] = 0;
    return true;
}

void heap_free_mag_full_slow(struct heap *h, void *p)
{
    unsigned cls = ld_relaxed(page_tag((uintptr_t)p)) & ((1u << TAG_PAGE_SHIFT) - 1);
    if (h->mag_top[cls] == MAG_IDLE) {
        mag_layout(h, cls);
        return heap_mag_push(h, p, cls);
    }
    if (mag_grow(h, cls))
        return heap_mag_push(h, p, cls);
    _Atomic uint64_t *w = bitmap_word((uintptr_t)p);
    *mag_cookie(p) = h->cookie; /* free, on its slab (free_state.c) */
    heap_free_owned(h, slab_of_page(page_head(page_of(p))), p, (void **)p, w, ld_relaxed(w) & ~bitmap_bit((uintptr_t)p));
}

void heap_free_block_now(void *p)
{
    uintptr_t a = (uintptr_t)p;
    struct page *run = run_head_at(a);
    if (run)
        return run_free(p, run);
    if (!bitmap_test(a)) {
        if (sl_events.checked_free) /* checked mode: its pointers have no live bit */
            return sl_events.checked_free(p);
        heap_bad_free(p, (uintptr_t)block_of(p) | PM_BLOCK, "free");
    }
    heap_free_object(slab_of_page(page_head(page_of(p))), p);
}

void heap_free_block_slow(void *p, uint32_t x)
{
    struct heap *h = tls_heap;
    uint32_t t = x ^ h->tag; /* the page tag (tag_relative undone) */
    struct page *run;
    if (!t && (run = run_head_at((uintptr_t)p))) /* not a malloc slab's page: a medium run first */
        return run_free(p, run);
    /* another heap's malloc slab: batched; a thread that only frees (a
     * consumer) gets a heap for it. Checked mode frees at once. */
    if (t && !sl_events.checked_free && h == &heap_empty && heap_get_slow())
        h = tls_heap; /* maybe an orphan taken over whole: p may be its own */
    if (t && !sl_events.checked_free && h != &heap_empty && tag_relative(h, t) >= TAG_MINE_LIMIT) {
        /* an object start of its slab (the page tag gives both), so the
         * mark lands in no other object (past the last object, in the
         * slab's tail, it lands in no object at all); whether it is live,
         * the owner checks when it takes it (its bitmap line is not read
         * here) */
        if (unlikely(!class_object_start(t & ((1u << TAG_PAGE_SHIFT) - 1), (uint32_t)((uintptr_t)p - tag_slab_head(p, t)))))
            heap_bad_free(p, pagemap_get((uintptr_t)p), "free");
        heap_free_hint_check(p, slab_of_page(page_of((void *)tag_slab_head(p, t))));
        remote_mark(p);
        return remote_batch_add(h, p, t);
    }
    heap_free_block_now(p);
}

/* ---- medium runs --------------------------------------------------------- */

static sl_noinline void *alloc_run_slow(size_t size, size_t align, bool *clean)
{
    struct heap *h = heap_get();
    if (!h)
        return NULL;
    heap_boost_check(h);
    size_t align_pages = align > SL_PAGE ? align >> SL_PAGE_SHIFT : 1;
    void *r;
    DRAIN_RETRY(r, page_alloc(&h->pcache, PB_RUN, heap_run_pages(size), align_pages, PG_RUN, clean));
    return r;
}

void *heap_alloc_run(size_t size, size_t align, bool *clean)
{
    struct heap *h = tls_heap;
    void *r;
    if (likely(h != &heap_empty && align <= SL_PAGE) && (r = page_cache_pop_run(&h->pcache, heap_run_pages(size)))) {
        if (clean)
            *clean = false; /* a parked run is dirty */
    } else if (!(r = alloc_run_slow(size, align, clean))) {
        return NULL;
    } else {
        h = tls_heap;
    }
    __atomic_store_n(&page_of(r)->run.req, size, __ATOMIC_RELAXED); /* live (run_live) */
    stat_add(h->stats, STAT_alloc_medium, 1);
    return r;
}

size_t heap_usable_size(void *p)
{
    struct page *head = page_head(page_of(p));
    if (head->h.kind == PG_RUN)
        return (size_t)head->h.npages << SL_PAGE_SHIFT;
    struct slab *s = slab_of_page(head);
    return s->link_off ? s->link_off : s->size; /* a constructed object ends at its link */
}

bool heap_resize_run(void *p, size_t new_size)
{
    struct page *pg = page_of(p);
    size_t npages = heap_run_pages(new_size);
    /* the common realloc of a growing buffer stays within its pages */
    if (npages != pg->h.npages && !page_resize(p, npages))
        return false;
    __atomic_store_n(&pg->run.req, new_size, __ATOMIC_RELAXED);
    return true;
}

size_t heap_run_request(void *p) { return __atomic_load_n(&page_of(p)->run.req, __ATOMIC_RELAXED); }

/* ---- misuse ------------------------------------------------------------ */

void heap_free_to_cache(unsigned id, void *p)
{
    uintptr_t a = (uintptr_t)p, e = pagemap_get(a);
    if ((e & PM_BLOCK) && block_live(a)) {
        struct page *head = page_head(page_of(p));
        struct slab *s = head->h.kind == PG_SLAB ? slab_of_page(head) : NULL;
        if (s && s->cls == id)
            return heap_free_object(s, p);
        heap_wrong_cache_free(id, s, p);
    }
    if (e & (PM_HUGE | PM_ZERO))
        heap_wrong_cache_free(id, NULL, p);
    heap_bad_free(p, e, "free");
}

_Noreturn sl_cold void heap_wrong_cache_free(unsigned id, struct slab *s, const void *p)
{
    char what[160];
    size_t n = 0;
    const char *parts[] = { "sl_cache_free to cache '", slab_geom[id].name, "' of" };
    for (size_t i = 0; i < 3; i++) {
        size_t l = strnlen(parts[i], sizeof what - 1 - n);
        memcpy(what + n, parts[i], l);
        n += l;
    }
    what[n] = 0;
    if (!s)
        sl_fatal(what, p, "not an object of any cache", (size_t)-1);
    if (s->cls < SL_NCLASSES)
        sl_fatal(what, p, "a malloc object of size class", s->size);
    char detail[80] = "an object of cache '";
    size_t d = strlen(detail);
    size_t l = strnlen(slab_geom[s->cls].name, sizeof detail - 2 - d);
    memcpy(detail + d, slab_geom[s->cls].name, l);
    detail[d + l] = '\'';
    detail[d + l + 1] = 0;
    sl_fatal(what, p, detail, (size_t)-1);
}

_Noreturn sl_cold void heap_bad_free(const void *p, uintptr_t e, const char *op)
{
    static const char *const foreign[] = { "free of a pointer sluice did not allocate:",
                                           "realloc of a pointer sluice did not allocate:" };
    bool is_realloc = op[0] == 'r';
    if (!(e & PM_BLOCK))
        sl_fatal(foreign[is_realloc], p, NULL, 0);
    unsigned idx = page_index(p);
    if (idx < BLOCK_HEADER_PAGES)
        sl_fatal(foreign[is_realloc], p, NULL, 0);
    unsigned run = block_find_run(block_of(p), idx);
    if (!run)
        sl_fatal(is_realloc ? "realloc of freed memory at" : "double free of", p, NULL, 0);
    struct page *head = &block_pages(block_of(p))[run];
    if (head->h.kind == PG_SLAB) {
        struct slab *s = slab_of_page(head);
        if (!atomic_load_explicit(&s->owner, memory_order_relaxed)) /* a run parked in a page cache */
            sl_fatal(is_realloc ? "realloc of freed memory at" : "double free of", p, NULL, 0);
        if (slab_is_object_start(s, p))
            sl_fatal(is_realloc ? "realloc of freed memory at" : "double free of", p, "size class", s->size);
        sl_fatal(is_realloc ? "realloc of an interior pointer" : "free of an interior pointer", p,
                 "size class", s->size);
    }
    if (head->h.kind == PG_RUN && page_addr(head) != p)
        sl_fatal(is_realloc ? "realloc of an interior pointer" : "free of an interior pointer", p, "run of pages",
                 head->h.npages);
    sl_fatal(is_realloc ? "realloc of freed memory at" : "double free of", p, NULL, 0);
}
