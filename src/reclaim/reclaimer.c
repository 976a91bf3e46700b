/* reclaimer.c — one background thread, the kernel's kswapd in user space:
 * it runs the purge layer's decay (page/purge.c, huge.c) on a clock, wakes
 * from its idle sleep when a big free kicks it (its next tick enforces the
 * dirty cap, so the freeing thread goes on), and under memory pressure
 * makes every free page clean at once. Each tick it also takes back the
 * slabs that remote frees emptied while their owner idles
 * (slab/notify.c), so that they decay like any free page.
 *
 * Under a heap budget it also does the watermark boost's work (boost.c):
 * kicked by an extfrag event or by headroom under the low watermark, it
 * runs a boost pass every BOOST_TICK_MS until the headroom is back.
 *
 * Started lazily: the page layer calls the hook when there is dirty or
 * lazy memory, so a program that never frees never gets the thread; and
 * by default (SLUICE_RECLAIMER=auto) only once the program has a thread of
 * its own (glibc's __libc_single_threaded turns false at its first
 * pthread_create). A drop-in malloc must not make a single-threaded
 * program multi-threaded: glibc would drop its single-thread fast paths
 * and take its atfork lock in fork (a fork from a signal handler during
 * fork then hangs), and Python 3.12+ warns on fork. Until then the
 * allocation and free slow paths run the decay (purge_decay.c, purge_maybe).
 * The thread blocks every signal, allocates nothing and takes only
 * sluice's purge and page locks. After fork the child has no such thread;
 * the hook fires again there and starts a new one.
 *
 * Pressure: in a cgroup with a memory limit (v2 memory.high / memory.max,
 * v1 memory.soft_limit_in_bytes / memory.limit_in_bytes), lazily freed
 * memory counts against the limit until the kernel reclaims it, and the
 * cgroup is throttled or reclaimed first; so when the headroom (limit -
 * usage) falls under an eighth of the limit, or the memory PSI "some
 * avg10" (the cgroup's, else the system's) reaches PRESSURE_PSI percent,
 * dirty and lazy memory is made clean at once, and the teardown queue is
 * finished (the reclaimer releases batches beside the workers).
 */
#define _GNU_SOURCE
#include "reclaimer.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/drain.h"
#include "../base/events.h"
#include "../huge/huge.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/decay.h"
#include "../page/page.h"
#include "../slab/heap.h"
#include "../stats/stats.h"
#include "../teardown/teardown.h"
#include "boost.h"

#define IDLE_SLEEP_MS     1000 /* nothing to decay: look again this often */
#define PRESSURE_PSI      10   /* percent of time stalled on memory (avg10) */
#define PRESSURE_EVERY_MS 100
#define PUBLISH_EVERY_MS  100  /* SLUICE_PUBLISH: a tick at least this often */
#define BOOST_TICK_MS     5    /* while the heap is short of headroom */
#define BOOST_REST_EVERY_MS 1000 /* the decay, cgroup and hugepage passes while boosting */
#define HUGIFY_BUSY_EVERY_MS 1000 /* one collapse this often while no CPU is idle */

static _Atomic int running;
static _Atomic int kicked; /* futex word: a big free ends an idle sleep */

/* Where to read the cgroup's usage and limits: v2 (memory.current,
 * memory.high, memory.max, memory.pressure) or v1 (memory.usage_in_bytes,
 * memory.soft_limit_in_bytes, memory.limit_in_bytes); looked up once, by
 * the reclaimer thread only. Each file is opened once, on a high
 * descriptor (os_open_high), and reread in place. */
enum { CG_USAGE, CG_LIMIT0, CG_LIMIT1, CG_PSI, PROC_STAT, CG_FILES };
static struct {
    bool looked;
    char path[CG_FILES][320];
    int fd[CG_FILES]; /* 0: not opened yet (a high descriptor is never 0) */
} cg;

/* Read cgroup file i whole; -1 if it is missing or unreadable. A
 * descriptor that stopped working (a program that closed every fd after
 * fork) is opened again once. */
static long cg_read(int i, char *buf, size_t cap)
{
    if (!cg.path[i][0])
        return -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (cg.fd[i] <= 0 && (cg.fd[i] = os_open_high(cg.path[i])) < 0)
            return -1;
        long n = os_pread_file(cg.fd[i], buf, cap);
        if (n > 0)
            return n;
        os_close(cg.fd[i]);
        cg.fd[i] = 0;
    }
    return -1;
}

