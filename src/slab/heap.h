/* heap.h — a thread heap: the current slab and partial slabs of every cache
 * id (malloc size classes and user object caches) for one thread, its
 * magazines (heap_mag.h), its remote-free batch (heap_free.h), its page
 * cache and its counters; the registry of heaps, the page tags of their
 * slabs, and the thread lifecycle. The two fast paths of sluice, small
 * malloc by any thread and small free by the owner, are in heap_mag.h
 * (heap_alloc_small) and heap_free.h (heap_free_block_tagged).
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
 * Locks: heaps_lock (the heap lists, orphans, cache ids: LOCK_HEAPS in
 * the one lock order, base/lock.h); everything else here is the owner's.
 */
#ifndef SL_HEAP_H
#define SL_HEAP_H

#include "../page/decay.h"
#include "../page/page.h"
#include "../pagemap/pagemap.h"
#include "../stats/stats.h"
#include "mag_trim.h"
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

#define RBATCH_CAP    256         /* remote frees batched (remote_batch.c), in units: */
#define RBATCH_BYTES  (RBATCH_CAP << 10) /* an object of 1 KiB or less is one (class_batch_units) */
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
    uint32_t rbatch_n, rbatch_units;     /* owner: remote frees batched, and their units
                                          * (class_batch_units) */
    void *rbatch[RBATCH_CAP];            /* owner (remote_batch.c) */
    uint8_t rbatch_cls[RBATCH_CAP];      /* owner: each one's size class */
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
    uint64_t trim_ms, look_ms;          /* owner: when heap_mag_trim and heap_mag_look
                                         * last ran (os_now_ms) */
    struct mag_trim_seen trim_seen[SL_NCLASSES]; /* owner: each magazine as they last saw
                                         * it (mag_trim.h); low 0 once malloc found it
                                         * empty (heap_alloc_small_slow) */
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
/* Free of p in a pageblock that the fast path did not take; x is its page
 * tag as the fast path read it, relative to this thread's heap
 * (tag_relative: the slow path undoes it, so the fast path keeps no copy). */
void heap_free_block_slow(void *p, uint32_t x);
/* The same for p whose page tag is another heap's (x >= TAG_MINE_LIMIT
 * against h, this thread's heap, which the fast path holds): the remote
 * free, batched (heap_free.c). */
void heap_free_other_slow(void *p, uint32_t x, struct heap *h);
struct heap *heap_get_slow(void); /* this thread's heap, created if needed */
/* heap_get_slow for a thread freeing an object whose page tag is want (0:
 * none): if its heap's thread has exited, this thread takes that heap. */
struct heap *heap_get_want(uint32_t want);

sl_inline struct heap *heap_get(void)
{
    struct heap *h = tls_heap;
    return likely(h != &heap_empty) ? h : heap_get_slow();
}
/* heap_get_slow for a free path: errno as it was, even when no heap can
 * be made (a free never sets errno). */
struct heap *heap_get_quiet(uint32_t want);
/* heap_get for a free path (heap_get_quiet). */
sl_inline struct heap *heap_get_for_free(void)
{
    struct heap *h = tls_heap;
    return likely(h != &heap_empty) ? h : heap_get_quiet(0);
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
/* The grain (16 bytes) of p in its slab, whose page tag is t (nonzero):
 * (p - tag_slab_head(p, t)) / 16, without the subtraction. */
sl_inline uint32_t tag_slab_grain(const void *p, uint32_t t)
{
    return (uint32_t)(((uintptr_t)p & (SL_PAGE - 1)) >> SL_GRAIN_SHIFT) |
           (t >> TAG_PAGE_SHIFT & ((1u << TAG_SLAB_PAGE_BITS) - 1)) << (SL_PAGE_SHIFT - SL_GRAIN_SHIFT);
}

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