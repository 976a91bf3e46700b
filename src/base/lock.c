/* lock.c — slow paths of the futex lock; see lock.h for the fork rule.
 *
 * No lost wake-up: a waiter announces itself (waiters++) before its last
 * attempt, and sleeps only if seq has not moved since it read it; a release
 * clears owner before it reads waiters (both seq_cst), and bumps seq before
 * waking.
 */
#include "lock.h"

#include "../os/os.h"
#include "fatal.h"

_Atomic int lock_fork_active;
static __thread char lock_identity;
extern sl_lock *const __start_sl_locks[] __attribute__((weak, visibility("hidden")));
extern sl_lock *const __stop_sl_locks[] __attribute__((weak, visibility("hidden")));

bool lock_any_held(void)
{
    for (sl_lock *const *l = __start_sl_locks; l < __stop_sl_locks; l++)
        if (lock_held_by_self(*l))
            return true;
    return false;
}

/* Debug builds: the lock this thread holds at each rank (NULL: none). */
static __thread sl_lock *held_by_rank[LOCK_RANKS];

void lock_rank_check(sl_lock *l)
{
    if (ld_relaxed(&lock_fork_active) || ld_relaxed(&l->owner) == lock_self())
        return; /* fork's prepare handler, and its re-entries */
    for (unsigned r = l->rank; r < LOCK_RANKS; r++)
        if (held_by_rank[r]) {
            char what[128];
            size_t n = 0;
            const char *parts[] = { "lock order: taking ", l->name, " while holding ", held_by_rank[r]->name,
                                    " (src/base/lock.h: enum lock_rank) at" };
            for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
                for (const char *c = parts[i]; *c && n + 1 < sizeof what; c++)
                    what[n++] = *c;
            what[n] = 0;
            sl_fatal(what, l, NULL, 0);
        }
    held_by_rank[l->rank] = l;
}

void lock_fork_child_reset(void)
{
    for (unsigned r = 0; r < LOCK_RANKS; r++)
        held_by_rank[r] = NULL;
}

void lock_rank_drop(sl_lock *l)
{
    if (held_by_rank[l->rank] == l)
        held_by_rank[l->rank] = NULL;
}

const void *lock_self(void) { return &lock_identity; }

static bool try_once(sl_lock *l)
{
    const void *expected = NULL;
    return atomic_compare_exchange_strong_explicit(&l->owner, &expected, lock_self(), memory_order_acquire,
                                                   memory_order_relaxed);
}

void lock_acquire_slow(sl_lock *l)
{
    if (ld_relaxed(&lock_fork_active) && ld_relaxed(&l->owner) == lock_self()) {
        l->nested++;
        return;
    }
    for (int spin = 0; spin < 64; spin++) {
        if (ld_relaxed(&l->owner) == NULL && try_once(l))
            return;
        cpu_relax();
    }
    atomic_fetch_add_explicit(&l->waiters, 1, memory_order_seq_cst);
    for (;;) {
        int seq = atomic_load_explicit(&l->seq, memory_order_seq_cst);
        if (try_once(l))
            break;
        os_futex_wait(&l->seq, seq);
    }
    atomic_fetch_sub_explicit(&l->waiters, 1, memory_order_relaxed);
}

void lock_release_slow(sl_lock *l)
{
    atomic_fetch_add_explicit(&l->seq, 1, memory_order_seq_cst);
    os_futex_wake(&l->seq, 1);
}

bool lock_try(sl_lock *l)
{
    if (!try_once(l))
        return false;
    if (config_debug)
        held_by_rank[l->rank] = l;
    return true;
}

#define FORK_TRY_SPINS (1L << 22) /* some milliseconds */

bool lock_acquire_fork(sl_lock *l, bool bounded)
{
    if (!bounded) {
        lock_acquire(l); /* a lock this thread holds is re-entered (nested) */
        return true;
    }
    if (lock_held_by_self(l)) {
        l->nested++;
        return true;
    }
    for (long i = 0; i < FORK_TRY_SPINS; i++) {
        if (ld_relaxed(&l->owner) == NULL && try_once(l))
            return true;
        cpu_relax();
    }
    return false;
}

void lock_reset(sl_lock *l)
{
    atomic_store_explicit(&l->owner, NULL, memory_order_relaxed);
    atomic_store_explicit(&l->waiters, 0, memory_order_relaxed);
    l->nested = 0;
}
