/* init.c — process-wide start-up, fork handling and exit.
 *
 * Nothing needs initialising before the first malloc: every structure is
 * valid when zero, and thread heaps are created on demand. The library
 * constructor reads the options and registers the fork handlers (from a
 * constructor, not from inside malloc, since pthread_atfork may allocate).
 *
 * Lock order, taken in this order by the fork prepare handler:
 *   0 glibc's stdio list lock (_IO_list_lock), when the process has threads
 *   1 heaps_lock (heaps.c)  2 huge_lock (huge.c)  3 purge_lock (purge.c)
 *   4 page heap lock (page.c)  5 meta_lock (meta.c)
 * The child resets them all, orphans every other thread's heap, and lets
 * the reclaimer thread start again when it is needed.
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

#include "../base/lock.h"
#include "../huge/huge.h"
#include "../meta/meta.h"
#include "../options/options.h"
#include "../page/page.h"
#include "../reclaim/reclaimer.h"
#include "../slab/heap.h"
#include "../stats/stats.h"

/* glibc's exported stdio list lock; weak, so another libc runs without. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern void _IO_list_resetlock(void) __attribute__((weak));
extern char __libc_single_threaded __attribute__((weak));
static bool stdio_locked; /* by the forking thread, prepare to parent/child */

static void fork_prepare(void)
{
    stdio_locked = _IO_list_lock && _IO_list_unlock && _IO_list_resetlock &&
                   !(&__libc_single_threaded && __libc_single_threaded);
    if (stdio_locked)
        _IO_list_lock();
    st_relaxed(&lock_fork_active, 1);
    heap_fork_prepare();
    huge_fork_prepare();
    purge_fork_prepare();
    page_fork_prepare();
    meta_fork_prepare();
}

static void fork_parent(void)
{
    meta_fork_parent();
    page_fork_parent();
    purge_fork_parent();
    huge_fork_parent();
    heap_fork_parent();
    st_relaxed(&lock_fork_active, 0);
    if (stdio_locked)
        _IO_list_unlock();
}

static void fork_child(void)
{
    meta_fork_child();
    page_fork_child();
    purge_fork_child();
    reclaimer_fork_child();
    huge_fork_child();
    heap_fork_child();
    st_relaxed(&lock_fork_active, 0);
    if (stdio_locked)
        _IO_list_resetlock();
}

/* Referenced from malloc.c so that a static link (libsluice.a), which takes
 * only the objects it needs, always brings this one and its constructor. */
sl_hidden char sl_init_linked;

__attribute__((constructor)) static void sluice_init(void)
{
    options_init();
    reclaimer_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor)) static void sluice_fini(void)
{
    if (sl_opt.stats)
        stats_print();
}
