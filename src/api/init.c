/* init.c — process-wide start-up, fork handling and exit.
 *
 * Nothing needs initialising before the first malloc: every structure is
 * valid when zero, and thread heaps are created on demand. The library
 * constructor reads the options and registers the fork handlers (from a
 * constructor, not from inside malloc, since pthread_atfork may allocate).
 *
 * Locks: the fork prepare handler takes glibc's stdio list lock (when the
 * process has threads), then every lock of sluice in the one order,
 * enum lock_rank in base/lock.h (fork_locks_init checks that its list
 * follows it).
 * The child resets them all, orphans every other thread's heap, unmaps
 * what the teardown queue held (its workers are gone), and lets the
 * reclaimer and the workers start again when they are needed. Under
 * SLUICE_PUBLISH each process writes its own file: at load, at once in a
 * fork child, and the final figures at exit (stats/publish.c).
 *
 * Why the stdio lock first: glibc's fork runs the atfork prepare handlers,
 * then takes the stdio list lock, then its own malloc locks, in that order,
 * because stdio calls malloc with a FILE locked (getline) while fflush(NULL)
 * holds the list lock and waits for that FILE. A drop-in malloc that held
 * its locks from a prepare handler while fork waited for the list lock
 * would close the cycle (glibc's tst-malloc-fork-deadlock). So the prepare
 * handler takes the list lock itself, before sluice's locks: glibc's own
 * order. The lock is recursive, so fork's own take of it then nests. In
 * the parent glibc drops its hold and ours is dropped here; in the child
 * glibc resets the lock (and it is reset here too, in case glibc judged
 * the process single-threaded and took nothing).
 */
#include <pthread.h>
#include <stdbool.h>

#include "../base/fatal.h"
#include "../base/lock.h"
#include "../cache/cache.h"
#include "../huge/huge.h"
#include "../meta/meta.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/page.h"
#include "../prof/prof.h"
#include "../reclaim/reclaimer.h"
#include "../slab/heap.h"
#include "../stats/stats.h"
#include "../teardown/teardown.h"
#include "../zero/zero.h"
#include "checked.h"
#include "fast.h"

/* glibc's exported stdio list lock; weak, so another libc runs without. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern void _IO_list_resetlock(void) __attribute__((weak));
static bool stdio_locked; /* by the forking thread, prepare to parent/child */

/* sluice's locks in the order fork takes them (the numbers above). */
#define NFORK_LOCKS 11
static sl_lock *fork_locks[NFORK_LOCKS];
static bool fork_held[NFORK_LOCKS]; /* taken by the prepare handler */

static void fork_locks_init(void)
{
    sl_lock *const order[NFORK_LOCKS] = { prof_fork_lock(),    checked_fork_lock(), zero_fork_lock(), heap_fork_lock(),
                                          huge_fork_lock(),    purge_fork_lock(), page_fork_lock(),
                                          meta_fork_lock(),    teardown_fork_lock(), teardown_unmap_fork_lock(),
                                          heapless_fork_lock() };
    for (int i = 0; i < NFORK_LOCKS; i++) {
        fork_locks[i] = order[i];
        if (i && order[i - 1]->rank >= order[i]->rank)
            sl_fatal("fork's lock list is out of the lock order at", order[i], order[i]->name, (size_t)-1);
    }
}

/* A fork from a signal handler that interrupted this thread inside sluice
 * (it holds one of the locks) cannot take the others in order: their
 * holders may wait for the one it holds. Then each lock it lacks is tried
 * for a bounded time, and one it cannot get is not held across fork (the
 * child resets every lock; what that lock guarded may be mid-update in the
 * child, which the slab layer repairs for heaps orphaned by fork). glibc's
 * own malloc deadlocks there; POSIX promises nothing for a multi-threaded
 * program. The stdio list lock is left to glibc in that case. */
static void fork_prepare(void)
{
    bool inside = false;
    for (int i = 0; i < NFORK_LOCKS; i++)
        inside |= lock_held_by_self(fork_locks[i]);
    stdio_locked = !inside && _IO_list_lock && _IO_list_unlock && _IO_list_resetlock &&
                   !os_single_threaded();
    if (stdio_locked)
        _IO_list_lock();
    st_relaxed(&lock_fork_active, 1);
    for (int i = 0; i < NFORK_LOCKS; i++)
        fork_held[i] = lock_acquire_fork(fork_locks[i], inside);
}

static void fork_parent(void)
{
    for (int i = NFORK_LOCKS; i-- > 0;)
        if (fork_held[i])
            lock_release(fork_locks[i]);
    st_relaxed(&lock_fork_active, 0);
    if (stdio_locked)
        _IO_list_unlock();
}

static void fork_child(void)
{
    for (int i = 0; i < NFORK_LOCKS; i++)
        lock_reset(fork_locks[i]);
    lock_fork_child_reset();
    purge_fork_child();
    reclaimer_fork_child();
    teardown_fork_child();
    heap_fork_child();
    cache_fork_child();
    st_relaxed(&lock_fork_active, 0);
    if (stdio_locked)
        _IO_list_resetlock();
    stats_publish_fork_child(); /* last: it reads every layer's figures */
}

/* Referenced from malloc.c so that a static link (libsluice.a), which takes
 * only the objects it needs, always brings this one and its constructor. */
sl_hidden char sl_init_linked;

__attribute__((constructor)) static void sluice_init(void)
{
    options_init();
    checked_init();
    prof_init();
    if (prof_on) /* the heaps made before this: the main thread's */
        heaps_sample_arm();
    /* malloc's inline path: none in checked mode (sl_small_limit 0) */
    alloc_fast_limit = sl_small_limit;
    reclaimer_init();
    fork_locks_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    stats_publish(PUBLISH_START);
}

__attribute__((destructor)) static void sluice_fini(void)
{
    prof_fini(); /* the profile and the leak report, if asked for */
    if (sl_opt.stats)
        stats_print();
    stats_publish(PUBLISH_FINAL);
}
