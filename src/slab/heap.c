/* heap.c — thread heaps: slow paths of small malloc and free, slab states,
 * medium runs, thread exit, orphan adoption, fork. See heap.h and slab.h.
 *
 * Locks: heaps_lock guards the list of all heaps, the orphan list, and the
 * contents of orphan heaps (whoever holds it acts as their owner). Order:
 * heaps_lock -> page heap lock -> meta lock.
 */
#define _GNU_SOURCE
#include "heap.h"

#include <errno.h>
#include <pthread.h>

#include "../base/fatal.h"
#include "../base/lock.h"
#include "../meta/meta.h"

/* The dummy current slab of every class until a thread has a real one. */
static struct slab slab_none;
struct heap heap_empty = {
#define X(size, pages) &slab_none,
    .cur = { SL_SIZE_CLASSES(X) },
#undef X
};
__thread struct heap *tls_heap __attribute__((tls_model("initial-exec"))) = &heap_empty;

static sl_lock heaps_lock = SL_LOCK_INIT;
static struct heap *all_heaps, *orphans;
static _Atomic size_t norphans;
static pthread_key_t exit_key;
static _Atomic int exit_key_ready;

/* Count on this thread's heap, or globally (slow paths only) if it has none. */
static void count(struct heap *h, enum sl_stat id, uint64_t n)
{
    if (h != &heap_empty)
        stat_add(h->stats, id, n);
    else
        atomic_fetch_add_explicit(&stats_global[id], n, memory_order_relaxed);
}

/* ---- slab lists -------------------------------------------------------- */

static void partial_push(struct heap *h, struct slab *s)
{
    s->state = SLAB_PARTIAL;
    s->prev = NULL;
    s->next = h->partial[s->cls];
    if (s->next)
        s->next->prev = s;
    h->partial[s->cls] = s;
}

