/* heap.c — one thread heap: slab lists and states, the slow path of small
 * malloc, and medium runs. Its free slow paths and the reports of misuse
 * are heap_free.c; the registry of heaps (creation, thread exit, orphans,
 * fork) is heaps.c, the object caches' ids heap_ids.c.
 *
 * A heap is changed only by its owner thread, or under heaps_lock when it is
 * an orphan (whoever holds the lock acts as its owner). Remote threads touch
 * only a slab's remote word and the heap's notify stack and woken counters.
 */
#define _GNU_SOURCE
#include "heap_mag.h"

#include <errno.h>
#include <string.h>

#include "../base/annotate.h"
#include "../base/drain.h"
#include "../base/events.h"
#include "../base/fatal.h"
#include "../meta/meta.h"
#include "../os/os.h"
#include "../prof/prof.h"
#include "../huge/huge.h"
#include "../zero/zero.h"
#include "heap_lists.h"
#include "heap_run.h"

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
bool heap_wake(uintptr_t owner_word, struct slab *s)
{
    struct heap *owner = (struct heap *)(owner_word & ~(uintptr_t)1);
    if (owner_word & 1) { /* user cache: a counter, see take_woken */
        atomic_fetch_add_explicit(&heap_ids(owner)->woken[s->cls - SL_NCLASSES], 1, memory_order_release);
        return false;
    }
    return heap_notify_push(owner, s);
}

bool heap_notify_push(struct heap *h, struct slab *s)
{
    _Atomic(struct slab *) *top = &h->notify[s->cls];
    struct slab *old = atomic_load_explicit(top, memory_order_relaxed);
    do {
        s->next = old;
    } while (!atomic_compare_exchange_weak_explicit(top, &old, s, memory_order_release, memory_order_relaxed));
    return !old;
}

/* Malloc class cls: move the slabs that remote frees woke up back onto the
 * partial list. Only the class being refilled: the slabs of the others
 * wait on their stacks, where the reclaimer finds them if their frees
 * empty them while this thread needs none of their class (notify.c); on
 * the partial lists they would be this thread's alone. */
