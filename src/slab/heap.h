/* heap.h — a thread heap: the current slab and partial slabs of every cache
 * id (malloc size classes and user object caches) for one thread, its page
 * cache and its counters; and the two fast paths of sluice, small malloc and
 * small free by the owner.
 *
 * Magazines (tcmalloc's per-thread free lists, for the malloc classes): a
 * small free by the thread that owns the object's slab pushes the object
 * onto the heap's magazine of its class, up to its depth (class_mag_cap:
 * 64 KiB, 16 to 256; a burst of frees grows it to its room, heap.c:
 * mag_grow); malloc pops the magazine before the current slab. An
 * object in a magazine keeps its live bit and still counts as used in its
 * slab; what marks it free is its second word, set to heap_cookie (a
 * random value per process) by the free that pushes it and cleared by the
 * malloc that pops it (glibc's tcache keys its entries the same way). So a
 * magazine round trip writes no bitmap word: malloc touches only the
 * heap's magazine and the object, and free reads the bitmap word
 * (never-returned pointers, objects on a slab's free list) and the
 * object's cookie. Objects leave a magazine by malloc, or by a flush back
 * into the slabs (heap_mag_flush: thread exit, sl_purge, a bulk free of
 * the class), which clears their bits. Paths that take the live bit for
 * "live" in bulk, without reading objects (the owner's collect of remote
 * frees, sl_free_bulk), mask the magazine's objects out or flush it first.
 * Only objects of the heap's own slabs enter it, so only the owner ever
 * writes their bitmap words, as before. A full magazine sends the free to
 * the slab.
 *
 * The cookie is also the mark of a remote free: a thread that frees
 * another heap's malloc-class object (one by one or in bulk) writes it
 * into the object's second word. So every malloc-class object that is
 * free but keeps its live bit (in a magazine; in a remote batch or the
 * remote-free bitmap, until its owner takes it) carries the cookie: a free
 * of an object that carries it is a double free if the structure that
 * holds it confirms it (free_state.c: the cookie is a hint, since a
 * program may copy a freed object's bytes into a live one), reported at
 * once, and the owner's collect checks that every object it takes still
 * carries it. Without the mark, an object freed by another thread and
 * then by its owner (or freed by its owner into the magazine and then by
 * another thread) could be handed out again by the magazine before the
 * owner took the remote bit, which would then free it under its new user;
 * with it, that object has lost the mark (malloc clears it) when its
 * remote bit is taken, and the collect reports it instead. The remote
 * freer writes the mark without reading it (the line is usually in the
 * owner's cache: a store waits in the store buffer, a load would stall).
 * A collect that unlinks objects leaves the mark in them, so malloc from a
 * slab's free list clears the second word as it pops (the link's line). A
 * live object whose second word equals the cookie by chance (2^-64 for
 * data that never held a freed object's bytes) is looked for in the
 * structures that hold freed objects, found in none, and freed.
 *
 * Fast path budget: no lock, no atomic RMW, no call. malloc: TLS load, class
 * arithmetic, pop the magazine (clear the cookie) or the current slab's
 * freelist (set the bitmap bit), count (a pop in mag_pops). free: pagemap
 * lookup (two loads), page tag compare, bitmap test, cookie test, magazine
 * push, no count (the top's move counts it: heap_count_free). 18 and 44
 * instructions on x86-64 (gcc 12, -O2), 74 a pair with the loop
 * (bench/pair.sh). Everything else goes to a *_slow function.
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

#include "../page/decay.h"
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

#define RBATCH_CAP    256         /* remote frees batched (remote_batch.c) */
#define RBATCH_BYTES  (256 << 10)  /* ... and at most this many bytes of them */
#define HEAP_TAG_NONE (~0u << TAG_HEAP_SHIFT) /* matches no page tag: heap_empty */

/* A heap's counts by cache id (the malloc classes and user caches), for
 * the per-cache statistics (slabinfo.c) and the totals alloc_small and
 * free_small: summed on read over every heap. free counts
 * every object given back, whichever way; remote and bulk count those of
 * them freed by a thread that did not own the object's slab, and those
 * freed through sl_free_bulk or sl_cache_free_bulk. An object is counted
 * once where the program hands it out or gives it back (the fast paths
 * count what they counted before, in a slot of their class instead of
 * one word), never on its way through magazines, remote batches and the
 * remote-free bitmap; so for each cache, alloc - free summed over the
 * heaps is its objects that are handed out now. For a malloc class the
 * magazines keep part of the count (mag_pops, mag_adj: read through
 * heap_count_alloc and heap_count_free, never these arrays alone). A
 * destroyed cache's slots are added to the totals and zeroed (heap_ids.c:
 * heap_id_close). */
struct heap_counts {
    _Atomic uint64_t alloc[SL_NIDS], free[SL_NIDS], remote[SL_NIDS], bulk[SL_NIDS];
};

