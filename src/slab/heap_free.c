/* heap_free.c — the free slow paths of the slab layer: past the magazine
 * (full, idle, growing), a medium run's free, a free by a thread that does
 * not own the object (batched, or at once), and the reports of misuse. The
 * free fast path is heap.h's heap_free_block_tagged; which state a freed
 * object can be in, and what catches a second free in each, is
 * free_state.c's.
 */
#define _GNU_SOURCE
#include "heap_free.h"

#include <string.h>

#include "../base/annotate.h"
#include "../base/events.h"
#include "../base/fatal.h"
#include "../os/os.h"
#include "../prof/prof.h"
#include "heap_lists.h"

/* An empty slab s on the partial list goes back to the page layer unless
 * the list is short: one empty slab stays as a spare, so a cache that
 * oscillates around a slab boundary does not rebuild a slab on every
 * other call; after a bulk free, up to SLAB_SPARE_BYTES of its cache's
 * slabs do, so a batch that empties whole slabs does not rebuild them when
 * as many objects are allocated again (one by one, the magazine keeps a
 * slab from emptying). Spares go back with the other empty slabs at a
 * thread's exit, sl_purge and a watermark boost (heaps.c heap_reclaim_id). */
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
        slab_release(h, s, &h->room->pcache);
}

/* A free of p, a malloc-class object start, by a thread that does not own
 * its slab: its second word gets the cookie, the mark that the owner's
 * collect checks (heap.h). Written, not read: the object's line is
 * usually in its owner's cache, and a store waits for it in the store
 * buffer where a load would stall the free. */
static void remote_mark(void *p) { *mag_cookie(p) = __atomic_load_n(&heap_cookie, __ATOMIC_RELAXED); }

/* The request size of the run whose head is pg, left 0 (not live): one
 * of two frees racing on two threads gets it, the other 0. An exchange, not
 * a load and a store, while the program may have threads: the store would
 * let two racing frees both pass, and the run would be handed out twice.
 * Its cost: on x86-64 a locked instruction waits for every store before
 * it, and the program's last stores are usually to the cold lines of the
 * run it just got (perf, bench_sizes 4 4: 35% of the program's samples
 * on the instruction after it). Before the program's first thread
 * (os_single_threaded) no free can race this one, nor can a thread start
 * during it (only this thread could start one), so a load and a store do:
 * bench_sizes 1 4 (32-256 KiB) took 0.0669 s of CPU with the exchange,
 * 0.0597 without (medians of 11 interleaved runs;
 * docs/benchmarks/sizes.md). */
sl_inline size_t run_take(struct page *pg)
{
    if (likely(os_single_threaded())) {
        size_t req = __atomic_load_n(&pg->run.req, __ATOMIC_RELAXED);
        __atomic_store_n(&pg->run.req, 0, __ATOMIC_RELAXED);
        return req;
    }
    return __atomic_exchange_n(&pg->run.req, 0, __ATOMIC_RELAXED);
}

/* run_free's other cases (req: what run_take took): a double free, a
 * sampled run, no heap, no room in the page cache. */
static sl_noinline void run_free_slow(void *p, struct page *pg, struct heap *h, size_t req)
{
    if (!req)
        heap_bad_free(p, (uintptr_t)block_of(p) | PM_BLOCK, "free");
    run_note_request(pg, req);
    bool park = true;
    if (unlikely(pg->run.sampled)) { /* only its free writes it now: run_take's winner */
        pg->run.sampled = false;
        prof_free(p);
        h = tls_heap; /* prof_free may have made this thread's heap */
        /* a sampled small object's pages go back to the page heap, not
         * to the page cache: parked there they would fill the cache with
         * runs that no medium malloc asked for (bench_sizes' 4-32 KiB
         * band's peak RSS: 20.3 MiB unprofiled, 22.9 profiled and parked,
         * 20.9 not parked; bench_mixed 148.9, 154.5, 149.4) */
        park = req > SL_SMALL_MAX;
        if (likely(h != &heap_empty) && park && page_cache_push_run(&h->room->pcache, p, pg)) {
            stat_add(h->stats, STAT_free_medium, 1);
            return;
        }
    }
    heap_count(h, STAT_free_medium, 1);
    page_free(h == &heap_empty || !park ? NULL : &h->room->pcache, p);
}

/* Free of the run whose head descriptor is pg, at p (run_head_at): live
 * while pg->run.req is nonzero (block.h); run_take lets one of two racing
 * frees through, and a head that is not live (a run parked in a page
 * cache) is a double free. h is this thread's heap. Inline, parking the
 * run in the page cache with no frame; the rest is run_free_slow's (a
 * free of 32-256 KiB objects, run_free called by heap_free_other_slow:
 * 83 instructions in the two, 70 inline; bench_sizes 0.5 4 less 0.25
 * 4, callgrind). */
