/* cache.c — object caches: the kernel's kmem_cache in user space
 * (sl_cache_create, _alloc, _free, _alloc_bulk, _free_bulk, _shrink,
 * _destroy).
 *
 * A cache is a slab cache id (slab.h) beside the malloc size classes: its
 * objects live in the same slabs, thread heaps, remote-free bitmap and bulk paths
 * as malloc's, so everything said there holds here. What a cache adds:
 *   - its own geometry: object size and alignment, slab length, and for a
 *     cache with a constructor a link word after the object, so a free
 *     object keeps its constructed state (the constructor runs once, when
 *     the object is first carved from a new slab);
 *   - pageblocks of type RECLAIM for SL_CACHE_RECLAIMABLE caches;
 *   - checks that an object goes back to the cache it came from;
 *   - shrink (give back empty slabs) and destroy (give back every slab,
 *     live objects included: an arena reset);
 *   - a shrinker (sl_cache_set_reclaim): the owner's callback that gives
 *     objects back when sl_purge asks (cache_reclaim_all).
 * free() and sl_free_bulk() accept cache objects too, as kfree() does.
 *
 * Using a cache after sl_cache_destroy, or from one thread while another
 * destroys it, is undefined, as in the kernel; a use noticed on a slow path
 * is reported.
 *
 * Watched by a memory checker (base/annotate.h: valgrind's memcheck, or
 * ASan in the program), a cache is a pool whose objects are told to it as
 * they are handed out and taken back, so that a use after free is
 * reported. Its fast paths are not taken then: they compare fast_key and
 * fast_id, which never match in a watched cache, so the checker costs
 * the fast paths nothing (the same loads and compares).
 */
#define _GNU_SOURCE
#include "cache.h"

#include <errno.h>
#include <string.h>

#include "../base/annotate.h"
#include "../base/drain.h"
#include "../base/fatal.h"
#include "../bulk/bulk.h"
#include "../meta/meta.h"
#include "../os/os.h"
#include "../prof/prof.h"
#include "../slab/heap_free.h"
#include "../slab/heap_ids.h"
#include "../slab/slabinfo.h"
#include "sluice.h"

#define CACHE_MAX_PAGES   32 /* slab length limit: 128 KiB */
#define CACHE_MIN_OBJECTS 16 /* objects per slab aimed for */
#define CACHE_NAME_MAX    48
#define CACHE_DEAD        1 /* no heap slot ever holds this key (keys start at 2) */

struct sl_cache {
    void *meta_link;   /* meta_free's list link while the record is free */
    uint32_t key;      /* slab_geom[id].key while open; CACHE_DEAD after destroy */
    uint32_t fast_key; /* the fast paths' key: key, or CACHE_DEAD when watched or
                        * profiling (every allocation then takes cache_alloc_slow,
                        * which tells the checker or counts it) */
    uint16_t id;
    uint16_t fast_id;  /* the fast paths' id: id, or SL_NIDS (no slab's) when watched */
    uint32_t size;     /* an object's bytes, as asked */
    char name[CACHE_NAME_MAX];
};
#define CACHE_WATCHED(c) ((c)->fast_id != (c)->id)
/* The checker's name for the pool of cache id. */
sl_inline const void *cache_pool(unsigned id) { return &slab_geom[id]; }

_Static_assert(sizeof(((struct sl_cache_stats *)0)->name) == CACHE_NAME_MAX, "a row holds the name");

/* Slab length for objects of stride bytes: room for CACHE_MIN_OBJECTS
 * (within CACHE_MAX_PAGES), then the first length that wastes at most 1/16,
 * else the least wasteful one. */
static unsigned slab_pages_for(size_t stride)
{
    size_t min = align_up(stride * CACHE_MIN_OBJECTS, SL_PAGE) >> SL_PAGE_SHIFT;
    if (min > CACHE_MAX_PAGES)
        min = CACHE_MAX_PAGES;
    if (min < 1)
        min = 1;
    unsigned best = (unsigned)min;
    size_t best_waste = SIZE_MAX, best_bytes = 1;
    for (unsigned n = (unsigned)min; n <= CACHE_MAX_PAGES; n++) {
        size_t bytes = (size_t)n << SL_PAGE_SHIFT, waste = bytes % stride;
        if (waste * 16 <= bytes)
            return n;
        if (best_waste == SIZE_MAX || waste * best_bytes < best_waste * bytes) {
            best = n;
            best_waste = waste;
            best_bytes = bytes;
        }
    }
    return best;
}