struct heap {
    struct slab *cur[SL_NCLASSES + 1];  /* owner; never NULL (slab_none, always
                                         * for cur[SL_CLASS_ZERO]) */
    uint32_t tag;                       /* the page tag of its malloc slabs, less the class:
                                         * its sequence number << TAG_HEAP_SHIFT; set once */
    uint64_t cookie;                    /* heap_cookie (0 for heap_empty); set once */
    void *mag_first[SL_NCLASSES + 1];   /* owner: *mag_top[c] (mag_set), what malloc pops */
    void **mag_top[SL_NCLASSES + 1];    /* owner writes: each magazine's last object, its
                                         * NULL end when empty, or MAG_IDLE (mag_none
                                         * for [SL_CLASS_ZERO] and heap_empty) */
    uint64_t sample_armed[2][(SL_NCLASSES + 63) / 64]; /* owner: the first gap of class c's
                                         * countdown [0] (mag_pops) and [1] (slab_pops) was
                                         * drawn (heap_alloc_sampled_slow) */
    bool prof_armed;                    /* owner: heap_sample_arm has run (profiling on) */
    struct slab *partial[SL_NCLASSES];  /* owner; doubly linked */
    _Atomic(struct heap_ids *) ids;     /* owner writes once; remote freers read */
    _Atomic(struct slab *) notify[SL_NCLASSES]; /* malloc classes: FULL slabs that got a remote
                                                 * free, a stack per class */
    _Atomic uint32_t notify_gen[SL_NCLASSES];   /* owner writes: its takes of each so far */
    struct owner_watch notify_watch[SL_NCLASSES]; /* heaps_lock: the reclaimer's look at each
                                                   * (notify.c) */
    struct page_cache pcache;           /* owner */
    uint32_t boost_seen;                /* owner: page_boost_gen_word when it last drained */
    stat_counters stats;                /* owner writes, anyone reads */
    struct heap *all_next;              /* heaps_lock */
    struct heap *orphan_next;           /* heaps_lock */
    bool orphan;                        /* heaps_lock */
    bool fork_orphan;                   /* heaps_lock: orphaned by fork; its thread may have
                                         * stopped mid-operation, so its slabs are repaired
                                         * (slab_repair) before anyone uses them */
    void *mag[MAG_SLOTS];                /* owner; the magazines, see mag_top */
    uint32_t rbatch_n, rbatch_bytes;     /* owner: remote frees batched, and their bytes */
    void *rbatch[RBATCH_CAP];            /* owner (remote_batch.c) */
    uint8_t rbatch_cls[RBATCH_CAP];      /* owner: each one's size class */
    uint8_t rbatch_mixed;                /* owner: nonzero if the batch may hold two classes */
    struct slab *remote_held;            /* owner: the slab whose remote lock its thread
                                          * is taking or holds (slab.h), for fork */
    uint8_t mag_shift[SL_NCLASSES];      /* owner: each magazine's depth is its class's
                                          * class_mag_cap << this, at most its room */
    uint16_t mag_burst[SL_NCLASSES];     /* owner: frees past the full magazine in a row
                                          * with no malloc between (mag_grow) */
    uint32_t mag_seen[SL_NCLASSES];      /* owner: heap_count_alloc(class) at the last of them */
    /* What a thread's exit and a drain visit (heaps.c heap_reclaim,
     * heap_mag_flush): the cache ids and magazines h may hold something
     * in, instead of all SL_NIDS ids and SL_NCLASSES magazines. Written on
     * slow paths only, never by malloc's and free's fast paths. */
    uint64_t ids_held[SL_NIDS / 64];     /* owner (heaps_lock for an orphan): bit id set before
                                          * h's current slab, partial list or (user cache)
                                          * full list of id gets a slab (heap_hold_id), and
                                          * cleared by heap_reclaim only when all three are
                                          * empty; a FULL malloc slab is on no list and
                                          * comes back through partial_push */
    uint64_t mags_held[(SL_NCLASSES + 63) / 64]; /* owner: bit c set while magazine c is
                                          * laid out (mag_layout), clear while it is idle */
    struct heap_counts counts;           /* owner writes (heap_empty's: any thread, atomic
                                          * adds), anyone reads */
    /* The small malloc's counts, which are also its sample countdowns
     * (owner writes, anyone reads through heap_pops; zero for heap_empty,
     * which never pops):
     *   mag_pops    mallocs that popped a magazine (not in counts.alloc);
     *   slab_pops   mallocs that popped a slab's free list (not in
     *               counts.alloc either: that counts the other ways in,
     *               bulk, caches and quiet mallocs);
     * each kept as the count plus its bias (pops_bias), mod 2^64. The
     * malloc adds 1 and branches on a result of 0: the sample point
     * (heap_alloc_sampled_slow). With profiling off the bias is 0 and the
     * count never wraps; profiling sets the bias so that the add that
     * reaches the next sample point of the class, drawn geometric, makes
     * 0 (heap_sample_arm). So the counts cost malloc one branch, and
     * profiling costs it nothing more. Every malloc of a class is counted
     * once, on one of the two: each is an independent geometric countdown
     * over its own part of the class's mallocs, which samples every one
     * with the same probability, as one countdown over all of them would.
     * The bias is rewritten at sample points only, under pops_seq (odd
     * while writing), so that a reader never pairs a count with another
     * bias.
     * mag_adj: per magazine, the objects that left it other than by a
     * counted pop (flushed back to their slabs, a quiet malloc's) less
     * those that entered it other than by free (a collect's remote
     * frees), mod 2^64. */
    _Atomic uint64_t mag_pops[SL_NCLASSES], slab_pops[SL_NCLASSES], mag_adj[SL_NCLASSES];
    _Atomic uint64_t pops_bias[2][SL_NCLASSES]; /* [0] mag_pops', [1] slab_pops' */
    _Atomic uint32_t pops_seq;
    struct { /* the rewrite under way while pops_seq is odd, written first:
              * a fork child finishes one its thread was stopped in */
        uint64_t count, bias;
        unsigned k, cls;
    } pops_next;
};

