/* prof.c — the sampler's per-thread side and the profile's life: start,
 * the countdown's slow path, recording and forgetting samples, dumps
 * (SLUICE_PROF at exit, sl_prof_dump, SLUICE_PROF_GDUMP's new highs) and
 * the leak report at exit. See prof.h for the design.
 *
 * Per thread: the countdown (prof_left), its random state, and a busy
 * flag set while the thread is inside prof_record, prof_free or a dump.
 * A sample that falls while busy (an allocation in a signal handler that
 * interrupted one of them, or in a dump) is not taken; a free of a
 * sampled block while busy is deferred to a short per-thread list that
 * the interrupted call empties as it leaves (full: the sample is dropped,
 * and its record is replaced when its address is sampled again).
 */
#define _GNU_SOURCE
#include "prof.h"

#include <errno.h>
#include <sys/auxv.h>
#include <string.h>

#include "../base/fatal.h"
#include "../options/options.h"
#include "../os/os.h"
#include "leaks.h"
#include "pprof.h"
#include "sample.h"
#include "stack.h"
#include "table.h"

#define DEFER_MAX 8

bool prof_on;
__thread int64_t prof_left;
static __thread struct {
    uint64_t rng;            /* 0 until the thread's first tick */
    bool bytes_drawn;        /* prof_left has had its first gap */
    bool busy;
    unsigned ndeferred;
    uintptr_t deferred[DEFER_MAX];
} pt;

static double mean = 512 << 10; /* SLUICE_PROF_SAMPLE, set once at start */
static uint64_t seed_base;
static _Atomic uint64_t seed_seq;
static double gdump_next;        /* prof lock: live bytes of the next gdump */
static _Atomic unsigned dump_seq; /* the next PATH.N */

static uint64_t next_gap(void) { return prof_interval(prof_random(&pt.rng), mean); }

static void thread_start(void)
{
    uint64_t s = seed_base ^ ((uint64_t)(uintptr_t)&pt * 0x9e3779b97f4a7c15ull) ^ os_now_ns() ^
                 (atomic_fetch_add(&seed_seq, 1) * 0xbf58476d1ce4e5b9ull);
    pt.rng = s ? s : 1;
}

/* The byte countdown's first gap is drawn by the thread's first
 * allocation counted by bytes, which need not be its first tick: its
 * small mallocs' class countdowns (prof_class_tick) start the random
 * state on their own. True once, then. */
static bool bytes_first(void)
{
    if (pt.bytes_drawn)
        return false;
    if (!pt.rng)
        thread_start();
    pt.bytes_drawn = true;
    return true;
}

bool prof_tick_slow(size_t n)
{
    (void)n;
    if (bytes_first()) { /* prof_left was 0, now -n */
        prof_left += (int64_t)next_gap();
        if (prof_left > 0)
            return false;
    }
    prof_left = (int64_t)next_gap(); /* memoryless: the next point past this block */
    return !pt.busy;
}

bool prof_class_tick(size_t size, bool first, uint64_t *left)
{
    if (!prof_on) {
        *left = 0;
        return false;
    }
    if (!pt.rng)
        thread_start();
    if (first) { /* memoryless: this malloc is the first of its countdown */
        uint64_t k = prof_interval_objects(prof_random(&pt.rng), mean, size);
        if (k > 1) {
            *left = k - 1;
            return false;
        }
    }
    *left = prof_interval_objects(prof_random(&pt.rng), mean, size);
    return !pt.busy;
}

size_t prof_tick_bulk(size_t size, size_t count, size_t *idx, size_t cap)
{
    if (bytes_first())
        prof_left = (int64_t)next_gap(); /* was 0: no point drawn yet */
    uint64_t total = (uint64_t)size * count, point = (uint64_t)prof_left; /* 1-based byte of the next point */
    size_t k = 0;
    while (point <= total) {
        size_t i = (size_t)((point - 1) / size);
        if (!pt.busy && k < cap && (!k || idx[k - 1] != i))
            idx[k++] = i;
        point = (i + 1) * (uint64_t)size + next_gap(); /* memoryless past the sampled object */
    }
    prof_left = (int64_t)(point - total);
    return k;
}