sl_cache_t *sl_cache_create(const char *name, size_t size, size_t align, unsigned flags, void (*ctor)(void *))
{
    if (!size || (align & (align - 1)) || align > SL_PAGE ||
        (flags & ~(unsigned)(SL_CACHE_RECLAIMABLE | SL_CACHE_HWCACHE_ALIGN))) {
        errno = EINVAL;
        return NULL;
    }
    if (align < SL_GRAIN)
        align = SL_GRAIN; /* the live-object bitmap's grain */
    if ((flags & SL_CACHE_HWCACHE_ALIGN) && align < SL_CACHELINE)
        align = SL_CACHELINE;
    size_t link_off = ctor ? align_up(size, sizeof(void *)) : 0;
    size_t stride = align_up(ctor ? link_off + sizeof(void *) : size, align);
    if (size > ((size_t)CACHE_MAX_PAGES << SL_PAGE_SHIFT) || stride > ((size_t)CACHE_MAX_PAGES << SL_PAGE_SHIFT)) {
        errno = EINVAL;
        return NULL;
    }
    struct sl_cache *c = meta_alloc(sizeof *c);
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    const char *n = name ? name : "(unnamed)";
    size_t len = strnlen(n, CACHE_NAME_MAX - 1);
    memcpy(c->name, n, len);
    c->name[len] = 0;
    struct slab_geom g = {
        .size = (uint32_t)stride,
        .pages = (uint16_t)slab_pages_for(stride),
        .link_off = (uint16_t)link_off,
        .type = (flags & SL_CACHE_RECLAIMABLE) ? PB_RECLAIM : PB_SLAB,
        .ctor = ctor,
        .name = c->name,
    };
    int id = heap_id_open(&g);
    if (id < 0) {
        meta_free(c, sizeof *c);
        errno = ENOMEM; /* every cache id is in use */
        return NULL;
    }
    c->id = (uint16_t)id;
    c->key = slab_geom[id].key;
    c->size = (uint32_t)size;
    bool watched = annotate_watch() != WATCH_NONE;
    c->fast_key = watched || prof_on ? CACHE_DEAD : c->key;
    c->fast_id = watched ? SL_NIDS : c->id;
    if (watched)
        annotate_pool_create(cache_pool(id));
    heap_count(tls_heap, STAT_cache_create, 1);
    return c;
}

static sl_cold void cache_dead(const sl_cache_t *c, const char *op)
{
    sl_fatal(op, c, "a destroyed object cache", (size_t)-1);
}

/* The fast path's pop: an object of this thread's current slab of c, or
 * NULL (the slots are another cache's, or the slab is exhausted). */
sl_inline void *cache_pop(sl_cache_t *c, uint32_t key)
{
    struct heap *h = tls_heap;
    struct heap_ids *ids = heap_ids(h);
    unsigned i = c->id - SL_NCLASSES;
    if (likely(ids->key[i] == key)) {
        struct slab *s = ids->cur[i];
        void *p = s->free;
        if (likely(p != NULL)) {
            slab_pop_owned(s, p, slab_link(s, p));
            count_add(&h->counts.alloc[c->id], 1);
            return p;
        }
    }
    return NULL;
}

static void *cache_alloc_refill(sl_cache_t *c)
{
    struct heap *h = heap_get();
    if (!h || !heap_id_sync(h, c->id, c->key)) {
        errno = ENOMEM;
        return NULL;
    }
    heap_boost_check(h);
    struct slab *s = heap_refill(h, c->id);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = s->free;
    slab_pop_owned(s, p, slab_link(s, p));
    count_add(&h->counts.alloc[c->id], 1);
    return p;
}


/* A sampled object p of cache c: its slab is marked, so that its frees
 * look for the sample (block.h: page_hdr.prof), and it is recorded. */
static void cache_sampled(sl_cache_t *c, void *p)
{
    struct slab *s = slab_of_page(page_head(page_of(p)));
    __atomic_store_n(&s->h.prof, 1, __ATOMIC_RELAXED);
    prof_record(p, slab_geom[c->id].size, slab_geom[c->id].size, c->id, c->name);
}

static sl_noinline void *cache_alloc_slow(sl_cache_t *c)
{
    if (c->key != slab_geom[c->id].key || c->key == CACHE_DEAD)
        cache_dead(c, "sl_cache_alloc on");
    bool sampled = prof_on && prof_tick(slab_geom[c->id].size);
    void *p;
    if (likely(!CACHE_WATCHED(c))) {
        p = prof_on ? cache_pop(c, c->key) : NULL; /* profiling: the fast path's pop, after the count */
        if (!p && !(p = cache_alloc_refill(c)))
            return NULL;
    } else {
        annotate_quiet_begin(); /* sluice reads the link of a free object */
        p = cache_alloc_refill(c);
        annotate_quiet_end();
        if (!p)
            return NULL;
        annotate_pool_alloc(cache_pool(c->id), p, c->size, slab_geom[c->id].ctor != NULL);
    }
    if (unlikely(sampled))
        cache_sampled(c, p);
    return p;
}

