/* init.c — process-wide start-up, fork handling and exit.
 *
 * Nothing needs initialising before the first malloc: every structure is
 * valid when zero, and thread heaps are created on demand. The library
 * constructor reads the options and registers the fork handlers (from a
 * constructor, not from inside malloc, since pthread_atfork may allocate).
 *
 * Lock order, taken in this order by the fork prepare handler:
 *   1 heaps_lock (heaps.c)  2 huge_lock (huge.c)  3 purge_lock (purge.c)
 *   4 page heap lock (page.c)  5 meta_lock (meta.c)
 * The child resets them all, orphans every other thread's heap, and lets
 * the reclaimer thread start again when it is needed.
 */
#include <pthread.h>

#include "../base/lock.h"
#include "../huge/huge.h"
#include "../meta/meta.h"
#include "../options/options.h"
#include "../page/page.h"
#include "../reclaim/reclaimer.h"
#include "../slab/heap.h"
#include "../stats/stats.h"

static void fork_prepare(void)
{
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