sl_inline void run_free(void *p, struct page *pg, struct heap *h)
{
    size_t req = run_take(pg);
    if (unlikely(!req) || unlikely(pg->run.sampled) || unlikely(h == &heap_empty))
        return run_free_slow(p, pg, h, req);
    run_note_request(pg, req);
    if (!page_cache_push_run(&h->room->pcache, p, pg))
        return run_free_slow(p, pg, h, req);
    stat_add(h->stats, STAT_free_medium, 1);
}

/* Remote frees by threads that could get no heap (lock order: init.c). */
static SL_LOCK_DEFINE(heapless_lock, LOCK_HEAPLESS);
sl_lock *heapless_fork_lock(void) { return &heapless_lock; }

static void free_object(struct slab *s, void *p);

/* Free of a live slab object (validated) of any cache: by its owner with no
 * atomics, else into the remote-free bitmap (slab.h). A watched object
 * cache's objects all come here (cache/cache.c): told to the checker
 * after sluice's own writes into them (base/annotate.h). */
void heap_free_object(struct slab *s, void *p)
{
    unsigned id = s->cls;
    free_object(s, p);
    if (id >= SL_NCLASSES && unlikely(annotate_watch() != WATCH_NONE))
        annotate_pool_free(&slab_geom[id], p, slab_geom[id].size);
}