void *sl_cache_alloc(sl_cache_t *c)
{
    void *p = cache_pop(c, c->fast_key);
    return likely(p != NULL) ? p : cache_alloc_slow(c);
}

void sl_cache_free(sl_cache_t *c, void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (unlikely(!(pagemap_get(a) & PM_BLOCK)))
        return p ? heap_free_to_cache(c->id, p) : (void)0;
    _Atomic uint64_t *w = bitmap_word(a);
    uint64_t v = ld_relaxed(w), bit = bitmap_bit(a);
    if (unlikely(!(v & bit) || (a & (SL_GRAIN - 1))))
        return heap_free_to_cache(c->id, p);
    struct page *head = page_head(page_of(p));
    struct slab *s = slab_of_page(head);
    /* kind and the prof byte in one compare, one atomic load (the slab's
     * owner marks a sample with an atomic store: cache_sampled) (a slab
     * with samples goes the long way, heap_free_object, which looks for
     * them); fast_id is no slab's in a watched cache */
    if (unlikely(__atomic_load_n(&head->h.kind_prof, __ATOMIC_RELAXED) != PG_SLAB || s->cls != c->fast_id))
        return heap_free_to_cache(c->id, p);
    struct heap *h = tls_heap;
    if (likely(atomic_load_explicit(&s->owner, memory_order_relaxed) == ((uintptr_t)h | 1)) &&
        likely(!slab_freed_remotely(s, a)))
        return heap_free_owned(h, s, p, slab_link(s, p), w, v & ~bit);
    heap_free_object(s, p);
}

size_t sl_cache_alloc_bulk(sl_cache_t *c, size_t n, void **out)
{
    if (!n)
        return 0;
    if (c->key != slab_geom[c->id].key || c->key == CACHE_DEAD)
        cache_dead(c, "sl_cache_alloc_bulk on");
    if (unlikely(CACHE_WATCHED(c))) { /* one by one, each told to the checker */
        for (size_t i = 0; i < n; i++)
            if (!(out[i] = cache_alloc_slow(c))) {
                sl_cache_free_bulk(c, i, out);
                return 0;
            }
        return n;
    }
    struct heap *h = heap_get();
    if (!h || !heap_id_sync(h, c->id, c->key)) {
        errno = ENOMEM;
        return 0;
    }
    size_t got = bulk_alloc(h, c->id, n, out);
    if (unlikely(prof_on) && got) {
        size_t idx[16];
        size_t k = prof_tick_bulk(slab_geom[c->id].size, got, idx, 16);
        for (size_t i = 0; i < k; i++)
            cache_sampled(c, out[idx[i]]);
    }
    return got;
}

void sl_cache_free_bulk(sl_cache_t *c, size_t n, void **objs)
{
    if (unlikely(CACHE_WATCHED(c))) {
        for (size_t i = 0; i < n; i++)
            sl_cache_free(c, objs[i]);
        return;
    }
    if (unlikely(prof_on))
        bulk_prof_free(objs, n);
    bulk_free(objs, n, c->id, NULL);
}

size_t sl_cache_shrink(sl_cache_t *c)
{
    if (c->key != slab_geom[c->id].key || c->key == CACHE_DEAD)
        cache_dead(c, "sl_cache_shrink on");
    size_t bytes = heap_id_shrink(c->id);
    heap_count(tls_heap, STAT_cache_shrink_bytes, bytes);
    return bytes;
}

/* The first version of the struct is all of it so far: a caller's size
 * below it is refused, a larger one (a newer header) gets what is known. */
int sl_cache_stats(sl_cache_t *c, struct sl_cache_stats *out)
{
    if (!c || !out || out->size < sizeof(struct sl_cache_stats))
        return EINVAL;
    if (c->key != slab_geom[c->id].key || c->key == CACHE_DEAD)
        cache_dead(c, "sl_cache_stats of");
    struct sl_cache_stats row;
    if (!slabinfo_row(c->id, &row))
        return EINVAL;
    memcpy(out, &row, sizeof row);
    return 0;
}

