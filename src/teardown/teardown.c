/* teardown.c — the teardown queue and its worker pool. See teardown.h.
 *
 * Invariants (td_lock): every queued range is in a slot and on the queue,
 * oldest first; for each, done <= next <= len and busy = bytes handed out
 * whose release has not been retired; pending = sum of (len - next),
 * inflight = sum of busy. A range leaves the queue only once unmapped.
 * workers counts the running workers, idle those waiting for work.
 */
#define _GNU_SOURCE
#include "teardown.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "../base/drain.h"
#include "../base/fatal.h"
#include "../base/lock.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../pagemap/pagemap.h"
#include "../stats/stats.h"

#define TD_BATCH       ((size_t)32 << 20) /* a gather batch: one madvise call */
#define TD_SLOTS       256                /* ranges queued at once; more go synchronous */
#define TD_WORKERS_MAX 64

struct td_range {
    uint8_t *base;
    size_t len;
    size_t next;        /* offset of the next batch to hand out */
    size_t done;        /* bytes of ended batches */
    size_t busy;        /* bytes handed out and not retired */
    uint64_t ticket;    /* order of queueing, for flush */
    uint64_t queued_ns;
    bool used;          /* in the queue (else on the free slot list) */
    bool unmapped;      /* unmap_lock: its final munmap is done */
    struct td_range *link;
};

struct batch {
    struct td_range *r;
    size_t off, n;
};

static SL_LOCK_DEFINE(td_lock, LOCK_TEARDOWN);
static SL_LOCK_DEFINE(unmap_lock, LOCK_UNMAP);
static struct td_range slots[TD_SLOTS];
static struct td_range *free_slots, *head;
static bool slots_ready;
static uint64_t tickets;
static size_t pending, inflight, queued_bytes;
static unsigned nranges, workers, idle, flush_waiters;
static _Atomic int work_seq, done_seq; /* futex words: work queued, a range retired */
static long max_workers = -1, default_pending = -1;

/* Options resolved once (td_lock): the worker count, and the queue bound
 * used when SLUICE_TEARDOWN_MAX_PENDING is unset. */
static void limits_locked(void)
{
    if (max_workers >= 0)
        return;
    long w = sl_opt.teardown_workers;
    if (w < 0) {
        w = sysconf(_SC_NPROCESSORS_ONLN);
        w = w < 1 ? 1 : w > 8 ? 8 : w; /* the kernel's max_active for this work */
    }
    max_workers = w > TD_WORKERS_MAX ? TD_WORKERS_MAX : w;
    long pages = sysconf(_SC_PHYS_PAGES);
    default_pending = pages > 0 ? pages / 8 * (long)SL_PAGE : (1L << 30);
}

/* The queue's bound: SLUICE_TEARDOWN_MAX_PENDING as it is now (sl_ctl may
 * change it while the program runs), else an eighth of RAM. */
static size_t pending_bound_locked(void)
{
    long mp = __atomic_load_n(&sl_opt.teardown_max_pending, __ATOMIC_RELAXED);
    return (size_t)(mp > 0 ? mp : default_pending);
}

static struct td_range *slot_get(void)
{
    if (!slots_ready) {
        for (int i = TD_SLOTS; i-- > 0;) {
            slots[i].link = free_slots;
            free_slots = &slots[i];
        }
        slots_ready = true;
    }
    struct td_range *r = free_slots;
    if (r)
        free_slots = r->link;
    return r;
}

/* Hand out the next batch of the oldest range that has one (td_lock). */
static bool batch_take(struct batch *b)
{
    for (struct td_range *r = head; r; r = r->link) {
        if (r->next == r->len)
            continue;
        b->r = r;
        b->off = r->next;
        b->n = r->len - r->next < TD_BATCH ? r->len - r->next : TD_BATCH;
        r->next += b->n;
        r->busy += b->n;
        pending -= b->n;
        inflight += b->n;
        return true;
    }
    return false;
}

/* A range is unmapped: off the queue, counted, its slot free (td_lock).
 * True if a flush waits for it: wake it once the lock is dropped. */
static bool range_retire(struct td_range *r)
{
    struct td_range **it = &head;
    while (*it != r)
        it = &(*it)->link;
    *it = r->link;
    inflight -= r->busy;
    nranges--;
    queued_bytes -= r->len;
    uint64_t ns = os_now_ns() - r->queued_ns;
    stat_add(stats_global, STAT_teardown_bytes, r->len);
    stat_add(stats_global, STAT_teardown_ns, ns);
    if (ns > ld_relaxed(&stats_global[STAT_teardown_max_ns]))
        st_relaxed(&stats_global[STAT_teardown_max_ns], ns);
    r->used = false;
    r->link = free_slots;
    free_slots = r;
    atomic_fetch_add(&done_seq, 1);
    return flush_waiters > 0;
}

/* Release batch b (no lock held), then retire it; the thread that ends a
 * range's last batch unmaps the range. helper: not a worker. */
