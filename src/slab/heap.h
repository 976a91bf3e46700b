/* heap.h — a thread heap: the current slab and partial slabs of every cache
 * id (malloc size classes and user object caches) for one thread, its page
 * cache and its counters; and the two fast paths of sluice, small malloc and
 * small free by the owner.
 *
 * Fast path budget: no lock, no atomic RMW, no call. malloc: TLS load, class
 * arithmetic, pop the current slab's freelist, set the bitmap bit, count.
 * free: pagemap lookup (two loads), bitmap test, owner compare, push, count.
 * Everything else goes to a *_slow function.
 *
 * A thread starts on heap_empty (every class's current slab is an empty
 * dummy), so the first malloc falls into the slow path, which gives the
 * thread a heap. When a thread exits its heap is abandoned: empty slabs are
 * released and the heap goes on the orphan list, where a new thread takes it
 * over whole, and live threads adopt its partial slabs and reclaim the rest.
 *
 * User cache ids are reused after sl_cache_destroy, so a heap's slots for a
 * user id are valid only while key[id] equals the cache's key; a mismatch
 * means they belong to a destroyed cache (whose slabs are gone) and are reset.
 *
 * Lock order: 1 heaps_lock (heap lists, cache ids) -> 2 page heap lock ->
 * 3 meta lock.
 */
#ifndef SL_HEAP_H
#define SL_HEAP_H

#include "../page/page.h"
#include "../pagemap/pagemap.h"
#include "../stats/stats.h"
#include "size_class.h"
#include "slab.h"

#define SL_NUSER (SL_NIDS - SL_NCLASSES)

/* A heap's slots for the user cache ids (index id - SL_NCLASSES), made on
 * the thread's first use of an object cache; until then ids_none. */
struct heap_ids {
    struct slab *cur[SL_NUSER];       /* owner; valid while key matches */
    struct slab *partial[SL_NUSER];   /* owner; doubly linked */
    struct slab *full[SL_NUSER];      /* owner; FULL slabs, doubly linked */
    uint32_t key[SL_NUSER];           /* owner; the cache these slots are for */
    _Atomic uint32_t woken[SL_NUSER]; /* FULL slabs that got a remote free */
};
extern struct heap_ids ids_none; /* all keys 0: matches no cache */

struct heap {
    struct slab *cur[SL_NCLASSES + 1];  /* owner; never NULL (slab_none, always
                                         * for cur[SL_CLASS_ZERO]) */
    struct slab *partial[SL_NCLASSES];  /* owner; doubly linked */
    _Atomic(struct heap_ids *) ids;     /* owner writes once; remote freers read */
    _Atomic(struct slab *) notify;      /* malloc classes: FULL slabs that got a remote free */
    struct page_cache pcache;           /* owner */
    stat_counters stats;                /* owner writes, anyone reads */
    struct heap *all_next;              /* heaps_lock */
    struct heap *orphan_next;           /* heaps_lock */
    bool orphan;                        /* heaps_lock */
    bool fork_orphan;                   /* heaps_lock: orphaned by fork; its thread may have
                                         * stopped mid-operation, so its slabs are repaired
                                         * (slab_repair) before anyone uses them */
};

extern struct heap heap_empty;
extern struct slab slab_none; /* the dummy current slab: no free objects */
extern __thread struct heap *tls_heap;

void *heap_alloc_small_slow(struct heap *h, unsigned cls);
/* Count on h, or globally (slow paths only) when h is heap_empty. */
void heap_count(struct heap *h, enum sl_stat id, uint64_t n);
void heap_free_block_slow(void *p);
/* Set by the checked mode (api/checked.c): a block free of an address with
 * no live bit goes there instead of being reported at once. */
extern void (*heap_checked_free)(void *p);
struct heap *heap_get_slow(void); /* this thread's heap, created if needed */

sl_inline struct heap *heap_get(void)
{
    struct heap *h = tls_heap;
    return likely(h != &heap_empty) ? h : heap_get_slow();
}

sl_inline void *heap_alloc_small(size_t n)
{
    struct heap *h = tls_heap;
    unsigned cls = size_class(n);
    struct slab *s = h->cur[cls];
    void *p = s->free;
    if (unlikely(!p))
        return heap_alloc_small_slow(h, cls);
    s->free = *(void **)p;
    s->used++;
    bitmap_set_owner((uintptr_t)p);
    stat_add(h->stats, STAT_alloc_small, 1);
    return p;
}

void heap_free_local_slow(struct heap *h, struct slab *s);
/* For the bulk and cache layers: make h->cur[id] a slab with free objects
 * (NULL + ENOMEM); tell a slab's owner that a FULL slab got remote frees. */
struct slab *heap_refill(struct heap *h, unsigned id);
void heap_wake(uintptr_t owner_word, struct slab *s);
/* Free of a live object p of slab s (validated) by whichever thread. */
void heap_free_object(struct slab *s, void *p);