/* Shrinkers by user cache id (id - SL_NCLASSES), called by sl_purge on
 * the caller's thread and by the watermark boost on the reclaimer's
 * (reclaim/boost.c). One caller at a time per shrinker: `busy` is taken
 * with an exchange, and a caller that finds it taken skips the cache (the
 * other caller is reclaiming it already). Removing a shrinker (NULL, or
 * sl_cache_destroy) waits until no call of it is running, unless the
 * remover is that call itself; so after sl_cache_set_reclaim(c, NULL)
 * returns, fn is not running and will not be called. The cache pointer
 * is published before the function and read after it, so a shrinker set
 * while another thread calls them is seen whole or not at all. busy is
 * cleared in a fork child: the call it marked is not running there. */
typedef size_t (*shrinker_fn)(sl_cache_t *, size_t);
static struct {
    _Atomic(sl_cache_t *) cache;
    _Atomic(shrinker_fn) fn;
    _Atomic int busy;
} shrinkers[SL_NIDS - SL_NCLASSES];
static __thread int shrinker_running = -1; /* the shrinker this thread is in */

void sl_cache_set_reclaim(sl_cache_t *c, shrinker_fn fn)
{
    if (c->key != slab_geom[c->id].key || c->key == CACHE_DEAD)
        cache_dead(c, "sl_cache_set_reclaim on");
    unsigned i = c->id - SL_NCLASSES;
    atomic_store_explicit(&shrinkers[i].fn, NULL, memory_order_seq_cst);
    if (shrinker_running != (int)i)
        while (atomic_load_explicit(&shrinkers[i].busy, memory_order_seq_cst))
            os_futex_wait_ms(&shrinkers[i].busy, 1, 1); /* a shrinker call is short: poll */
    atomic_store_explicit(&shrinkers[i].cache, fn ? c : NULL, memory_order_release);
    atomic_store_explicit(&shrinkers[i].fn, fn, memory_order_release);
}

size_t cache_reclaim_all(size_t bytes)
{
    size_t freed = 0;
    for (unsigned i = 0; i < SL_NIDS - SL_NCLASSES; i++) {
        if (!atomic_load_explicit(&shrinkers[i].fn, memory_order_relaxed) ||
            atomic_exchange_explicit(&shrinkers[i].busy, 1, memory_order_seq_cst))
            continue;
        /* after busy: a remover that cleared fn before we set busy is seen here */
        shrinker_fn fn = atomic_load_explicit(&shrinkers[i].fn, memory_order_seq_cst);
        sl_cache_t *c = fn ? atomic_load_explicit(&shrinkers[i].cache, memory_order_acquire) : NULL;
        if (c) {
            size_t size = slab_geom[SL_NCLASSES + i].size;
            size_t want = bytes == SIZE_MAX ? SIZE_MAX : bytes / size ? bytes / size : 1;
            int outer = shrinker_running;
            shrinker_running = (int)i;
            size_t n = fn(c, want);
            shrinker_running = outer;
            stat_add_shared(STAT_reclaim_calls, 1);
            stat_add_shared(STAT_reclaim_objects, n);
            freed += n;
        }
        atomic_store_explicit(&shrinkers[i].busy, 0, memory_order_release);
    }
    return freed;
}

void cache_fork_child(void)
{
    for (unsigned i = 0; i < SL_NIDS - SL_NCLASSES; i++)
        st_relaxed(&shrinkers[i].busy, 0);
}

void sl_cache_destroy(sl_cache_t *c)
{
    if (!c)
        return;
    if (c->key != slab_geom[c->id].key || c->key == CACHE_DEAD)
        cache_dead(c, "sl_cache_destroy of");
    sl_cache_set_reclaim(c, NULL);
    uint64_t live;
    prof_forget_cache(c->id); /* its live objects go with it */
    page_gather_begin(); /* its pageblocks go back together */
    heap_id_close(c->id, &live);
    page_gather_end();
    if (CACHE_WATCHED(c))
        annotate_pool_destroy(cache_pool(c->id)); /* its live objects with it */
    heap_count(tls_heap, STAT_cache_destroy, 1);
    heap_count(tls_heap, STAT_cache_destroy_live, live);
    c->key = CACHE_DEAD;
    meta_free(c, sizeof *c);
}

/* The reclaim registry's entry (base/drain.h): the shrinkers are asked for
 * want bytes (sl_purge: all; the watermark boost: its deficit). Not after
 * a failed allocation: the failing thread may hold the lock its cache's
 * shrinker takes. */
static void drain_shrinkers(enum drain_depth depth, size_t want)
{
    (void)depth;
    if (want)
        cache_reclaim_all(want);
}
DRAIN_REGISTER(shrinkers_drain, .name = "shrinkers", .order = DRAIN_SHRINKERS, .depths = DRAIN_BOOST | DRAIN_PURGE,
               .run = drain_shrinkers, .held = NULL);