extern struct heap heap_empty;
sl_inline void heap_count(struct heap *h, enum sl_stat id, uint64_t n)
{
    if (h != &heap_empty)
        stat_add(h->stats, id, n);
    else
        stat_add_shared(id, n);
}
/* Add 1 to h->array[id] (array: counts.alloc, counts.free, mag_pops) on a fast path:
 * count_add, with the address spelt out from h and id, which the fast
 * paths hold in registers anyway. Through count_add's "+m" operand the
 * compiler computed the slot's address into a register of its own, one
 * to two instructions a call (bench/pair.sh: 76 -> 80 a pair; with this,
 * 75). No "memory" clobber: the slot is read only with atomic loads,
 * elsewhere, so no copy of it is held across the add. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define heap_count_fast(h, array, id)                                                                                 \
    __asm__("addq $1, %c2(%0,%1,8)" : : "r"(h), "r"((size_t)(id)), "i"(offsetof(struct heap, array)))
/* Count a small malloc of class cls on h->array (mag_pops, slab_pops):
 * has it reached its sample point (the add made 0)? One add to memory
 * and the branch on its zero flag (volatile: two mallocs are two counts). */
#define heap_pop_tick(h, array, cls)                                                                                  \
    __extension__({                                                                                               \
        bool zero_;                                                                                               \
        __asm__ volatile("addq $1, %c3(%1,%2,8)"                                                                   \
                         : "=@ccz"(zero_)                                                                         \
                         : "r"(h), "r"((size_t)(cls)), "i"(offsetof(struct heap, array)));                        \
        zero_;                                                                                                    \
    })
#else
#define heap_count_fast(h, array, id) count_add(&(h)->array[id], 1)
#define heap_pop_tick(h, array, cls)                                                                              \
    __extension__({                                                                                               \
        uint64_t n_ = ld_relaxed(&(h)->array[cls]) + 1;                                                           \
        st_relaxed(&(h)->array[cls], n_);                                                                         \
        n_ == 0;                                                                                                  \
    })
#endif
/* Add n to one of h's per-cache counts (&h->counts.X[id]); heap_empty's
 * (a thread with no heap, slow paths only) with an atomic add. */
sl_inline void heap_count_id(struct heap *h, _Atomic uint64_t *slot, uint64_t n)
{
    if (h != &heap_empty)
        count_add(slot, n);
    else
        atomic_fetch_add_explicit(slot, n, memory_order_relaxed);
}
/* The second word of every object in a magazine: random, nonzero, set once
 * before the first heap is made. */
extern uint64_t heap_cookie;
extern struct slab slab_none; /* the dummy current slab: no free objects */
extern __thread struct heap *tls_heap;

/* Small malloc of n bytes that found the magazine and the current slab
 * empty: a refill, then the pop (counted on slab_pops or mag_pops, or
 * with quiet in counts.alloc: heap_alloc_small_quiet). */
void *heap_alloc_small_slow(size_t n, bool quiet);
/* Bias h's counts so that the next malloc of every class reaches its
 * sample point (profiling has started). Only h's owner, or before it
 * runs: the rewrite is the owner's (pops_seq). */
void heap_sample_arm(struct heap *h);
/* In a fork child: finish a rewrite of h's counts' bias that its thread
 * was stopped in (pops_seq odd), so that readers do not wait forever. */
void heap_pops_settle(struct heap *h);
/* Count on h, or globally (slow paths only) when h is heap_empty. */
sl_inline void heap_count(struct heap *h, enum sl_stat id, uint64_t n);
/* Free of p in a pageblock that the fast path did not take; x is its page
 * tag as the fast path read it, relative to this thread's heap
 * (tag_relative: the slow path undoes it, so the fast path keeps no copy). */