static void batch_run(struct batch *b, bool helper)
{
    struct td_range *r = b->r;
    if (b->n < r->len) /* one batch of the whole range: the munmap below is all */
        os_purge(r->base + b->off, b->n, OS_CLEAN);
    lock_acquire(&td_lock);
    stat_add(stats_global, STAT_teardown_batches, 1);
    if (helper)
        stat_add(stats_global, STAT_teardown_helped, 1);
    r->done += b->n;
    if (r->done < r->len) {
        r->busy -= b->n;
        inflight -= b->n;
        lock_release(&td_lock);
        return;
    }
    lock_release(&td_lock);
    lock_acquire(&unmap_lock); /* fork sees the range mapped or gone, never between */
    os_unmap(r->base, r->len);
    r->unmapped = true;
    lock_release(&unmap_lock);
    lock_acquire(&td_lock);
    bool waiters = range_retire(r);
    lock_release(&td_lock);
    if (waiters)
        os_futex_wake(&done_seq, INT_MAX);
}

/* With td_lock held: take a batch and release it (the lock dropped
 * meanwhile, held again on return); false if there was none. */
static bool run_one_locked(bool helper)
{
    struct batch b;
    if (!batch_take(&b))
        return false;
    lock_release(&td_lock);
    batch_run(&b, helper);
    lock_acquire(&td_lock);
    return true;
}

static void *worker_main(void *arg)
{
    (void)arg;
    /* SCHED_BATCH: a woken worker does not preempt the thread that woke it
     * (the freeing thread returns first), and the program's threads are
     * preferred when the CPUs are busy; on idle CPUs it runs at full speed */
    struct sched_param sp = { 0 };
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    lock_acquire(&td_lock);
    for (;;) {
        if (run_one_locked(false))
            continue;
        int seq = ld_relaxed(&work_seq);
        idle++;
        lock_release(&td_lock);
        uint64_t t0 = os_now_ms();
        os_futex_wait_ms(&work_seq, seq, (uint64_t)sl_opt.teardown_idle_ms);
        lock_acquire(&td_lock);
        idle--;
        if (ld_relaxed(&work_seq) == seq && os_now_ms() - t0 >= (uint64_t)sl_opt.teardown_idle_ms)
            break; /* idle for the whole wait: exit */
    }
    workers--;
    lock_release(&td_lock);
    return NULL;
}

static __thread bool on_background_thread;

void teardown_background_thread(void) { on_background_thread = true; }

static bool async_allowed(size_t len)
{
    if (on_background_thread || sl_opt.teardown == BG_OFF || len < (size_t)sl_opt.teardown_min)
        return false;
    return sl_opt.teardown == BG_ON || !os_single_threaded();
}

void teardown_release(void *base, size_t len, bool may_start)
{
    if (!len)
        return;
    struct td_range *r = NULL;
    bool async = async_allowed(len);
    if (async) {
        lock_acquire(&td_lock);
        limits_locked();
        if ((!may_start && !workers) || !(r = slot_get()))
            lock_release(&td_lock);
    }
    if (!r) { /* synchronous: small, no workers wanted or running, or the queue is full */
        if (len >= (size_t)sl_opt.teardown_min) {
            stat_add_shared(STAT_teardown_sync, 1);
            stat_add_shared(STAT_teardown_sync_bytes, len);
        }
        os_unmap(base, len);
        return;
    }
    *r = (struct td_range){ .base = base, .len = len, .ticket = ++tickets, .queued_ns = os_now_ns(), .used = true };
    struct td_range **it = &head;
    while (*it)
        it = &(*it)->link;
    *it = r;
    nranges++;
    pending += len;
    queued_bytes += len;
    stat_add(stats_global, STAT_teardown_ranges, 1);
    /* the queue before this range is past its bound (the workers fall
     * behind): this thread releases batches, oldest first, until it is
     * not, so the queue never holds more than the bound and one range */
    while (pending > pending_bound_locked() + len && run_one_locked(true))
        ;
    /* a worker for each batch no idle worker will take, up to the bound;
     * started here, by the freeing thread, since pthread_create allocates
     * and a worker allocates nothing. Waking and starting come last, so
     * that this thread is done with the queue before they compete for it. */
    size_t batches = (pending + TD_BATCH - 1) / TD_BATCH;
    unsigned spawn = 0;
    while (may_start && workers + spawn < (unsigned)max_workers && idle + spawn < batches)
        spawn++;
    workers += spawn;
    bool wake = idle > 0;
    if (wake)
        atomic_fetch_add(&work_seq, 1);
    lock_release(&td_lock);
    if (wake)
        os_futex_wake(&work_seq, INT_MAX);
    unsigned started = 0;
    while (started < spawn && os_thread_start(worker_main, NULL))
        started++;
    if (started)
        stat_add_shared(STAT_teardown_workers, started);
    if (started == spawn)
        return;
    lock_acquire(&td_lock);
    workers -= spawn - started; /* pthread_create refused the rest */
    bool alone = max_workers > 0 && workers == 0;
    lock_release(&td_lock);
    if (alone) /* workers allowed but none could start: this thread does it all */
        teardown_flush();
}