/* Free of p (validated, bitmap word w holding v, bit bit) into slab s that
 * this thread owns, its free-list link at `link`: no atomics. */
sl_inline void heap_free_owned(struct heap *h, struct slab *s, void *p, void **link, _Atomic uint64_t *w,
                               uint64_t v, uint64_t bit)
{
    st_relaxed(w, v & ~bit);
    void *f = s->free;
    *link = f;
    s->free = p;
    s->used--;
    stat_add(h->stats, STAT_free_small, 1);
    /* the slow path has work when the slab was exhausted, or is empty and
     * not the current one (the current slab emptying is the common case of
     * an alloc/free pair and needs nothing) */
    if (unlikely(!f) || unlikely(!s->used && s->state != SLAB_CURRENT))
        heap_free_local_slow(h, s);
}

/* Free of memory inside a pageblock (the caller looked the pagemap up).
 * Small frees by the owning thread stay here. The bitmap is tested before the
 * descriptor is read, so a bad pointer never steers a load. */
sl_inline void heap_free_block(void *p)
{
    uintptr_t a = (uintptr_t)p;
    _Atomic uint64_t *w = bitmap_word(a);
    uint64_t v = ld_relaxed(w), bit = bitmap_bit(a);
    if (unlikely(!(v & bit) || (a & (SL_GRAIN - 1))))
        return heap_free_block_slow(p);
    struct heap *h = tls_heap;
    struct slab *s = slab_of_page(page_head(page_of(p)));
    if (unlikely(atomic_load_explicit(&s->owner, memory_order_relaxed) != (uintptr_t)h))
        return heap_free_block_slow(p);
    heap_free_owned(h, s, p, (void **)p, w, v, bit); /* malloc classes link at 0 */
}

/* Medium allocations: page runs of PB_RUN blocks through the thread's page
 * cache. align is a power of two (at most 1 MiB). *clean: the run is known
 * to read as zero (calloc need not clear it). */
void *heap_alloc_run(size_t size, size_t align, bool *clean);
/* Usable size of a live block-backed allocation at p (validated). */
size_t heap_usable_size(void *p);
/* Resize a live run in place; false if it cannot. */
bool heap_resize_run(void *p, size_t new_size);
/* The size last asked for of the live run at p (malloc or realloc). */
size_t heap_run_request(void *p);
/* Report a free of p that is not a live allocation, and abort. */
_Noreturn void heap_bad_free(const void *p, uintptr_t pm_entry, const char *op);

/* User cache ids (sl_cache_create): open one for geometry g (NULL if all
 * are in use); shrink this thread's and orphaned heaps' empty slabs of it
 * (bytes released); close it, releasing every slab of it in every heap
 * (live objects released go to *live). */
int heap_id_open(const struct slab_geom *g);
size_t heap_id_shrink(unsigned id);
size_t heap_id_close(unsigned id, uint64_t *live);
/* The slots of cache id in heap h (a malloc class or a user cache). */
sl_inline struct heap_ids *heap_ids(struct heap *h) { return atomic_load_explicit(&h->ids, memory_order_relaxed); }
sl_inline struct slab **heap_cur(struct heap *h, unsigned id)
{
    return id < SL_NCLASSES ? &h->cur[id] : &heap_ids(h)->cur[id - SL_NCLASSES];
}
sl_inline struct slab **heap_partial(struct heap *h, unsigned id)
{
    return id < SL_NCLASSES ? &h->partial[id] : &heap_ids(h)->partial[id - SL_NCLASSES];
}
sl_inline struct slab **heap_full(struct heap *h, unsigned id) { return &heap_ids(h)->full[id - SL_NCLASSES]; }
sl_inline uint32_t heap_key(struct heap *h, unsigned id) { return heap_ids(h)->key[id - SL_NCLASSES]; }

/* Make this thread's slots for user id belong to the cache with key; false
 * (ENOMEM) if its slots for user caches could not be made. */
bool heap_id_sync_slow(struct heap *h, unsigned id, uint32_t key);
sl_inline bool heap_id_sync(struct heap *h, unsigned id, uint32_t key)
{
    return likely(heap_key(h, id) == key) || heap_id_sync_slow(h, id, key);
}

/* Thread lifecycle and process-wide operations. */
void heap_thread_exit(struct heap *h);
void heap_collect_all(void);          /* sl_purge: reclaim what threads hold */
void heap_sum_stats(uint64_t out[STAT_COUNT]);
/* sl_check's part for the slab and page layers (heap_check.c): reports and
 * aborts on the first broken invariant. Other threads must be quiet. */
void heap_check_all(void);
/* Bytes in live slab objects (by size class) and live runs: mallinfo. */
size_t heap_in_use_bytes(void);
sl_lock *heap_fork_lock(void); /* heaps_lock, for fork's handlers */
void heap_fork_child(void);

#endif