void heap_free_block_slow(void *p, uint32_t x);
struct heap *heap_get_slow(void); /* this thread's heap, created if needed */

sl_inline struct heap *heap_get(void)
{
    struct heap *h = tls_heap;
    return likely(h != &heap_empty) ? h : heap_get_slow();
}
/* heap_get_slow for a free path: errno as it was, even when no heap can
 * be made (a free never sets errno). */
struct heap *heap_get_quiet(void);
/* heap_get for a free path (heap_get_quiet). */
sl_inline struct heap *heap_get_for_free(void)
{
    struct heap *h = tls_heap;
    return likely(h != &heap_empty) ? h : heap_get_quiet();
}

/* Watermark boost (page.h): asked to, the owner gives back, on its next
 * allocation slow path, its magazines' objects, its empty slabs and its
 * page cache; with no reclaimer thread it also runs the boost's reclaim
 * (sl_events.boost_in_thread, base/events.h). No lock is held. */
void heap_boost_respond_slow(struct heap *h);
sl_inline void heap_boost_check(struct heap *h)
{
    if (unlikely(h->boost_seen != ld_relaxed(&page_boost_gen_word)))
        heap_boost_respond_slow(h);
}
/* The sum of fn over every heap, under the registry's lock (the drains'
 * held counts, base/drain.h). */
size_t heaps_sum(size_t (*fn)(struct heap *h));

/* The page tag of the first page of h's slabs of malloc class cls. */
sl_inline uint32_t heap_page_tag(struct heap *h, unsigned cls) { return h->tag | cls; }
/* A page tag against heap h: below TAG_MINE_LIMIT when the page is in one
 * of h's malloc slabs, and then page in slab << TAG_PAGE_SHIFT | class. */
sl_inline uint32_t tag_relative(struct heap *h, uint32_t tag) { return tag ^ h->tag; }
#define TAG_MINE_LIMIT (1u << TAG_HEAP_SHIFT)
/* The head page of the slab of p, whose page tag is t (nonzero). */
sl_inline uintptr_t tag_slab_head(const void *p, uint32_t t)
{
    return align_down((uintptr_t)p, SL_PAGE) - ((uintptr_t)(t >> TAG_PAGE_SHIFT & ((1u << TAG_SLAB_PAGE_BITS) - 1)) << SL_PAGE_SHIFT);
}
/* A magazine is a stack growing down through its part of h->mag, between
 * a MAG_LIMIT mark below its room and a NULL end (size_class.h):
 *   mark MAG_LIMIT, [.. top) stale, [top .. end) objects, end NULL
 * So malloc pops *top unless it is the NULL end, and free pushes at top - 1
 * unless that slot is the mark: one load and one compare each, no count.
 * A magazine that is empty after a flush, or was never used, is idle: its
 * top is the shared mag_idle + 1, which reads as empty to malloc and full
 * to free, so the first free after goes to heap_free_mag_full_slow, which
 * lays the magazine out then. So only the classes a thread frees touch the
 * pages of its part of h->mag.
 * The object on top is kept beside the top, in mag_first (mag_set writes
 * both), so that malloc knows what it returns after one load instead of
 * two (the top, then the slot it names); the slot below is read off that
 * path. Measured (interleaved runs, medians): bench_sizes' 8-64 B band
 * 0.063 -> 0.056 s and 64-512 B 0.061 -> 0.049 s (tcmalloc 0.048, 0.046),
 * bench_slots level (0.131 against 0.131 s; cachegrind's read misses in
 * malloc 70 K against 75 K a million replacements), 73 -> 76
 * instructions a pair (bench/pair.sh). Lists linked through the objects
 * (tcmalloc's, glibc tcache's shape) were as fast on the small bands, but
 * malloc then reads the object it returns, cold in a large working set:
 * bench_slots 0.131 -> 0.164 s, 4x the read misses in malloc.
 * Measured again without mag_first (malloc 17 and free 43 instructions,
 * 72 a pair): bench_sizes' two small bands level, but `bench_pair N runs`
 * 0.432 against 0.345 s (medians of 21 interleaved runs, slower in 19),
 * malloc waiting on the top the last free stored: kept. */