/* Is a range queued no later than ticket t? (td_lock) */
static bool queued_by(uint64_t t)
{
    for (struct td_range *r = head; r; r = r->link)
        if (r->ticket <= t)
            return true;
    return false;
}

bool teardown_flush(void)
{
    lock_acquire(&td_lock);
    uint64_t target = tickets;
    bool any = false;
    while (queued_by(target)) {
        any = true;
        if (run_one_locked(true))
            continue;
        /* every batch is out: wait for the workers to end them */
        int seq = ld_relaxed(&done_seq);
        flush_waiters++;
        lock_release(&td_lock);
        os_futex_wait_ms(&done_seq, seq, 100);
        lock_acquire(&td_lock);
        flush_waiters--;
    }
    lock_release(&td_lock);
    return any;
}

void teardown_gauges(struct teardown_gauges *g)
{
    lock_acquire(&td_lock);
    g->pending_bytes = pending;
    g->inflight_bytes = inflight;
    g->mapped_bytes = queued_bytes;
    g->ranges = nranges;
    g->workers = workers;
    lock_release(&td_lock);
}

void teardown_check(void)
{
    lock_acquire(&td_lock);
    size_t p = 0, f = 0, q = 0;
    unsigned n = 0;
    uint64_t last = 0;
    for (struct td_range *r = head; r; r = r->link) {
        if (!r->used || r->done > r->next || r->next > r->len || r->busy > r->len || r->ticket <= last ||
            ((uintptr_t)r->base | r->len) & (SL_PAGE - 1) || ++n > nranges)
            sl_fatal("sl_check: teardown range broken:", r->base, "bytes", r->len);
        last = r->ticket;
        p += r->len - r->next;
        f += r->busy;
        q += r->len;
        /* reserved until unmapped: nothing of sluice's may live there */
        for (uintptr_t a = align_up((uintptr_t)r->base, SL_BLOCK); a < (uintptr_t)r->base + r->len; a += SL_BLOCK)
            if (pagemap_get(a))
                sl_fatal("sl_check: a range in teardown is in the pagemap:", (void *)a, NULL, 0);
    }
    if (n != nranges || p != pending || f != inflight || q != queued_bytes)
        sl_fatal("sl_check: teardown byte counts wrong: pending counted", NULL, "bytes", p);
    lock_release(&td_lock);
}


struct sl_lock *teardown_fork_lock(void) { return &td_lock; }
struct sl_lock *teardown_unmap_fork_lock(void) { return &unmap_lock; }

/* The child has none of the workers, and a range some of whose batches
 * they were releasing at fork cannot be finished batch by batch: unmap
 * every queued range whole (its copy in the child holds freed memory
 * only) and start empty. The slots are walked, not the list, so that even
 * a fork from a signal handler that interrupted a list update is safe. */
void teardown_fork_child(void)
{
    for (int i = 0; i < TD_SLOTS; i++)
        if (slots[i].used && !slots[i].unmapped)
            os_unmap(slots[i].base, slots[i].len);
    head = free_slots = NULL;
    slots_ready = false;
    for (int i = 0; i < TD_SLOTS; i++)
        slots[i].used = false;
    pending = inflight = queued_bytes = 0;
    nranges = workers = idle = flush_waiters = 0;
    st_relaxed(&work_seq, 0);
    st_relaxed(&done_seq, 0);
}

/* The reclaim registry's entry (base/drain.h): after a failed allocation,
 * every queued range is released (by this thread, or waited for) before
 * the allocation is tried again; under memory pressure too, since queued
 * memory still counts against the limit. */
static void drain_teardown(enum drain_depth depth, size_t want)
{
    (void)depth, (void)want;
    teardown_flush();
}
static size_t teardown_held(void)
{
    struct teardown_gauges g;
    teardown_gauges(&g);
    return g.mapped_bytes;
}
DRAIN_REGISTER(teardown_drain, .name = "teardown", .order = DRAIN_TEARDOWN, .depths = DRAIN_ENOMEM | DRAIN_PRESSURE,
               .run = drain_teardown, .held = teardown_held);

/* The teardown queue's report to the statistics (stats.h). */
static void teardown_report(uint64_t c[STAT_COUNT], uint64_t g[GAUGE_COUNT])
{
    (void)c;
    struct teardown_gauges tg;
    teardown_gauges(&tg);
    g[GAUGE_teardown_pending_bytes] = tg.pending_bytes;
    g[GAUGE_teardown_inflight_bytes] = tg.inflight_bytes;
    g[GAUGE_mapped_bytes] += tg.mapped_bytes;
}
STAT_SOURCE(teardown_source, teardown_report);