static void leave(void)
{
    pt.busy = false;
    while (pt.ndeferred) {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        uintptr_t p = pt.deferred[pt.ndeferred - 1];
        pt.ndeferred--;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        prof_free((void *)p);
    }
}

static void enter(void)
{
    pt.busy = true;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void gdump_write(void)
{
    char path[320], num[24];
    num[0] = '.';
    num[1 + fmt_u64(num + 1, atomic_fetch_add(&dump_seq, 1))] = 0;
    if (fmt_path(path, sizeof path, sl_prof_path, num))
        prof_write_file(path);
}

void prof_record(void *p, size_t size, size_t counted, unsigned cache_id, const char *cache_name)
{
    if (pt.busy)
        return;
    enter();
    uintptr_t frames[PROF_DEPTH];
    uint32_t n = prof_stack(frames, PROF_DEPTH);
    double objects, bytes;
    prof_weight(counted, mean, &objects, &bytes);
    if (counted)
        bytes *= (double)size / (double)counted;
    prof_lock_take();
    prof_table_add((uintptr_t)p, size, objects, bytes, frames, n, cache_id, cache_name);
    double live = prof_live_bytes();
    bool dump = sl_opt.prof_gdump && sl_opt.prof && live >= gdump_next;
    if (dump) /* the next at an eighth above this high, and a sample interval at least */
        gdump_next = live + (live / 8 > mean ? live / 8 : mean);
    prof_lock_drop();
    if (dump)
        gdump_write();
    leave();
}

void prof_free(void *p)
{
    if (pt.busy) {
        if (pt.ndeferred < DEFER_MAX) {
            pt.deferred[pt.ndeferred] = (uintptr_t)p;
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            pt.ndeferred++;
        }
        return;
    }
    enter();
    prof_lock_take();
    prof_table_remove((uintptr_t)p);
    prof_lock_drop();
    leave();
}

void prof_move(void *old_p, void *new_p)
{
    enter();
    prof_lock_take();
    prof_table_move((uintptr_t)old_p, (uintptr_t)new_p);
    prof_lock_drop();
    leave();
}

void prof_forget_cache(unsigned cache_id)
{
    if (!prof_on)
        return;
    enter();
    prof_lock_take();
    prof_table_forget_cache(cache_id);
    prof_lock_drop();
    leave();
}

int prof_dump(const char *path)
{
    if (!prof_on)
        return ENOTSUP;
    char full[320];
    if (!path) {
        if (!sl_opt.prof)
            return EINVAL;
        char num[24];
        num[0] = '.';
        num[1 + fmt_u64(num + 1, atomic_fetch_add(&dump_seq, 1))] = 0;
        if (!fmt_path(full, sizeof full, sl_prof_path, num))
            return ENAMETOOLONG;
    } else if (!fmt_path(full, sizeof full, path, "")) {
        return ENAMETOOLONG;
    }
    bool outer = pt.busy;
    enter();
    int err = prof_write_file(full);
    if (!outer)
        leave();
    return err;
}

double prof_mean(void) { return mean; }

void prof_init(void)
{
    if (!sl_opt.prof && !sl_opt.leaks && !sl_opt.check)
        return;
    mean = sl_opt.prof_sample < 1 ? 1 : (double)sl_opt.prof_sample;
    gdump_next = mean;
    const void *r = (const void *)getauxval(AT_RANDOM);
    if (r)
        memcpy(&seed_base, r, sizeof seed_base);
    enter(); /* the unwinder's first use allocates: not sampled */
    prof_stack_init();
    leave();
    prof_on = true;
}

void prof_fini(void)
{
    if (!prof_on)
        return;
    int saved = errno;
    enter();
    if (sl_opt.prof) {
        char path[320];
        if (fmt_path(path, sizeof path, sl_prof_path, ""))
            prof_write_file(path);
    }
    if (sl_opt.leaks || sl_opt.check)
        prof_leak_report();
    leave();
    errno = saved;
}