#define MAG_LIMIT ((void *)1)
extern void *mag_none[1]; /* { NULL }: the empty magazines of heap_empty */
extern void *mag_idle[2]; /* { MAG_LIMIT, NULL } */
#define MAG_IDLE (&mag_idle[1])
sl_inline void **mag_end(struct heap *h, unsigned cls) { return &h->mag[class_mag_end[cls]]; }
sl_inline unsigned mag_depth(struct heap *h, unsigned cls)
{
    unsigned d = (unsigned)class_mag_cap[cls] << h->mag_shift[cls];
    return d < class_mag_room[cls] ? d : class_mag_room[cls];
}
sl_inline void **mag_mark(struct heap *h, unsigned cls) { return mag_end(h, cls) - mag_depth(h, cls) - 1; }
sl_inline void mag_set(struct heap *h, size_t cls, void **top)
{
    st_release64(&h->mag_top[cls], top); /* after its slots: free_state_find reads them */
    h->mag_first[cls] = *top;
}
sl_inline unsigned mag_count(struct heap *h, unsigned cls)
{
    void **top = __atomic_load_n(&h->mag_top[cls], __ATOMIC_RELAXED);
    return top == MAG_IDLE || top == mag_none ? 0 : (unsigned)(mag_end(h, cls) - top);
}

/* The pops of class cls, unbiased: a magazine's (*mag) and a slab's
 * (*slab). Any thread; the bias read under pops_seq (see struct heap). */
sl_inline void heap_pops(struct heap *h, unsigned cls, uint64_t *mag, uint64_t *slab)
{
    for (;;) { /* acquire loads, no fence (ThreadSanitizer knows no fences): a
                * count or bias the writer stored (release) after making
                * pops_seq odd keeps the second load of it from reading older */
        uint32_t seq = atomic_load_explicit(&h->pops_seq, memory_order_acquire);
        uint64_t bm = atomic_load_explicit(&h->pops_bias[0][cls], memory_order_acquire);
        uint64_t bs = atomic_load_explicit(&h->pops_bias[1][cls], memory_order_acquire);
        *mag = atomic_load_explicit(&h->mag_pops[cls], memory_order_acquire) - bm;
        *slab = atomic_load_explicit(&h->slab_pops[cls], memory_order_acquire) - bs;
        if (!(seq & 1) && atomic_load_explicit(&h->pops_seq, memory_order_relaxed) == seq)
            return;
    }
}

/* h's counts of cache id as the program made them (heap_counts): a
 * malloc class's mallocs are counted in three places, by where they took
 * the object (the magazine: mag_pops; a slab on the fast path or after a
 * refill: slab_pops; any other way: counts.alloc); its frees into a magazine are not
 * counted when they are made (one add less on the free fast path, and one
 * line less: 45 -> 44 instructions), since every object that entered a
 * magazine by free has left it by malloc, left it otherwise (mag_adj), or
 * is in it now:
 *   pushes = mag_pops + mag_adj + mag_count.
 * Read by any thread without the owner's cooperation, like every count:
 * the owner moves the top before it counts a pop, so a reader that reads
 * the pops first never counts a push that a malloc took back twice; a
 * reader racing a flush or a collect may be off by what moved meanwhile,
 * as a walk of any counts is off by what changed during it. */
sl_inline uint64_t heap_count_alloc(struct heap *h, unsigned id)
{
    uint64_t n = ld_relaxed(&h->counts.alloc[id]), mag, slab;
    if (id >= SL_NCLASSES)
        return n;
    heap_pops(h, id, &mag, &slab);
    return n + mag + slab;
}
sl_inline uint64_t heap_count_free(struct heap *h, unsigned id)
{
    uint64_t n = ld_relaxed(&h->counts.free[id]), pops, slab;
    if (id >= SL_NCLASSES)
        return n;
    heap_pops(h, id, &pops, &slab); /* before the top: see above */
    unsigned held = mag_count(h, id);
    return n + pops + held + ld_relaxed(&h->mag_adj[id]);
}

/* The word of a free object that holds heap_cookie while it is in a
 * magazine (objects are at least 16 bytes; word 0 is the free-list link). */
sl_inline uint64_t *mag_cookie(void *p) { return (uint64_t *)p + 1; }
/* h's magazine of cache id from its top (NULL-ended), or NULL for a user
 * cache (slab_collect's mask). */
sl_inline void **heap_mag_of(struct heap *h, unsigned id) { return id < SL_NCLASSES ? h->mag_top[id] : NULL; }

/* Take the remote frees of s, a slab of h's (its owner, or heaps_lock for
 * an orphan): slab_collect with h's magazine as the mask and, for a malloc
 * class, the cookie as the freers' mark. */
sl_inline unsigned heap_slab_collect(struct heap *h, struct slab *s, struct mag_fill *fill)
{
    return slab_collect(s, heap_mag_of(h, s->cls), &h->remote_held, s->cls < SL_NCLASSES ? heap_cookie : 0, fill);
}

/* Take p, the head of slab s's free list, its link at `link` (slab_link;
 * a malloc class's is the object's first word): the owner's one free-list
 * pop, for malloc's fast and slow paths and the object caches'. */
sl_inline void slab_pop_owned(struct slab *s, void *p, void **link)
{
    s->free = *link;
    s->used++;
    bitmap_set_owner((uintptr_t)p);
}

