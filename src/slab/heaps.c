/* heaps.c — the registry of thread heaps: heap creation, thread exit,
 * orphans (heaps of exited threads) and their adoption, process-wide
 * collection (the drains, the statistics' report), fork. The user cache
 * ids (open, shrink, close) are heap_ids.c's, under the same lock.
 *
 * heaps_lock guards the list of all heaps, the orphan list, the contents of
 * orphan heaps, slab_geom of user ids, and every heap's slots of a user id
 * while a cache-wide operation (shrink, close) or a reclaim runs. Order:
 * heaps_lock -> page heap lock -> meta lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>

#include "../base/drain.h"
#include "../base/events.h"
#include "../base/lock.h"
#include "../meta/meta.h"
#include "../options/options.h"
#include "../prof/prof.h"
#include "heap_lists.h"
#include "heap_free.h"

static SL_LOCK_DEFINE(heaps_lock, LOCK_HEAPS);
static struct heap *all_heaps, *orphans, *orphans_end; /* orphans_end: always NULL */
static _Atomic size_t norphans;
static pthread_key_t exit_key;
static _Atomic int exit_key_ready;
static uint32_t heap_seq;     /* heaps made so far: the last heap's tag >> TAG_HEAP_SHIFT */

/* Take heaps_lock for work that may free pages. A page free can start the
 * reclaimer thread, and pthread_create allocates; with heaps_lock held, an
 * allocation by a thread that has no heap yet would wait for heaps_lock in
 * heap_get_slow. So the thread gets its heap first. */
void heaps_lock_for_freeing(void)
{
    heap_get();
    lock_acquire(&heaps_lock);
}

/* Is h's slot for id live: a malloc class, or a user id of an open cache? */
bool heap_id_live(struct heap *h, unsigned id)
{
    return id < SL_NCLASSES || (heap_key(h, id) && heap_key(h, id) == slab_geom[id].key);
}

/* Collect remote frees on s; release it if it is empty (and not current). */
static void collect_or_release(struct heap *h, struct slab *s, struct page_cache *pc, size_t *released)
{
    if (h->fork_orphan)
        slab_repair(s);
    if (heap_slab_collect(h, s, NULL))
        heap_count(h, STAT_remote_collect, 1);
    if (!s->used && s->state == SLAB_PARTIAL) {
        if (released)
            *released += (size_t)slab_geom[s->cls].pages << SL_PAGE_SHIFT;
        slab_release(h, s, pc);
    }
}

/* Collect what an owner can without blocking for cache id: woken and
 * notified slabs, remote frees on every slab; empty slabs are released.
 * With keep_current false the current slab joins the partial list first
 * (a thread leaving, or a shrink). Caller holds heaps_lock. */
void heap_reclaim_id(struct heap *h, unsigned id, bool keep_current, struct page_cache *pc, size_t *released)
{
    if (id >= SL_NCLASSES)
        take_woken(h, id);
    struct slab *s = *heap_cur(h, id);
    if (s != &slab_none) {
        if (heap_slab_collect(h, s, NULL))
            heap_count(h, STAT_remote_collect, 1);
        if (!keep_current) {
            *heap_cur(h, id) = &slab_none;
            partial_push(h, s);
        }
    }
    for (s = *heap_partial(h, id); s;) {
        struct slab *next = s->next;
        collect_or_release(h, s, pc, released);
        s = next;
    }
}

/* Does h hold no slab of cache id (current, partial, a user cache's full)? */
static bool id_empty(struct heap *h, unsigned id)
{
    return *heap_cur(h, id) == &slab_none && !*heap_partial(h, id) && (id < SL_NCLASSES || !*heap_full(h, id));
}

