/* lock.h — the one mutex of sluice: a futex lock that knows its owner.
 *
 * Why the owner: fork() runs sluice's prepare handler, which takes every lock
 * so the child inherits a consistent heap. Two callers would deadlock on a
 * plain mutex: a signal handler that forks while its own thread was inside
 * the allocator holding a lock, and another library's prepare handler that
 * calls malloc after ours ran. While a fork is being prepared (lock_fork_active),
 * a thread may re-enter a lock it already owns; the nested holds are counted.
 * The child reinitialises every lock (lock_reset).
 *
 * The lock order is written once, here (enum lock_rank): a thread takes
 * locks in increasing rank, and fork's prepare handler takes them all in
 * it (api/init.c). In a debug build (SLUICE_DEBUG=ON) every acquire checks
 * that its rank is above every rank its thread holds, and aborts with a
 * line naming both locks otherwise; a try-lock cannot deadlock and is not
 * checked, and neither is fork's prepare handler.
 */
#ifndef SL_LOCK_H
#define SL_LOCK_H

#include "common.h"

/* The lock word is the owner's identity itself (CAS 0 -> self), so there is
 * no instant at which a lock is held by nobody known: a signal handler
 * that forks always recognises a lock its own thread holds. Sleepers wait on
 * a separate futex word. */
typedef struct sl_lock {
    _Atomic(const void *) owner; /* NULL free, else the holder's identity */
    _Atomic int waiters;         /* threads asleep or about to sleep */
    _Atomic int seq;             /* futex word, bumped by a release with waiters */
    int nested;                  /* re-entries during fork, owner-only */
    unsigned rank;               /* enum lock_rank; set once */
    const char *name;            /* for the debug build's report */
} sl_lock;

/* The one lock order, lowest first. */
enum lock_rank {
    LOCK_PUBLISH = 1,    /* stats/publish.c: one writer of the published file; never held across fork */
    LOCK_PROF,           /* prof/table.c: the profile's tables; -> meta only */
    LOCK_QUARANTINE,     /* api/checked.c: a leaf, taken alone */
    LOCK_ZERO,           /* zero/zero.c: -> meta only */
    LOCK_HEAPS,          /* slab/heaps.c: heap lists, orphans, cache ids */
    LOCK_HUGE,           /* huge/huge_cache.c */
    LOCK_PURGE,          /* page/purge.c: one purger at a time */
    LOCK_PAGE_HEAP,      /* page/page.c: the shared page heap */
    LOCK_META,           /* meta/meta.c: sluice's own records */
    LOCK_TEARDOWN,       /* teardown/teardown.c: the queue (a leaf) */
    LOCK_UNMAP,          /* teardown/teardown.c: unmapping (a leaf) */
    LOCK_HEAPLESS,       /* slab/heap.c: remote frees of threads with no heap (a leaf) */
    LOCK_RANKS
};

#define SL_LOCK_INIT(rank) { NULL, 0, 0, 0, rank, #rank }

extern _Atomic int lock_fork_active;
const void *lock_self(void); /* this thread's identity */
/* Every lock of sluice is in one table (SL_LOCK_DEFINE puts it there), so
 * that work that takes locks of its own, such as the reclaim registry's
 * drains (drain.h), can ask whether this thread holds any: it runs only
 * if not. A look at each lock's owner, on that rare path only. */
bool lock_any_held(void);
#define SL_LOCK_DEFINE(var, rank)                                              \
    sl_lock var = SL_LOCK_INIT(rank);                                          \
    sl_section_entry("sl_locks") static sl_lock *const var##_in_table = &var

void lock_acquire_slow(sl_lock *l);

/* Debug builds: this acquire's rank against the thread's (lock.c). */
void lock_rank_check(sl_lock *l);
void lock_rank_drop(sl_lock *l);

sl_inline void lock_acquire(sl_lock *l)
{
    const void *expected = NULL;
    if (config_debug)
        lock_rank_check(l);
    if (likely(atomic_compare_exchange_strong_explicit(&l->owner, &expected, lock_self(), memory_order_acquire,
                                                       memory_order_relaxed)))
        return;
    lock_acquire_slow(l);
}

void lock_release_slow(sl_lock *l);

sl_inline void lock_release(sl_lock *l)
{
    if (unlikely(l->nested)) {
        l->nested--;
        return;
    }
    if (config_debug)
        lock_rank_drop(l);
    atomic_store_explicit(&l->owner, NULL, memory_order_seq_cst);
    if (unlikely(atomic_load_explicit(&l->waiters, memory_order_seq_cst)))
        lock_release_slow(l);
}

bool lock_try(sl_lock *l);
void lock_reset(sl_lock *l);
/* A fork child: its one thread holds nothing once every lock is reset
 * (the debug build's record of ranks is cleared). */
void lock_fork_child_reset(void);
/* Does this thread hold l? (fork's prepare handler) */
sl_inline bool lock_held_by_self(sl_lock *l) { return atomic_load_explicit(&l->owner, memory_order_relaxed) == lock_self(); }
/* The fork prepare handler's acquire. bounded: this thread already holds a
 * lock of sluice (a signal handler forked inside the allocator), so taking
 * one it does not hold may break the lock order: the holder may wait for
 * the lock this thread holds. Then it tries for a bounded time and gives
 * up (false): the lock is not held across fork, and the child resets it. */
bool lock_acquire_fork(sl_lock *l, bool bounded);

#endif