/* A small malloc of n bytes whose count reached its class's sample
 * point (heap_pop_tick made 0: on mag_pops, k 0, or slab_pops, k 1): the
 * next point drawn and the count rebiased first (a malloc made meanwhile,
 * by a drain's shrinker or a signal handler, finds it whole), then the
 * malloc served, sampled (a page run of its own, run.sampled, recorded)
 * unless the profiler declines. The object its count was for is still
 * where the malloc found it. */
void *heap_alloc_sampled_slow(size_t n, unsigned k);

/* Small malloc of n bytes (n <= SL_SMALL_MAX), counted (heap_pop_tick):
 * the magazine's pop, else the current slab's. */
sl_inline void *heap_alloc_small(size_t n)
{
    struct heap *h = tls_heap;
    size_t cls = size_class_small(n); /* size_t: no zero extension on its uses as an index */
    void *p = h->mag_first[cls];
    if (likely(p)) {
        if (unlikely(heap_pop_tick(h, mag_pops, cls)))
            return heap_alloc_sampled_slow(n, 0);
        mag_set(h, cls, h->mag_top[cls] + 1);
        *mag_cookie(p) = 0; /* live bit kept while in the magazine */
    } else {
        struct slab *s = h->cur[cls];
        p = s->free;
        if (unlikely(!p))
            return heap_alloc_small_slow(n, false);
        if (unlikely(heap_pop_tick(h, slab_pops, cls)))
            return heap_alloc_sampled_slow(n, 1);
        slab_pop_owned(s, p, (void **)p);
        *mag_cookie(p) = 0; /* a freer's mark that a collect left (see the top) */
    }
    return p;
}

/* A small malloc that the sampler has counted already, or must not count
 * (an aligned malloc counted by bytes, realloc's new block, checked mode's
 * blocks): counted in counts.alloc, never sampled here (heap.c). */
void *heap_alloc_small_quiet(size_t n);

/* Profiling has started (the constructor): this thread's heap's counts
 * are biased to reach 0 at their next add, so that each class's next
 * malloc draws its first gap (heap_sample_arm); every other heap is
 * armed by its owner, at its next small malloc's slow path (a thread a
 * library's constructor started before sluice's: its mallocs until then
 * are not sampled). */
void heaps_sample_arm(void);

/* The owner freed into s (bulk: a chain of sl_free_bulk) and its free list
 * had been empty, or s became empty. */
void heap_free_local_slow(struct heap *h, struct slab *s, bool bulk);
/* For the bulk and cache layers: make h->cur[id] a slab with free objects
 * (NULL + ENOMEM); tell a slab's owner that a FULL slab got remote frees. */
struct slab *heap_refill(struct heap *h, unsigned id);
/* True if the owner had no slab waiting: the caller, on a free path with
 * no lock held, then calls page_wake_reclaimer for notify.c's look. */
bool heap_wake(uintptr_t owner_word, struct slab *s);
/* notify.c, for the reclaimer once a tick: does any heap have slabs on its
 * notify stack; and take back the slabs that remote frees emptied from
 * owners idle for a tick (decay_owner_idle), returning the bytes given
 * to the page layer. */
bool heaps_notify_waiting(void);
size_t heaps_take_emptied(uint64_t now, uint64_t tick_ms);
/* Free of a live object p of slab s (validated) by whichever thread. */
void heap_free_object(struct slab *s, void *p);

/* Push p (no longer live) onto the free list of slab s that this thread
 * owns, its free-list link at `link`: no atomics. */
sl_inline void slab_push_owned(struct heap *h, struct slab *s, void *p, void **link)
{
    sl_assert(s->used > 0 && slab_is_object_start(s, p));
    void *f = s->free;
    *link = f;
    s->free = p;
    s->used--;
    /* the slow path has work when the slab was exhausted, or is empty and
     * not the current one (the current slab emptying is the common case of
     * an alloc/free pair and needs nothing) */
    if (unlikely(!f) || unlikely(!s->used && s->state != SLAB_CURRENT))
        heap_free_local_slow(h, s, false);
}

/* Free of p (validated, its bitmap word w to become v) into slab s that
 * this thread owns, its free-list link at `link`. */
sl_inline void heap_free_owned(struct heap *h, struct slab *s, void *p, void **link, _Atomic uint64_t *w,
                               uint64_t v)
{
    st_relaxed(w, v);
    heap_count_fast(h, counts.free, s->cls);
    slab_push_owned(h, s, p, link);
}

/* Empty h's magazines (or only class cls's) into their slabs, clearing
 * the objects' live bits (the owner, or heaps_lock for an orphan). */
void heap_mag_flush(struct heap *h);
void heap_mag_flush_class(struct heap *h, unsigned cls);
/* Free of p (validated; a malloc-class object of h's) whose magazine is
 * full: straight onto its slab, its live bit cleared; in a burst, the
 * magazine grows, or at its room gives half back to the slabs, and p is
 * pushed; or idle: the magazine is laid out and p pushed. (The class is
 * read again from the page tag: passed along, the free fast path kept it
 * in a register of its own, one instruction more a pair.) */
