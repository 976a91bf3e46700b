/* lock.h — the one mutex of sluice: a futex lock (Drepper's three states)
 * that knows its owner.
 *
 * Why the owner: fork() runs sluice's prepare handler, which takes every lock
 * so the child inherits a consistent heap. Two callers would deadlock on a
 * plain mutex: a signal handler that forks while its own thread was inside
 * the allocator holding a lock, and another library's prepare handler that
 * calls malloc after ours ran. While a fork is being prepared (lock_fork_active),
 * a thread may re-enter a lock it already owns; the nested holds are counted.
 * The child reinitialises every lock (lock_reset).
 *
 * Locks are leaves or taken in the order numbered in init.c.
 */
#ifndef SL_LOCK_H
#define SL_LOCK_H

#include "common.h"

typedef struct sl_lock {
    _Atomic int state;          /* 0 free, 1 held, 2 held with waiters */
    _Atomic(const void *) owner; /* thread identity (a TLS address) or NULL */
    int nested;                 /* re-entries during fork, owner-only */
} sl_lock;

#define SL_LOCK_INIT { 0, NULL, 0 }

extern _Atomic int lock_fork_active;
const void *lock_self(void);   /* this thread's identity */

void lock_acquire_slow(sl_lock *l);

sl_inline void lock_acquire(sl_lock *l)
{
    int expected = 0;
    if (likely(atomic_compare_exchange_strong_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                       memory_order_relaxed))) {
        st_relaxed(&l->owner, lock_self());
        return;
    }
    lock_acquire_slow(l);
}

void lock_release_slow(sl_lock *l);

sl_inline void lock_release(sl_lock *l)
{
    if (unlikely(l->nested)) {
        l->nested--;
        return;
    }
    st_relaxed(&l->owner, NULL);
    if (unlikely(atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2))
        lock_release_slow(l);
}

bool lock_try(sl_lock *l);
void lock_reset(sl_lock *l);

#endif