/* Give back h's empty slabs (all but its current ones with keep_current);
 * pages freed go to pc (may be NULL). Its page cache is DRAIN_PAGE_CACHES'.
 * Only the ids h may hold slabs of (heap.h ids_held; the notified slabs
 * are pushed, and so marked, first); an id left with none, or whose slots
 * are a closed cache's, is unmarked. So a thread's exit costs what it used
 * (callgrind, mleak 5: 11.6 k instructions an exit over all 512 ids and
 * 72 magazines, 0.9 k now; docs/benchmarks/thread-exit.md). */
static void heap_reclaim(struct heap *h, bool keep_current, struct page_cache *pc)
{
    for (unsigned c = 0; c < SL_NCLASSES; c++) /* every class: a FULL slab is on no list, so its id may be unmarked */
        take_notified(h, c);
    for (unsigned w = 0; w < SL_NIDS / 64; w++)
        for (uint64_t bits = h->ids_held[w]; bits; bits &= bits - 1) {
            unsigned id = w * 64 + (unsigned)__builtin_ctzll(bits);
            if (heap_id_live(h, id))
                heap_reclaim_id(h, id, keep_current, pc, NULL);
            if (!heap_id_live(h, id) || id_empty(h, id))
                h->ids_held[w] &= ~((uint64_t)1 << (id % 64));
        }
}

bool orphan_adopt(struct heap *h, unsigned id)
{
    if (!ld_relaxed(&norphans) || !lock_try(&heaps_lock))
        return false;
    bool got = false;
    for (struct heap *o = orphans; o && !got; o = o->orphan_next) {
        if (id < SL_NCLASSES)
            take_notified(o, id);
        else if (heap_key(o, id) == heap_key(h, id))
            take_woken(o, id);
        else
            continue;
        struct slab *s;
        while ((s = *heap_partial(o, id))) {
            /* popped by the head alone: a fork orphan's prev links may be stale */
            *heap_partial(o, id) = s->next;
            if (s->next)
                s->next->prev = NULL;
            s->next = s->prev = NULL;
            if (o->fork_orphan)
                slab_repair(s);
            heap_slab_collect(o, s, NULL); /* empty: flushed when o was orphaned */
            if (!s->used) {
                s->state = 0;
                slab_own(s, NULL);
                page_free(NULL, slab_base(s));
                continue;
            }
            slab_own(s, h);
            partial_push(h, s);
            got = true;
        }
    }
    lock_release(&heaps_lock);
    return got;
}

/* ---- thread heaps ------------------------------------------------------ */

/* heap_cookie: the kernel's random bytes for this process (AT_RANDOM) and
 * the library's load address, mixed (splitmix64's finaliser); odd, so
 * never 0, the word malloc leaves in an object it pops. */
static uint64_t cookie_make(void)
{
    const void *r = (const void *)getauxval(AT_RANDOM); /* 16 bytes, not aligned */
    uint64_t x = 0, y = 0;
    if (r) {
        memcpy(&x, r, 8);
        memcpy(&y, (const char *)r + 8, 8);
    }
    x ^= y ^ (uintptr_t)&heap_cookie;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return (x ^ (x >> 31)) | 1;
}

static void thread_exit_cb(void *arg)
{
    struct heap *h = arg;
    if (h && h == tls_heap)
        heap_thread_exit(h);
}

/* The orphan a thread with no heap takes over whole: the one whose slabs
 * hold the object it is freeing (want: that object's page tag, 0 if none),
 * else the last orphaned; never a fork orphan (its slabs are repaired and
 * adopted one by one). A thread handed its predecessor's objects (a
 * worker that replaces one that exits, larson's threads) then frees them
 * into its own heap, where its mallocs reuse their room, instead of into
 * the heap another thread took over: there they wait as remote frees
 * while this thread fills a second heap's worth of slabs. Under heaps_lock;
 * returns the link that points at it, or at NULL. */
static struct heap **orphan_pick(uint32_t want)
{
    struct heap **first = &orphans_end;
    for (struct heap **it = &orphans; *it; it = &(*it)->orphan_next) {
        if ((*it)->fork_orphan)
            continue;
        if (want && (*it)->tag == (want & ~(TAG_MINE_LIMIT - 1)))
            return it;
        if (!*first)
            first = it;
        if (!want)
            break;
    }
    return first;
}