void heap_free_mag_full_slow(struct heap *h, void *p);
/* The free-path contract (free_state.c): where a freed object can be,
 * found in the structure that holds it. The cookie in an object's second
 * word is a hint; only a state found here is reported. */
enum free_state {
    FREE_NOT_FOUND,   /* live, as far as any structure knows */
    FREE_IN_BATCH,    /* in a thread's remote batch */
    FREE_REMOTE_BIT,  /* its remote-free bit set, not taken by its owner */
    FREE_IN_MAGAZINE, /* in its owner's magazine */
    FREE_ON_SLAB,     /* no live bit: on its slab's free list, or unlinked */
};
/* Where p, an object start of slab s, is free; self is the calling
 * thread's heap (heap_empty if none). */
enum free_state free_state_find(void *p, struct slab *s, struct heap *self);
/* Does h's remote batch hold p? Does any other heap's than self's (heaps.c;
 * false if the registry's lock is busy)? */
bool heap_batch_holds(struct heap *h, const void *p);
bool heaps_batch_holds(const void *p, struct heap *self);
/* Free of p (live bit set; a malloc-class object of h's, class cls) whose
 * second word holds the cookie: reported if free_state_find finds it
 * free, else pushed onto the magazine (a live object whose bytes only
 * looked like a freed one's). */
void heap_free_cookie_slow(struct heap *h, void *p, unsigned cls);
/* Before a free of p (an object start of malloc slab s, by any thread):
 * if its second word holds the cookie and free_state_find confirms it,
 * report a double free. */
void heap_free_hint_check(void *p, struct slab *s);
/* Is p (live bit set) free all the same: its cookie matches and
 * free_state_find confirms it? For realloc, malloc_usable_size. */
bool heap_is_freed(void *p);

/* Push p (validated, not in the magazine) onto h's magazine of class cls,
 * or free it to its slab if the magazine is full. Not counted: the push
 * is (heap_count_free). */
sl_inline void heap_mag_push(struct heap *h, void *p, unsigned cls)
{
    void **top = h->mag_top[cls] - 1;
    sl_assert((ld_relaxed(page_tag((uintptr_t)p)) & ((1u << TAG_PAGE_SHIFT) - 1)) == cls);
    if (unlikely(*top == MAG_LIMIT))
        return heap_free_mag_full_slow(h, p);
    *mag_cookie(p) = h->cookie; /* counted by the top's move: heap_count_free */
    __atomic_store_n(top, p, __ATOMIC_RELAXED); /* read by free_state_find */
    st_release64(&h->mag_top[cls], top);
    h->mag_first[cls] = p;
}

/* Free of a 16-byte aligned address inside a pageblock (the caller looked
 * the pagemap up and tested the alignment: pagemap_is_block_grain).
 * Small frees by the owning thread stay here, into the magazine. The page
 * tag is read first (the block's header is always mapped, so any address
 * in a block may read it): it says whose slab, and which class, p is of.
 * Only for the heap's own slabs is the bitmap then read; a remote free
 * does not read the line the owner writes on every allocation (the slow
 * path batches it: remote_batch.c). Nothing is written before the bitmap
 * says p is live and its cookie says it is not in the magazine. */
sl_inline void heap_free_block_tagged(void *p, uint32_t tag)
{
    uintptr_t a = (uintptr_t)p;
    struct heap *h = tls_heap;
    uint32_t x = tag_relative(h, tag);
    if (unlikely(x >= TAG_MINE_LIMIT))
        return heap_free_block_slow(p, x);
    _Atomic uint64_t *w = bitmap_word(a);
    uint64_t v = ld_relaxed(w);
    uintptr_t bit = a >> SL_GRAIN_SHIFT; /* mod 64: the bit in w */
    if (unlikely(!bit_test64(v, bit)))
        return heap_free_block_slow(p, x);
    unsigned cls = x & ((1u << TAG_PAGE_SHIFT) - 1);
    if (unlikely(*mag_cookie(p) == h->cookie))
        return heap_free_cookie_slow(h, p, cls);
    heap_mag_push(h, p, cls);
}
/* The same, with p's page tag loaded by the caller (a sized free has read
 * it for the class). */
sl_inline void heap_free_block(void *p) { heap_free_block_tagged(p, ld_relaxed(page_tag((uintptr_t)p))); }

/* malloc_usable_size's fast path, free's checks without the write: is p
 * a live malloc-class object (then its usable size goes to *n)? If not,
 * the caller takes the full check, which reports what is not live. Live
 * here is: a 16-byte aligned address in a pageblock (the block's header
 * is then mapped), a page tag (a malloc slab's page; runs, user caches
 * and zero-size slots have none), its live bit (an object start, not on
 * a free list; checked mode's pointers never have one), and a second word
 * that is not the cookie. An object that is free but keeps its live bit
 * (in a magazine, in a remote batch, with its remote-free bit set) always
 * carries the cookie (the table in free_state.c), so it goes to the full
 * check, which finds it there and reports it; so does a live object
 * whose bytes only look freed, which the full check finds live. redis
 * sizes every allocation and every free this way (2.7 calls a malloc):
 * ~94 instructions a call through the full check, 33 here. */