static void free_object(struct slab *s, void *p)
{
    struct heap *h = tls_heap;
    /* a thread that only frees (a consumer) gets a heap too, so its counts
     * stay thread-local instead of contending on a global atomic */
    if (h == &heap_empty && heap_get_quiet(ld_relaxed(page_tag((uintptr_t)p))))
        h = tls_heap;
    if (unlikely(__atomic_load_n(&s->h.prof, __ATOMIC_RELAXED))) /* an object cache's slab with samples */
        prof_free(p);
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
    heap_count_id(h, &h->counts.free[s->cls], 1);
    heap_count_id(h, &h->counts.remote[s->cls], 1);
    if (s->cls < SL_NCLASSES) {
        heap_free_hint_check(p, s);
        remote_mark(p);
    }
    if (h == &heap_empty) { /* no heap, so no slot for the remote lock: a lock fork takes */
        lock_acquire(&heapless_lock);
        bool was_full = slab_free_remote(s, p, NULL);
        lock_release(&heapless_lock);
        if (was_full && heap_wake(owner, s))
            page_wake_reclaimer();
        return;
    }
    if (slab_free_remote(s, p, &h->remote_held) && heap_wake(owner, s))
        page_wake_reclaimer();
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
    uint32_t now = (uint32_t)heap_count_alloc(h, cls);
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

/* A burst that mag_grow could not grow the magazine for (it is at its
 * room): the half on top goes back to the slabs at once (as many objects
 * as single frees past it would have put there), and the frees that
 * follow push on the fast path again instead of each coming here. Until a
 * malloc ends the burst, every time it fills. mstress, whose threads free
 * all they hold before they exit: ~90 instructions a free past the full
 * magazine, 38 an object spilled (callgrind, mstress 2 50 25: sluice's
 * 77.3 M -> 74.1 M; docs/benchmarks/thread-exit.md). */
static void mag_spill(struct heap *h, unsigned cls)
{
    void **top = h->mag_top[cls], **stop = top + (mag_depth(h, cls) + 1) / 2;
    mag_set(h, cls, stop);
    heap_mag_to_slabs(h, cls, top, stop);
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
    if (h->mag_burst[cls] >= MAG_BURST) { /* at its room: mag_grow's other refusal */
        mag_spill(h, cls);
        return heap_mag_push(h, p, cls);
    }
    _Atomic uint64_t *w = bitmap_word((uintptr_t)p);
    *mag_cookie(p) = h->cookie; /* free, on its slab (free_state.c) */
    heap_free_owned(h, slab_of_page(page_head(page_of(p))), p, (void **)p, w, ld_relaxed(w) & ~bitmap_bit((uintptr_t)p));
}

void heap_free_block_now(void *p)
{
    uintptr_t a = (uintptr_t)p;
    struct page *run = run_head_at(a);
    if (run)
        return run_free(p, run, tls_heap);
    if (!bitmap_test(a)) {
        if (sl_events.checked_free) /* checked mode: its pointers have no live bit */
            return sl_events.checked_free(p);
        heap_bad_free(p, (uintptr_t)block_of(p) | PM_BLOCK, "free");
    }
    heap_free_object(slab_of_page(page_head(page_of(p))), p);
}

/* free_remote_batched's free of p whose second word holds the cookie:
 * reported if free_state_find confirms it, else batched. Out of line, so
 * that the common path makes no call but its last (no frame). */
static sl_cold void free_remote_hinted(struct heap *h, void *p, uint32_t t)
{
    heap_free_hint_check(p, slab_of_page(page_of((void *)tag_slab_head(p, t))));
    remote_mark(p);
    remote_batch_add(h, p, t);
}

/* A free of another heap's malloc-class object (page tag t, h this
 * thread's heap): batched, unread but for the double-free hint (the
 * owner's bitmap line is not read: whether it is live, the owner checks
 * when it takes it). It must be an object start of its slab (the page tag
 * gives both; p is 16-byte aligned: the fast path's pagemap test), so the
 * mark lands in no other object (past the last object,
 * in the slab's tail, it lands in no object at all). */
sl_inline void free_remote_batched(struct heap *h, void *p, uint32_t t)
{
    if (unlikely(!class_grain_start(t & ((1u << TAG_PAGE_SHIFT) - 1), tag_slab_grain(p, t))))
        heap_bad_free(p, pagemap_get((uintptr_t)p), "free");
    uint64_t cookie = h->cookie; /* heap_cookie: h is a heap */
    if (unlikely(*mag_cookie(p) == cookie))
        return free_remote_hinted(h, p, t);
    *mag_cookie(p) = cookie; /* remote_mark, the cookie already loaded */
    remote_batch_add(h, p, t);
}

/* heap_free_block_slow's cases but a run's and the batched one (below): h
 * is this thread's heap, t p's page tag (nonzero). */
static sl_noinline void free_block_other(void *p, struct heap *h, uint32_t t)
{
    if (!sl_events.checked_free && h == &heap_empty && heap_get_quiet(t))
        /* maybe an orphan taken over whole: p may be its own; anew with
         * this heap (another heap's object: batched; else not back here
         * with heap_empty, so freed below) */
        return heap_free_block_slow(p, t ^ tls_heap->tag);
    heap_free_block_now(p);
}

/* The free slow path: what free's fast path (heap.h) did not take, by what
 * p is:
 *   - a medium run (no malloc slab's page tag, a run's head): run_free;
 *   - another heap's malloc-class object: free_remote_batched (a thread
 *     that only frees, a consumer, gets a heap for it; checked mode frees
 *     at once);
 *   - anything else, validated first (heap_free_block_now): an object of
 *     this heap's slab past a full magazine or of a user cache, by its
 *     owner or unbatched by another thread; checked mode's block; a bad
 *     pointer, reported. */
void heap_free_block_slow(void *p, uint32_t x)
{
    struct heap *h = tls_heap; /* heap_free_other_slow, below, is given it */
    uint32_t t = x ^ h->tag; /* the page tag (tag_relative undone) */
    if (!t) { /* no malloc slab's page: a medium run's head (straight to
               * run_free: 273.6 -> 260.3 instructions a replacement of
               * 32-256 KiB objects, bench_sizes 0.5 4 less 0.25 4), or
               * validated */
        struct page *run = run_head_at((uintptr_t)p);
        if (likely(run))
            return run_free(p, run, h);
        return heap_free_block_now(p);
    }
    /* the common case of the others, with no call but its last: another
     * heap's object, this thread with a heap */
    if (x >= TAG_MINE_LIMIT && h != &heap_empty && !sl_events.checked_free)
        return free_remote_batched(h, p, t);
    free_block_other(p, h, t);
}

void heap_free_other_slow(void *p, uint32_t x, struct heap *h)
{
    uint32_t t = x ^ h->tag;
    if (!t && likely(h != &heap_empty)) {
        /* no malloc slab's page, this thread with a heap (one without
         * gets it in free_block_other): a medium run's head, straight to
         * run_free, or validated. A replacement of 32-256 KiB objects ran
         * 289.9 instructions by way of free_block_other and
         * heap_free_block_now, 270.8 this way (callgrind, bench_sizes 0.5
         * 4 less 0.25 4). */
        struct page *run = run_head_at((uintptr_t)p);
        if (likely(run))
            return run_free(p, run, h);
        return heap_free_block_now(p);
    }
    /* the fast path's h: no TLS load; heap_empty's cookie is 0, and the
     * batched free loads h's cookie anyway */
    if (t && h->cookie && !sl_events.checked_free)
        return free_remote_batched(h, p, t);
    free_block_other(p, h, t);
}

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