struct heap *heap_get_slow(void) { return heap_get_want(0); }

struct heap *heap_get_want(uint32_t want)
{
    if (tls_heap != &heap_empty)
        return tls_heap;
    options_init(); /* the first allocation may come before the constructor */
    struct heap *h = NULL;
    lock_acquire(&heaps_lock);
    if (!slab_geom[0].size)
        slab_geom_init();
    if (!heap_cookie)
        __atomic_store_n(&heap_cookie, cookie_make(), __ATOMIC_RELAXED);
    if (!atomic_load_explicit(&exit_key_ready, memory_order_relaxed)) {
        if (pthread_key_create(&exit_key, thread_exit_cb) == 0)
            atomic_store_explicit(&exit_key_ready, 1, memory_order_relaxed);
    }
    struct heap **it = orphan_pick(want);
    if (*it) {
        h = *it;
        *it = h->orphan_next;
        h->orphan_next = NULL;
        h->orphan = false;
        st_relaxed(&norphans, ld_relaxed(&norphans) - 1);
        stat_add(h->stats, STAT_heap_reuse, 1);
    }
    lock_release(&heaps_lock);
    if (!h) {
        h = meta_alloc(sizeof *h);
        if (!h)
            return NULL;
        for (unsigned id = 0; id <= SL_CLASS_ZERO; id++)
            h->cur[id] = &slab_none;
        for (unsigned c = 0; c < SL_NCLASSES; c++)
            mag_set(h, c, MAG_IDLE);
        mag_set(h, SL_CLASS_ZERO, mag_none);
        atomic_store_explicit(&h->ids, &ids_none, memory_order_relaxed);
        page_cache_init(&h->pcache, h->stats);
        h->boost_seen = ld_relaxed(&page_boost_gen_word);
        stat_add(h->stats, STAT_heap_new, 1);
        lock_acquire(&heaps_lock);
        /* a tag has 21 bits of sequence: 2 M heap records (over 50 GB of
         * them: meta_alloc fails long before on most machines), made only
         * while no exited thread's heap is free to take over */
        if (heap_seq + 1 >= HEAP_TAG_NONE >> TAG_HEAP_SHIFT) {
            lock_release(&heaps_lock);
            meta_free(h, sizeof *h);
            errno = ENOMEM;
            return NULL;
        }
        if (prof_on)
            heap_sample_arm(h); /* no owner yet */
        h->tag = ++heap_seq << TAG_HEAP_SHIFT;
        h->cookie = heap_cookie;
        h->all_next = all_heaps;
        all_heaps = h;
        lock_release(&heaps_lock);
    }
    tls_heap = h;
    if (atomic_load_explicit(&exit_key_ready, memory_order_relaxed))
        pthread_setspecific(exit_key, h);
    return h;
}

struct heap *heap_get_quiet(uint32_t want)
{
    int saved = errno;
    struct heap *h = heap_get_want(want);
    errno = saved;
    return h;
}

void heaps_sample_arm(void)
{
    if (tls_heap != &heap_empty && !tls_heap->prof_armed)
        heap_sample_arm(tls_heap);
}

void heap_thread_exit(struct heap *h)
{
    heap_pops_settle(h); /* a rewrite a signal handler's longjmp left */
    remote_batch_flush(h);
    heap_mag_flush(h);
    lock_acquire(&heaps_lock);
    heap_reclaim(h, false, &h->pcache);
    page_cache_drain(&h->pcache);
    tls_heap = &heap_empty;
    h->orphan = true;
    h->orphan_next = orphans;
    orphans = h;
    st_relaxed(&norphans, ld_relaxed(&norphans) + 1);
    stat_add(h->stats, STAT_heap_orphan, 1);
    lock_release(&heaps_lock);
}