sl_inline bool heap_usable_fast(const void *p, size_t *n)
{
    uintptr_t a = (uintptr_t)p;
    if (unlikely(!pagemap_is_block_grain(a)))
        return false;
    uint32_t t = ld_relaxed(page_tag(a));
    if (unlikely(!t) || unlikely(!bit_test64(ld_relaxed(bitmap_word(a)), a >> SL_GRAIN_SHIFT)) ||
        unlikely(*mag_cookie((void *)p) == heap_cookie)) /* set once, before the first heap */
        return false;
    *n = class_size[t & ((1u << TAG_PAGE_SHIFT) - 1)];
    return true;
}

/* Free of p in a pageblock now, whoever owns it (validated here). */
void heap_free_block_now(void *p);

/* Batched remote frees (remote_batch.c). A free of an object of another
 * heap's malloc slab (page tag t) goes into the freeing heap's batch,
 * unread and unwritten; the batch is flushed when it holds RBATCH_CAP
 * objects or RBATCH_BYTES, and when the thread exits, drains (sl_purge, a
 * watermark boost) or is orphaned by fork. A flush sets each run of
 * objects that share a bitmap word in the remote-free bitmap, a slab's
 * words under one hold of its remote lock (slab.h). */
void remote_batch_flush(struct heap *h);
/* Add p (page tag t) to h's batch (the order of the writes: remote_batch.c's top). */
sl_inline void remote_batch_add(struct heap *h, void *p, uint32_t t)
{
    unsigned n = h->rbatch_n, cls = t & ((1u << TAG_PAGE_SHIFT) - 1);
    __atomic_store_n(&h->rbatch[n], p, __ATOMIC_RELAXED); /* free_state_find reads the batch */
    h->rbatch_cls[n] = (uint8_t)cls;
    h->rbatch_mixed |= (uint8_t)(cls ^ h->rbatch_cls[0]); /* the first's, for n == 0 */
    atomic_signal_fence(memory_order_seq_cst); /* the slot before the count (remote_batch.c, the top) */
    __atomic_store_n(&h->rbatch_n, n + 1, __ATOMIC_RELEASE);
    uint32_t bytes = h->rbatch_bytes + class_size[cls];
    __atomic_store_n(&h->rbatch_bytes, bytes, __ATOMIC_RELAXED);
    count_add(&h->counts.free[cls], 1); /* freed now, as far as the program is concerned */
    count_add(&h->counts.remote[cls], 1);
    if (n + 1 == RBATCH_CAP || bytes >= RBATCH_BYTES)
        remote_batch_flush(h);
}

/* Usable size of a live block-backed allocation at p (validated). */
size_t heap_usable_size(void *p);
/* Free p to cache id (a user cache, or a malloc class), validating
 * everything; reports and aborts on misuse. */
void heap_free_to_cache(unsigned id, void *p);
/* Report that p (live; of slab s, or NULL if not a slab object) was freed
 * to cache id it does not belong to, and abort. */
_Noreturn void heap_wrong_cache_free(unsigned id, struct slab *s, const void *p);
/* Report a free of p that is not a live allocation, and abort. */
_Noreturn void heap_bad_free(const void *p, uintptr_t pm_entry, const char *op);

/* Thread lifecycle and process-wide operations. */
void heap_thread_exit(struct heap *h);
/* sl_check's part for the slab and page layers (heap_check.c): reports and
 * aborts on the first broken invariant. Other threads must be quiet. */
void heap_check_all(void);
/* What the program holds in pageblocks, from a walk of every allocated
 * run (page heap lock held while it walks): mallinfo, jemalloc's mallctl.
 * Objects in magazines, in remote batches and marked in the remote-free
 * bitmap (freed by another thread, not yet taken back) are free, though
 * their slabs count them as used. Read racily: each figure is right to
 * within what changed during the walk. */
struct heap_usage {
    size_t slab_bytes;   /* live slab objects, by their stride */
    size_t run_bytes;    /* live medium runs, by their pages */
    size_t active_bytes; /* pages of live runs and of slabs with a live object */
    /* malloc size classes: slabs, and the live objects in them */
    size_t class_slabs[SL_NCLASSES], class_objects[SL_NCLASSES];
};
void heap_usage(struct heap_usage *u);
sl_lock *heap_fork_lock(void); /* heaps_lock, for fork's handlers */
sl_lock *heapless_fork_lock(void); /* heap.c's heapless_lock, for fork's handlers */
void heap_fork_child(void);

#endif