void take_notified(struct heap *h, unsigned cls)
{
    if (!atomic_load_explicit(&h->notify[cls], memory_order_relaxed))
        return;
    struct slab *s = atomic_exchange_explicit(&h->notify[cls], NULL, memory_order_acquire);
    st_relaxed(&h->notify_gen[cls], ld_relaxed(&h->notify_gen[cls]) + 1); /* not idle (notify.c) */
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
void mag_layout(struct heap *h, unsigned cls)
{
    h->mags_held[cls / 64] |= (uint64_t)1 << (cls % 64);
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
    /* in the magazine, not by free: counted out of its pushes (heap.h) */
    count_add(&h->mag_adj[cls], -(uint64_t)(h->mag_top[cls] - f.top));
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
    void *run = page_alloc(&h->room->pcache, (enum pb_type)g->type, g->pages, 1, PG_SLAB, NULL);
    if (!run)
        return NULL;
    struct slab *s = slab_of_page(page_of(run));
    if (unlikely(annotate_watch() != WATCH_NONE)) /* freed objects of its pages' last use */
        annotate_reuse(run, (size_t)g->pages << SL_PAGE_SHIFT);
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
        take_notified(h, id);
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
    heap_hold_id(h, id);
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

/* The magazines' trim, four times per decay tick (62 ms by default), and
 * a look at them at most once a clock step between (mag_trim.h), from the
 * owner's allocation slow paths (no thread: a single-threaded program
 * trims too): a clock read each (CLOCK_MONOTONIC_COARSE, vDSO). Once a
 * tick (250 ms), gcc on sqlite3.c peaked at 363.5-365.6 MiB in a 19 s
 * compile; four times, 358.8-361.4 (glibc 359.7; gcc-rss.md). */
#define MAG_TRIMS_PER_TICK 4
static void mag_tick(struct heap *h)
{
    uint64_t now = os_now_ms();
    if (now == h->look_ms) /* most slow paths: looked (or trimmed) this clock step */
        return;
    if (now - h->trim_ms >= decay_tick_ms(sl_opt.dirty_decay_ms, sl_opt.lazy_decay_ms) / MAG_TRIMS_PER_TICK)
        heap_mag_trim(h, now);
    else
        heap_mag_look(h, now);
}

void *heap_alloc_small_slow(size_t n, bool quiet)
{
    struct heap *h = tls_heap;
    unsigned cls = size_class_small(n);
    if (unlikely(cls == SL_CLASS_ZERO))
        return zero_alloc_slow(); /* a zero-size slot: no bytes, not sampled */
    if (h == &heap_empty) {
        DRAIN_RETRY(h, heap_get_slow());
        if (!h)
            return NULL;
    }
    heap_boost_check(h);
    h->trim_seen[cls].low = 0; /* malloc found its magazine empty: its low water is 0 */
    mag_tick(h);
    if (unlikely(prof_on && !h->prof_armed)) /* a heap made before profiling started */
        heap_sample_arm(h);
    struct slab *s;
    DRAIN_RETRY(s, refill(h, cls, true));
    huge_growth();
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    void **top = h->mag_top[cls];
    void *p = *top;
    if (p) { /* remote frees collected into the magazine */
        if (quiet)
            count_add(&h->mag_adj[cls], 1); /* out of the magazine, not by a counted pop (heap.h) */
        else if (unlikely(heap_pop_tick(h, mag_pops, cls)))
            return heap_alloc_sampled_slow(n, 0);
        mag_set(h, cls, top + 1);
    } else {
        p = s->free;
        if (!quiet && unlikely(heap_pop_tick(h, slab_pops, cls)))
            return heap_alloc_sampled_slow(n, 1);
        slab_pop_owned(s, p, (void **)p);
    }
    if (quiet)
        count_add(&h->counts.alloc[cls], 1);
    *mag_cookie(p) = 0;
    return p;
}

void *heap_alloc_small_quiet(size_t n)
{
    struct heap *h = tls_heap;
    size_t cls = size_class_small(n);
    void *p = h->mag_first[cls];
    if (p) {
        mag_set(h, cls, h->mag_top[cls] + 1);
        count_add(&h->mag_adj[cls], 1);
    } else {
        struct slab *s = h->cur[cls];
        if (!(p = s->free))
            return heap_alloc_small_slow(n, true);
        slab_pop_owned(s, p, (void **)p);
    }
    count_add(&h->counts.alloc[cls], 1);
    *mag_cookie(p) = 0;
    return p;
}

/* ---- medium runs --------------------------------------------------------- */

#define RUN_R8(b)                                                                                          \
    HEAP_RUN_ROUND(b), HEAP_RUN_ROUND(b + 1), HEAP_RUN_ROUND(b + 2), HEAP_RUN_ROUND(b + 3), HEAP_RUN_ROUND(b + 4), \
        HEAP_RUN_ROUND(b + 5), HEAP_RUN_ROUND(b + 6), HEAP_RUN_ROUND(b + 7)
const uint8_t heap_run_pages_lut[PCACHE_MAX_PAGES + 1] = { RUN_R8(0),  RUN_R8(8),  RUN_R8(16), RUN_R8(24), RUN_R8(32),
                                                           RUN_R8(40), RUN_R8(48), RUN_R8(56), HEAP_RUN_ROUND(64) };
_Static_assert(PCACHE_MAX_PAGES == 64, "heap_run_pages_lut lists 0..64");
#undef RUN_R8

/* heap_alloc_run past the page cache's stacks: a heap made, the run
 * taken from the shared heap (aligned, or refilled), marked live. */
static sl_noinline void *alloc_run_slow(size_t size, size_t align, bool *clean)
{
    struct heap *h = heap_get();
    if (!h)
        return NULL;
    heap_boost_check(h);
    mag_tick(h);
    size_t align_pages = align > SL_PAGE ? align >> SL_PAGE_SHIFT : 1;
    void *r;
    DRAIN_RETRY(r, page_alloc(&h->room->pcache, PB_RUN, heap_run_pages(size), align_pages, PG_RUN, clean));
    huge_growth();
    if (!r)
        return NULL;
    __atomic_store_n(&page_of(r)->run.req, size, __ATOMIC_RELAXED); /* live (run_live) */
    stat_add(tls_heap->stats, STAT_alloc_medium, 1);
    return r;
}

/* heap_alloc_run when the newest parked run of its length held another
 * page count (or there is none): the rest of the page cache (page.h,
 * page_cache_pop_run_slow), else the shared heap. */
static sl_noinline void *alloc_run_cached(struct heap *h, size_t size, size_t n, size_t q, bool *clean)
{
    void *r = n <= PCACHE_MAX_PAGES ? page_cache_pop_run_slow(&h->room->pcache, (unsigned)n, (unsigned)q) : NULL;
    if (!r)
        return alloc_run_slow(size, SL_PAGE, clean);
    if (clean)
        *clean = false; /* a parked run is dirty */
    __atomic_store_n(&page_of(r)->run.req, size, __ATOMIC_RELAXED); /* live (run_live) */
    stat_add(h->stats, STAT_alloc_medium, 1);
    return r;
}

/* The fast path pops the page cache (the newest run of its length, if
 * it held a request of its page count) and marks the run live, with no
 * frame: anything else is the slow paths', called last (with the live
 * mark after the call, bench_sizes 0.5 4 less 0.25 4 ran 66 instructions
 * a replacement in this function, 58.7 without). */
void *heap_alloc_run(size_t size, size_t align, bool *clean)
{
    struct heap *h = tls_heap;
    if (unlikely(h == &heap_empty || align > SL_PAGE))
        return alloc_run_slow(size, align, clean);
    size_t q = align_up(size, SL_PAGE) >> SL_PAGE_SHIFT, n = heap_run_pages(size);
    void *r = page_cache_pop_run(&h->room->pcache, n, q);
    if (!r)
        return alloc_run_cached(h, size, n, q, clean);
    if (clean)
        *clean = false; /* a parked run is dirty */
    __atomic_store_n(&page_of(r)->run.req, size, __ATOMIC_RELAXED); /* live (run_live) */
    stat_add(h->stats, STAT_alloc_medium, 1);
    return r;
}

size_t heap_usable_size(void *p)
{
    struct page *head = page_head(page_of(p));
    if (head->h.kind == PG_RUN) {
        size_t req = __atomic_load_n(&head->run.req, __ATOMIC_RELAXED);
        if (unlikely(head->run.sampled) && req <= SL_SMALL_MAX) /* a sampled small block: as its class */
            return class_size[size_class(req)];
        return (size_t)head->h.npages << SL_PAGE_SHIFT;
    }
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