static void partial_unlink(struct heap *h, struct slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        h->partial[s->cls] = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

/* Give an empty slab back to the page layer. pc may be NULL (orphans). */
static void slab_release(struct heap *h, struct slab *s, struct page_cache *pc)
{
    if (s->state == SLAB_PARTIAL)
        partial_unlink(h, s);
    atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
    s->state = 0;
    count(h, STAT_slab_release, 1);
    page_free(pc, slab_base(s));
}

void heap_notify(struct heap *owner, struct slab *s)
{
    struct slab *old = atomic_load_explicit(&owner->notify, memory_order_relaxed);
    do {
        s->next = old;
    } while (!atomic_compare_exchange_weak_explicit(&owner->notify, &old, s, memory_order_release,
                                                    memory_order_relaxed));
}

/* Move the slabs that remote frees woke up back onto the partial lists. */
static void take_notified(struct heap *h)
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

/* An exhausted slab leaves the current position: it becomes FULL, unless
 * remote frees arrived meanwhile; then they are collected and it stays.
 * Returns true if s has free objects again. */
static bool retire_or_collect(struct heap *h, struct slab *s)
{
    for (;;) {
        uintptr_t expected = 0;
        /* release: the remote freer that clears the bit takes s->next over */
        if (atomic_compare_exchange_strong_explicit(&s->remote, &expected, SLAB_FULL_BIT, memory_order_release,
                                                    memory_order_relaxed) ||
            expected == SLAB_FULL_BIT) {
            s->state = SLAB_FULL;
            return false;
        }
        if (slab_collect(s)) {
            stat_add(h->stats, STAT_remote_collect, 1);
            return true;
        }
    }
}

/* ---- orphans ----------------------------------------------------------- */

/* Collect everything an owner can without blocking: notified slabs, remote
 * frees on every slab, empty slabs released, the page cache drained. With
 * keep_current false the current slabs go to the partial lists first (a
 * thread leaving). Owner, or heaps_lock for an orphan. */
static void heap_reclaim(struct heap *h, bool keep_current, struct page_cache *pc)
{
    take_notified(h);
    for (unsigned c = 0; c < SL_NCLASSES; c++) {
        struct slab *s = h->cur[c];
        if (s != &slab_none) {
            if (slab_collect(s))
                count(h, STAT_remote_collect, 1);
            if (!keep_current) {
                h->cur[c] = &slab_none;
                partial_push(h, s);
            }
        }
        for (s = h->partial[c]; s;) {
            struct slab *next = s->next;
            if (slab_collect(s))
                count(h, STAT_remote_collect, 1);
            if (!s->used)
                slab_release(h, s, pc);
            s = next;
        }
    }
    page_cache_drain(&h->pcache);
}

/* Adopt the partial slabs of class cls from an orphan heap. */
static bool orphan_adopt(struct heap *h, unsigned cls)
{
    if (!ld_relaxed(&norphans) || !lock_try(&heaps_lock))
        return false;
    bool got = false;
    for (struct heap *o = orphans; o && !got; o = o->orphan_next) {
        take_notified(o);
        struct slab *s;
        while ((s = o->partial[cls])) {
            partial_unlink(o, s);
            slab_collect(s);
            if (!s->used) {
                s->state = 0;
                atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
                page_free(NULL, slab_base(s));
                continue;
            }
            atomic_store_explicit(&s->owner, h, memory_order_relaxed);
            partial_push(h, s);
            got = true;
        }
    }
    lock_release(&heaps_lock);
    return got;
}

/* ---- thread heaps ------------------------------------------------------ */

static void thread_exit_cb(void *arg)
{
    struct heap *h = arg;
    if (h && h == tls_heap)
        heap_thread_exit(h);
}

struct heap *heap_get_slow(void)
{
    if (tls_heap != &heap_empty)
        return tls_heap;
    struct heap *h = NULL;
    lock_acquire(&heaps_lock);
    if (!atomic_load_explicit(&exit_key_ready, memory_order_relaxed)) {
        if (pthread_key_create(&exit_key, thread_exit_cb) == 0)
            atomic_store_explicit(&exit_key_ready, 1, memory_order_relaxed);
    }
    if (orphans) {
        h = orphans;
        orphans = h->orphan_next;
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
        for (unsigned c = 0; c < SL_NCLASSES; c++)
            h->cur[c] = &slab_none;
        h->pcache.stats = h->stats;
        stat_add(h->stats, STAT_heap_new, 1);
        lock_acquire(&heaps_lock);
        h->all_next = all_heaps;
        all_heaps = h;
        lock_release(&heaps_lock);
    }
    tls_heap = h;
    if (atomic_load_explicit(&exit_key_ready, memory_order_relaxed))
        pthread_setspecific(exit_key, h);
    return h;
}

void heap_thread_exit(struct heap *h)
{
    heap_reclaim(h, false, &h->pcache);
    tls_heap = &heap_empty;
    lock_acquire(&heaps_lock);
    h->orphan = true;
    h->orphan_next = orphans;
    orphans = h;
    st_relaxed(&norphans, ld_relaxed(&norphans) + 1);
    stat_add(h->stats, STAT_heap_orphan, 1);
    lock_release(&heaps_lock);
}

void heap_collect_all(void)
{
    if (tls_heap != &heap_empty)
        heap_reclaim(tls_heap, true, NULL);
    lock_acquire(&heaps_lock);
    for (struct heap *o = orphans; o; o = o->orphan_next)
        heap_reclaim(o, true, NULL);
    lock_release(&heaps_lock);
}

void heap_sum_stats(uint64_t out[STAT_COUNT])
{
    for (int i = 0; i < STAT_COUNT; i++)
        out[i] = ld_relaxed(&stats_global[i]);
    lock_acquire(&heaps_lock);
    for (struct heap *h = all_heaps; h; h = h->all_next)
        for (int i = 0; i < STAT_COUNT; i++)
            out[i] += ld_relaxed(&h->stats[i]);
    lock_release(&heaps_lock);
}

/* ---- small malloc slow path -------------------------------------------- */

static struct slab *slab_new(struct heap *h, unsigned cls)
{
    unsigned npages = class_pages[cls];
    void *run = page_alloc(&h->pcache, PB_SLAB, npages, 1, PG_SLAB);
    if (!run)
        return NULL;
    struct slab *s = slab_of_page(page_of(run));
    slab_init(s, h, cls, class_size[cls], npages);
    stat_add(h->stats, STAT_slab_new, 1);
    return s;
}

/* Make cur[cls] a slab with a non-empty free list, or NULL (ENOMEM). */
struct slab *heap_refill(struct heap *h, unsigned cls)
{
    struct slab *s = h->cur[cls];
    if (s != &slab_none) {
        if (s->free)
            return s;
        if (slab_collect(s)) {
            stat_add(h->stats, STAT_remote_collect, 1);
            return s;
        }
        if (slab_carve(s) || retire_or_collect(h, s))
            return s;
        h->cur[cls] = &slab_none;
    }
    take_notified(h);
    for (int round = 0; round < 2; round++) {
        while ((s = h->partial[cls])) {
            partial_unlink(h, s);
            s->state = SLAB_CURRENT;
            h->cur[cls] = s;
            if (slab_collect(s))
                stat_add(h->stats, STAT_remote_collect, 1);
            if (s->free || slab_carve(s) || retire_or_collect(h, s))
                return s;
            h->cur[cls] = &slab_none;
        }
        if (round == 0 && !orphan_adopt(h, cls))
            break;
    }
    s = slab_new(h, cls);
    if (!s)
        return NULL;
    h->cur[cls] = s;
    slab_carve(s);
    return s;
}

void *heap_alloc_small_slow(struct heap *h, unsigned cls)
{
    if (h == &heap_empty && !(h = heap_get_slow()))
        return NULL;
    struct slab *s = heap_refill(h, cls);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = s->free;
    s->free = *(void **)p;
    s->used++;
    bitmap_set_owner((uintptr_t)p);
    stat_add(h->stats, STAT_alloc_small, 1);
    return p;
}

/* ---- free slow paths --------------------------------------------------- */

/* The owner freed into s and its freelist had been empty, or s became empty. */
void heap_free_local_slow(struct heap *h, struct slab *s)
{
    if (s->state == SLAB_FULL) {
        uintptr_t expected = SLAB_FULL_BIT;
        if (atomic_compare_exchange_strong_explicit(&s->remote, &expected, 0, memory_order_relaxed,
                                                    memory_order_relaxed))
            partial_push(h, s);
        else
            s->state = SLAB_NOTIFY; /* a remote freer is pushing it to notify */
    }
    /* An empty slab goes back to the page layer unless it is the only
     * partial slab of its class: that one is kept as a spare, so a class
     * that oscillates around a slab boundary does not rebuild a slab on
     * every other call. */
    if (!s->used && s->state == SLAB_PARTIAL && (s->prev || s->next))
        slab_release(h, s, &h->pcache);
}

static void run_free(void *p)
{
    _Atomic uint64_t *w = bitmap_word((uintptr_t)p);
    uint64_t bit = bitmap_bit((uintptr_t)p);
    if (!(atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed) & bit))
        heap_bad_free(p, (uintptr_t)block_of(p) | PM_BLOCK, "free");
    struct heap *h = tls_heap;
    count(h, STAT_free_medium, 1);
    page_free(h == &heap_empty ? NULL : &h->pcache, p);
}

