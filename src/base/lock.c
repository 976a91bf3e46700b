/* lock.c — slow paths of the futex lock; see lock.h for the fork rule. */
#include "lock.h"

#include "../os/os.h"

_Atomic int lock_fork_active;
static __thread char lock_identity;

const void *lock_self(void) { return &lock_identity; }

void lock_acquire_slow(sl_lock *l)
{
    if (ld_relaxed(&lock_fork_active) && ld_relaxed(&l->owner) == lock_self()) {
        l->nested++;
        return;
    }
    for (int spin = 0; spin < 64; spin++) {
        int expected = 0;
        if (atomic_compare_exchange_weak_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
            st_relaxed(&l->owner, lock_self());
            return;
        }
        __builtin_ia32_pause();
    }
    while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0)
        os_futex_wait(&l->state, 2);
    st_relaxed(&l->owner, lock_self());
}

void lock_release_slow(sl_lock *l) { os_futex_wake(&l->state, 1); }

bool lock_try(sl_lock *l)
{
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
        st_relaxed(&l->owner, lock_self());
        return true;
    }
    return false;
}

void lock_reset(sl_lock *l)
{
    atomic_store_explicit(&l->state, 0, memory_order_relaxed);
    st_relaxed(&l->owner, NULL);
    l->nested = 0;
}