void heap_boost_respond_slow(struct heap *h)
{
    h->boost_seen = ld_relaxed(&page_boost_gen_word);
    drain_all(DRAIN_THREAD, 0);
    stat_add(h->stats, STAT_boost_drains, 1);
    if (sl_events.boost_in_thread)
        sl_events.boost_in_thread();
}

/* ---- drains (base/drain.h) ------------------------------------------------ */

size_t heaps_sum(size_t (*fn)(struct heap *h))
{
    size_t n = 0;
    lock_acquire(&heaps_lock);
    for (struct heap *h = all_heaps; h; h = h->all_next)
        n += fn(h);
    lock_release(&heaps_lock);
    return n;
}

/* Magazines: this thread's go back to their slabs; for sl_purge and a
 * failed allocation, every other live thread is asked to give back its
 * own caches on its next allocation slow path (only an owner touches its
 * magazines and page cache; the watermark boost asks on its own pace);
 * exited threads' were emptied at their exit. */
static void drain_magazines(enum drain_depth depth, size_t want)
{
    (void)want;
    if (tls_heap != &heap_empty)
        heap_mag_flush(tls_heap);
    if (depth & (DRAIN_PURGE | DRAIN_ENOMEM))
        page_boost_ask_owners();
}
static size_t magazine_bytes(struct heap *h)
{
    size_t n = 0;
    for (unsigned c = 0; c < SL_NCLASSES; c++)
        n += (size_t)mag_count(h, c) * class_size[c];
    return n;
}
static size_t magazines_held(void) { return heaps_sum(magazine_bytes); }
DRAIN_REGISTER(magazines_drain, .name = "magazines", .order = DRAIN_MAGAZINES, .depths = DRAIN_ALL_DEPTHS,
               .run = drain_magazines, .held = magazines_held);

/* Empty and spare slabs: this thread's (its current ones stay), and every
 * exited thread's heap. */
static void drain_slabs(enum drain_depth depth, size_t want)
{
    (void)want;
    bool mine = tls_heap != &heap_empty, orphaned = depth != DRAIN_THREAD && ld_relaxed(&norphans);
    if (!mine && !orphaned)
        return;
    lock_acquire(&heaps_lock);
    if (mine)
        heap_reclaim(tls_heap, true, NULL);
    if (orphaned)
        for (struct heap *o = orphans; o; o = o->orphan_next)
            heap_reclaim(o, true, NULL);
    lock_release(&heaps_lock);
}
DRAIN_REGISTER(slabs_drain, .name = "slabs", .order = DRAIN_SLABS, .depths = DRAIN_ALL_DEPTHS, .run = drain_slabs,
               .held = NULL);

/* Per-thread page caches: this thread's, and exited threads'; live
 * threads give theirs back when asked (drain_magazines asks). */
static void drain_page_caches(enum drain_depth depth, size_t want)
{
    (void)want;
    if (tls_heap != &heap_empty)
        page_cache_drain(&tls_heap->pcache);
    if (depth == DRAIN_THREAD || !ld_relaxed(&norphans))
        return;
    lock_acquire(&heaps_lock);
    for (struct heap *o = orphans; o; o = o->orphan_next)
        page_cache_drain(&o->pcache);
    lock_release(&heaps_lock);
}
static size_t page_cache_bytes(struct heap *h)
{
    return (size_t)__atomic_load_n(&h->pcache.pages, __ATOMIC_RELAXED) << SL_PAGE_SHIFT;
}
static size_t page_caches_held(void) { return heaps_sum(page_cache_bytes); }
DRAIN_REGISTER(page_caches_drain, .name = "page_caches", .order = DRAIN_PAGE_CACHES, .depths = DRAIN_ALL_DEPTHS,
               .run = drain_page_caches, .held = page_caches_held);