void heap_free_block_slow(void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (!bitmap_test(a))
        heap_bad_free(p, (uintptr_t)block_of(p) | PM_BLOCK, "free");
    struct page *head = page_head(page_of(p));
    if (head->h.kind == PG_RUN)
        return run_free(p);
    struct slab *s = slab_of_page(head);
    struct heap *h = tls_heap;
    struct heap *owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
    /* a thread that only frees (a consumer) gets a heap too, so its counts
     * stay thread-local instead of contending on a global atomic */
    if (h == &heap_empty && heap_get_slow())
        h = tls_heap;
    count(h, STAT_free_remote, 1);
    if (slab_free_remote(s, p))
        heap_notify(owner, s);
}

/* ---- medium runs --------------------------------------------------------- */

void *heap_alloc_run(size_t size, size_t align)
{
    struct heap *h = heap_get();
    if (!h)
        return NULL;
    size_t npages = align_up(size, SL_PAGE) >> SL_PAGE_SHIFT;
    void *r = page_alloc(&h->pcache, PB_RUN, npages, align > SL_PAGE ? align >> SL_PAGE_SHIFT : 1, PG_RUN);
    if (!r)
        return NULL;
    atomic_fetch_or_explicit(bitmap_word((uintptr_t)r), bitmap_bit((uintptr_t)r), memory_order_relaxed);
    stat_add(h->stats, STAT_alloc_medium, 1);
    return r;
}

size_t heap_usable_size(void *p)
{
    struct page *head = page_head(page_of(p));
    if (head->h.kind == PG_RUN)
        return (size_t)head->h.npages << SL_PAGE_SHIFT;
    return slab_of_page(head)->size;
}

bool heap_resize_run(void *p, size_t new_size)
{
    return page_resize(p, align_up(new_size, SL_PAGE) >> SL_PAGE_SHIFT);
}

/* ---- misuse ------------------------------------------------------------ */

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

/* ---- fork ---------------------------------------------------------------- */

void heap_fork_prepare(void) { lock_acquire(&heaps_lock); }
void heap_fork_parent(void) { lock_release(&heaps_lock); }

/* In the child only this thread survives: every other heap is orphaned so
 * its slabs are adopted or reclaimed instead of leaking. */
void heap_fork_child(void)
{
    lock_reset(&heaps_lock);
    for (struct heap *h = all_heaps; h; h = h->all_next) {
        if (h == tls_heap || h->orphan)
            continue;
        h->orphan = true;
        h->orphan_next = orphans;
        orphans = h;
        st_relaxed(&norphans, ld_relaxed(&norphans) + 1);
    }
}