static uint64_t parse_u64(const char *s, bool *ok)
{
    uint64_t v = 0;
    *ok = *s >= '0' && *s <= '9';
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (uint64_t)(*s - '0');
    return v;
}

/* A number from a one-line cgroup file; false for "max", a missing file,
 * or a v1 "unlimited" (close to 2^63). */
static bool read_u64(int i, uint64_t *v)
{
    char buf[64];
    bool ok;
    if (cg_read(i, buf, sizeof buf) <= 0)
        return false;
    *v = parse_u64(buf, &ok);
    return ok && *v < ((uint64_t)1 << 60);
}

static void join(char *out, const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    out[0] = 0;
    if (la + lb + lc + 1 > 320)
        return;
    memcpy(out, a, la);
    memcpy(out + la, b, lb);
    memcpy(out + la + lb, c, lc + 1);
}

static void find_cgroup(void)
{
    char buf[1024];
    cg.looked = true;
    strcpy(cg.path[CG_PSI], "/proc/pressure/memory");
    strcpy(cg.path[PROC_STAT], "/proc/stat");
    if (os_read_file("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return;
    for (char *line = buf; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *path = strrchr(line, ':');
        if (path) {
            *path++ = 0;
            const char *ctl = strchr(line, ':') ? strchr(line, ':') + 1 : "";
            if (!strcmp(path, "/"))
                path = "";
            char probe[320];
            if (!*ctl) { /* v2 */
                join(probe, "/sys/fs/cgroup", path, "/memory.current");
                if (!access(probe, R_OK)) {
                    strcpy(cg.path[CG_USAGE], probe);
                    join(cg.path[CG_LIMIT0], "/sys/fs/cgroup", path, "/memory.high");
                    join(cg.path[CG_LIMIT1], "/sys/fs/cgroup", path, "/memory.max");
                    join(probe, "/sys/fs/cgroup", path, "/memory.pressure");
                    if (!access(probe, R_OK))
                        strcpy(cg.path[CG_PSI], probe);
                    return;
                }
            } else if (strstr(ctl, "memory")) { /* v1 */
                join(probe, "/sys/fs/cgroup/memory", path, "/memory.usage_in_bytes");
                if (!access(probe, R_OK)) {
                    strcpy(cg.path[CG_USAGE], probe);
                    join(cg.path[CG_LIMIT0], "/sys/fs/cgroup/memory", path, "/memory.soft_limit_in_bytes");
                    join(cg.path[CG_LIMIT1], "/sys/fs/cgroup/memory", path, "/memory.limit_in_bytes");
                }
            }
        }
        line = next;
    }
}

/* Is the process short of memory (cgroup headroom, PSI)? */
static bool reclaimer_pressure(void)
{
    if (!cg.looked)
        find_cgroup();
    uint64_t cur, limit = UINT64_MAX, v;
    if (read_u64(CG_USAGE, &cur)) {
        for (int i = CG_LIMIT0; i <= CG_LIMIT1; i++)
            if (read_u64(i, &v) && v < limit)
                limit = v;
        if (limit != UINT64_MAX && (cur >= limit || limit - cur < limit / 8))
            return true;
    }
    char buf[256];
    if (cg_read(CG_PSI, buf, sizeof buf) > 0) {
        char *p = strstr(buf, "avg10=");
        bool ok;
        if (p && parse_u64(p + 6, &ok) >= PRESSURE_PSI && ok)
            return true;
    }
    return false;
}

/* Sleep ms, or until kicked. */
static void wait_ms(uint64_t ms)
{
    uint64_t until = os_now_ms() + ms;
    for (uint64_t now = os_now_ms(); now < until && !ld_relaxed(&kicked); now = os_now_ms())
        os_futex_wait_ms(&kicked, 0, until - now);
}

/* Has the machine had a whole CPU idle (half of one on a single-CPU
 * machine) since the last call (the aggregate line of /proc/stat), or,
 * when that is under two clock ticks ago, over the window before?
 * Unknown: yes. Asked before a pass and between its collapses. Half a CPU
 * was not enough: redis-benchmark beside redis-server leaves a quarter
 * of two CPUs idle, waiting on replies. */
static bool cpu_idle(void)
{
    static uint64_t last_total, last_idle;
    char buf[256];
    if (!cg.looked)
        find_cgroup();
    if (cg_read(PROC_STAT, buf, sizeof buf - 1) <= 0 || strncmp(buf, "cpu ", 4))
        return true;
    buf[sizeof buf - 1] = 0;
    uint64_t v[8] = { 0 }, total = 0;
    const char *s = buf + 4;
    for (int i = 0; i < 8; i++) {
        while (*s == ' ')
            s++;
        bool ok;
        v[i] = parse_u64(s, &ok);
        while (*s >= '0' && *s <= '9')
            s++;
        total += v[i];
    }
    static bool verdict = true;
    uint64_t idle = v[3] + v[4], dt = total - last_total, di = idle - last_idle; /* idle + iowait */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    if (last_total && dt < 2 * (uint64_t)ncpu)
        return verdict; /* under two ticks of every CPU: too short to tell, the window grows */
    verdict = !last_total || 2 * di * (uint64_t)ncpu >= dt * (ncpu > 1 ? 2 : 1);
    last_total = total;
    last_idle = idle;
    return verdict;
}

/* Has the program itself (its threads but this one) been quiet since the
 * last verdict (decay.h: hugify_quiet)? Under HUGIFY_QUIET_WINDOW_MS
 * since then: the last verdict, and the window grows. The first call, or
 * a fork child's (its CPU time starts again from 0): no. */
static bool program_quiet(void)
{
    static uint64_t last_wall, last_cpu;
    static bool verdict;
    uint64_t wall = os_now_ns(), all = os_cpu_ns(true), mine = os_cpu_ns(false);
    uint64_t cpu = all > mine ? all - mine : 0; /* read apart: may dip a little */
    if (last_wall && !hugify_quiet_window(wall - last_wall))
        return verdict;
    verdict = last_wall && cpu >= last_cpu && hugify_quiet(cpu - last_cpu, wall - last_wall);
    last_wall = wall;
    last_cpu = cpu;
    return verdict;
}

/* May a full pass go on? Asked between its collapses. A kick (a big free)
 * ends it: the decay comes first. Measured with test/sluice_cmd.sh's
 * Python program on 2 overloaded cores: a pass collapsing the blocks of
 * 250 MB of buffers while the program slept kept the decay from running
 * for the 0.6 s after it freed them (272 MB dirty, no madvise). */
static bool hugify_go_on(void) { return !ld_relaxed(&kicked) && (program_quiet() || cpu_idle()); }

/* The hugepage pass: a collapse copies 2 MiB in this thread, so on a
 * machine with no idle CPU it takes that time from the program (or from
 * its neighbours): measured with redis-server and redis-benchmark on 2
 * cores, collapsing 32 blocks a pass during the benchmark cost 10-30% of
 * its GET rate. Busy: one block a second, so that a long-lived dense
 * block still gets its hugepage; the program quiet or a CPU idle: a full
 * pass, which stops as soon as both turn busy (asked between collapses: a
 * pass begun at the end of an idle spell took 290 ms of CPU from the
 * benchmark that followed). */
static void hugify_pass(uint64_t now)
{
    static uint64_t last_busy;
    if (program_quiet() || cpu_idle())
        page_hugify(now, UINT32_MAX, hugify_go_on);
    else if (now - last_busy >= HUGIFY_BUSY_EVERY_MS) {
        last_busy = now;
        page_hugify(now, 1, NULL);
    } else
        page_hugify(now, 0, NULL); /* still ages the dense blocks */
}

static void *reclaimer_main(void *arg)
{
    (void)arg;
    teardown_background_thread();
    st_relaxed(&running, 2); /* running: kicks are heard */
    uint64_t last_pressure = 0, last_tick = os_now_ms();
    bool boosting = sl_opt.boost && boost_run(); /* a boost may be why it was started */
    for (;;) {
        long t = sl_opt.dirty_decay_ms < sl_opt.lazy_decay_ms ? sl_opt.dirty_decay_ms : sl_opt.lazy_decay_ms;
        t /= 4;
        uint64_t tick = t < 10 ? 10 : t > 1000 ? 1000 : (uint64_t)t;
        if (sl_opt.publish && tick > PUBLISH_EVERY_MS)
            tick = PUBLISH_EVERY_MS;
        wait_ms(boosting && tick > BOOST_TICK_MS ? BOOST_TICK_MS : tick);
        st_relaxed(&kicked, 0); /* a kick only ends an idle sleep: the cap waits out its grace */
        /* The boost first and alone: a type is short of room now, and on
         * busy cores every system call of the rest (cgroup files, madvise)
         * may cost a time slice. Measured on bench/fragment, 2 cores: with
         * the cgroup reads before it, the boost's first pass came 8-16 ms
         * after the wake, and 500 events fell in that window; first, 0-10
         * events in most runs. The rest waits meanwhile, up to
         * BOOST_REST_EVERY_MS: a decay pass may take 40 ms, and events
         * fell in that gap too. */
        boosting = sl_opt.boost && boost_run();
        uint64_t now = os_now_ms();
        if (boosting && now - last_tick < BOOST_REST_EVERY_MS)
            continue;
        last_tick = now;
        bool pressure = false;
        if (now - last_pressure >= PRESSURE_EVERY_MS) {
            last_pressure = now;
            bool short_of_memory = reclaimer_pressure();
            /* memory still being torn down counts against the limit too:
             * finish it now (this thread helps the workers) */
            if (short_of_memory)
                drain_all(DRAIN_PRESSURE, 0);
            pressure = short_of_memory && page_purge_pending();
            if (pressure)
                stat_add_shared(STAT_pressure_events, 1);
        }
        /* slabs that other threads' frees emptied, from owners that idle
         * (slab/notify.c): before the decay, which then purges them */
        if (heaps_take_emptied(now, decay_tick_ms(sl_opt.dirty_decay_ms, sl_opt.lazy_decay_ms)))
            page_purge_taken();
        page_purge_decay(now, pressure);
        huge_purge_decay(now, pressure);
        if (!boosting) /* a collapse copies 2 MiB: winning blocks back comes first */
            hugify_pass(now);
        stat_add_shared(STAT_reclaimer_runs, 1);
        stats_publish(PUBLISH_TICK);
        if (!page_purge_pending() && !sl_opt.publish && !boosting && !heaps_notify_waiting())
            wait_ms(IDLE_SLEEP_MS);
    }
    return NULL;
}

static bool reclaimer_start(void)
{
    /* SLUICE_PUBLISH asks for the thread: it writes the statistics */
    if (!sl_opt.publish && (sl_opt.purge == PURGE_OFF || sl_opt.reclaimer == BG_OFF))
        return true; /* never */
    if (!sl_opt.publish && sl_opt.reclaimer == BG_AUTO && os_single_threaded())
        return false; /* not yet: ask again on a later slow path */
    /* pthread_create mallocs (ld.so's thread data): not under a lock of
     * sluice's (a thread's exit drains its page cache under heaps_lock,
     * and the malloc may sample, or refill from an orphan under it again) */
    if (lock_any_held())
        return false;
    if (atomic_exchange(&running, 1))
        return true;
    if (!os_thread_start(reclaimer_main, NULL))
        st_relaxed(&running, 0); /* no thread: slow paths still run the decay */
    return true;
}

static bool reclaimer_kick(void)
{
    if (ld_relaxed(&running) != 2)
        return false;
    if (!ld_relaxed(&kicked) && !atomic_exchange(&kicked, 1))
        os_futex_wake(&kicked, 1);
    return true;
}

bool reclaimer_is_running(void) { return ld_relaxed(&running) == 2; }

/* The heap budget: SLUICE_HEAP_LIMIT, else the lower of the cgroup's two
 * limits (memory.high and memory.max, or v1's soft and hard limits), else
 * none. Read once, at load: a limit changed later is not followed. */
static void budget_init(void)
{
    uint64_t limit = (uint64_t)sl_opt.heap_limit, v;
    if (!limit) {
        find_cgroup();
        limit = UINT64_MAX;
        for (int i = CG_LIMIT0; i <= CG_LIMIT1; i++)
            if (read_u64(i, &v) && v < limit)
                limit = v;
        if (limit >= (uint64_t)1 << 62) /* "max", or v1's page-rounded LONG_MAX: no limit */
            limit = 0;
    }
    page_set_budget((size_t)limit);
}

void reclaimer_init(void)
{
    sl_events.reclaimer_start = reclaimer_start;
    sl_events.reclaimer_kick = reclaimer_kick;
    sl_events.reclaimer_running = reclaimer_is_running;
    boost_init();
    budget_init();
}
void reclaimer_fork_child(void)
{
    st_relaxed(&running, 0);
    st_relaxed(&kicked, 0);
}