bool heaps_batch_holds(const void *p, struct heap *self)
{
    /* only asked after a hint of a double free; a thread that holds the
     * lock already (a free from inside a reclaim) is not kept waiting */
    if (lock_held_by_self(&heaps_lock) || !lock_try(&heaps_lock))
        return false;
    bool found = false;
    for (struct heap *h = all_heaps; h && !found; h = h->all_next)
        found = h != self && heap_batch_holds(h, p);
    lock_release(&heaps_lock);
    return found;
}

/* The totals of h's per-cache counts (heap.h) into the counters
 * (free_remote is counted apart: when a remote free reaches the owner,
 * which a batched one does at the batch's flush). */
static void add_counts(struct heap *h, uint64_t c[STAT_COUNT])
{
    for (unsigned id = 0; id < heap_ids_hi; id++) {
        c[STAT_alloc_small] += heap_count_alloc(h, id);
        c[STAT_free_small] += heap_count_free(h, id) - ld_relaxed(&h->counts.remote[id]);
    }
}

/* The thread heaps' report to the statistics (stats.h): their counters. */
static void heaps_report(uint64_t c[STAT_COUNT], uint64_t g[GAUGE_COUNT])
{
    (void)g;
    lock_acquire(&heaps_lock);
    for (struct heap *h = all_heaps; h; h = h->all_next) {
        for (int i = 0; i < STAT_COUNT; i++)
            c[i] += ld_relaxed(&h->stats[i]);
        add_counts(h, c);
    }
    add_counts(&heap_empty, c);
    lock_release(&heaps_lock);
}
STAT_SOURCE(heaps_source, heaps_report);

void heaps_lock_for_check(void) { lock_acquire(&heaps_lock); }
void heaps_unlock_for_check(void) { lock_release(&heaps_lock); }
struct heap *heaps_all(void) { return all_heaps; }
struct heap *heaps_orphans(void) { return orphans; }
static bool forked_with_threads;
bool heaps_forked(void) { return forked_with_threads; }

/* ---- fork ---------------------------------------------------------------- */

sl_lock *heap_fork_lock(void) { return &heaps_lock; }

/* In the child only this thread survives: every other heap is orphaned so
 * its slabs are adopted or reclaimed instead of leaking. */
void heap_fork_child(void)
{
    for (struct heap *h = all_heaps; h; h = h->all_next) {
        heap_pops_settle(h);
        if (h == tls_heap || h->orphan)
            continue;
        forked_with_threads = true;
        h->fork_orphan = true;
        /* a slab remote lock its thread held (or was taking): freed, unless
         * this thread holds it (a signal handler forked inside it: the
         * thread releases it when the handler returns) */
        struct slab *held = h->remote_held;
        if (held && held != tls_heap->remote_held && slab_remote_unstick(held))
            heap_wake(atomic_load_explicit(&held->owner, memory_order_relaxed), held);
        h->remote_held = NULL;
        page_cache_forget(&h->pcache); /* it may be mid-push */
        /* its magazines' objects are live in the bitmap and on no free
         * list: with their bits cleared, slab_repair puts them back on
         * their slabs' free lists (an object pushed but not yet counted
         * in by the top stays live: lost) */
        for (unsigned c = 0; c < SL_NCLASSES; c++) {
            count_add(&h->mag_adj[c], mag_count(h, c)); /* out, not by malloc (heap.h) */
            for (void **top = h->mag_top[c]; *top; top++) {
                *mag_cookie(*top) = 0;
                bitmap_clear_owner((uintptr_t)*top);
            }
            mag_set(h, c, MAG_IDLE);
        }
        memset(h->mags_held, 0, sizeof h->mags_held);
        h->orphan = true;
        h->orphan_next = orphans;
        orphans = h;
        st_relaxed(&norphans, ld_relaxed(&norphans) + 1);
    }
    /* their batched remote frees: objects still live in other slabs */
    for (struct heap *h = all_heaps; h; h = h->all_next)
        if (h->fork_orphan && h->rbatch_n)
            remote_batch_flush(h);
}
