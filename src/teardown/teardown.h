/* teardown.h — layer 8: giving big ranges back to the kernel off the
 * caller's path (the kernel's parallel free: mmu_gather batches handed to
 * a workqueue of max_active workers).
 *
 * A range handed over here is already invisible to the rest of sluice: its
 * pagemap entries are cleared and no descriptor points at it, so a double
 * free or realloc of it is reported like any pointer sluice does not own.
 * It stays mapped until its teardown ends, so its addresses cannot be
 * handed out again early. Ranges of SLUICE_TEARDOWN_MIN and more, while
 * workers may run (SLUICE_TEARDOWN), are queued; the caller returns at
 * once. The queue splits each range into gather batches of TD_BATCH bytes
 * that workers release in parallel (madvise(MADV_DONTNEED) runs under the
 * mmap lock held for reading), and whoever ends the last batch unmaps the
 * range. Smaller ranges, and all of them with SLUICE_TEARDOWN=off or in a
 * single-threaded program under auto, are unmapped by the caller.
 *
 * Never lose memory to the queue: a refused mapping first finishes the
 * teardown queued so far (os_set_enomem_hook), and a queue over
 * SLUICE_TEARDOWN_MAX_PENDING makes the freeing thread release a batch
 * itself. A process may exit with teardown pending: nothing waits.
 *
 * Locks: td_lock (the queue; a leaf: taken under the page heap and meta
 * locks by the ENOMEM hook) then unmap_lock (a range's final munmap, so
 * that fork sees it done or not started). Workers block every signal,
 * allocate nothing and take no other lock.
 */
#ifndef SL_TEARDOWN_H
#define SL_TEARDOWN_H

#include "../base/common.h"

struct sl_lock;

/* Give [base, base + len) back (whole mappings or a tail of one, page
 * aligned, already out of the pagemap). Takes td_lock only. may_start: it
 * may start a worker thread, which allocates (pthread_create): only with
 * no sluice lock held; else, with no worker running, it unmaps in place. */
void teardown_release(void *base, size_t len, bool may_start);
/* Mark the calling thread (the reclaimer) as sluice's own: its releases
 * are done in place, since it is off the program's path already and may
 * not start threads (pthread_create allocates). */
void teardown_background_thread(void);
/* Wait until every range queued before the call is unmapped, helping with
 * its batches (sl_flush, and a refused mapping); true if any was queued. */
bool teardown_flush(void);

struct teardown_gauges {
    size_t pending_bytes;  /* queued, no worker on them yet */
    size_t inflight_bytes; /* handed to a worker or helper, not yet released */
    size_t mapped_bytes;   /* all queued ranges: still mapped until unmapped */
    unsigned ranges, workers;
};
void teardown_gauges(struct teardown_gauges *g);
void teardown_check(void); /* sl_check's part; aborts on a broken invariant */
/* For fork: the locks, in order; the child unmaps what the queue held (its
 * workers are gone) and starts with an empty queue. */
struct sl_lock *teardown_fork_lock(void);
struct sl_lock *teardown_unmap_fork_lock(void);
void teardown_fork_child(void);

#endif
