/* reclaimer.c — one background thread, the kernel's kswapd in user space:
 * it runs the purge layer's decay (page/purge.c, huge.c) on a clock, and
 * under memory pressure makes every free page clean at once.
 *
 * Started lazily: the page layer calls the hook the first time there is
 * dirty or lazy memory, so a program that never frees never gets the
 * thread. The thread blocks every signal, allocates nothing and takes only
 * sluice's purge and page locks. After fork the child has no such thread;
 * the hook fires again there and starts a new one.
 *
 * Pressure: in a cgroup v2 with memory.high or memory.max set, free memory
 * counts against the limit until the kernel reclaims it, and the cgroup is
 * throttled first; so when the headroom (limit - memory.current) falls
 * under an eighth of the limit, or the memory PSI "some avg10" exceeds
 * PRESSURE_PSI percent, dirty and lazy memory is made clean at once.
 */
#define _GNU_SOURCE
#include "reclaimer.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "../huge/huge.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/page.h"
#include "../stats/stats.h"

#define IDLE_SLEEP_MS     1000 /* nothing to decay: look again this often */
#define PRESSURE_PSI      10   /* percent of time stalled on memory (avg10) */
#define PRESSURE_EVERY_MS 100

static _Atomic int running;
static char cgroup_dir[256]; /* "" until looked up, "-" if none */

static uint64_t parse_u64(const char *s, bool *ok)
{
    uint64_t v = 0;
    *ok = *s >= '0' && *s <= '9';
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (uint64_t)(*s - '0');
    return v;
}

static bool read_u64(const char *dir, const char *file, uint64_t *v)
{
    char path[320], buf[64];
    size_t dl = strlen(dir), fl = strlen(file);
    if (dl + fl + 2 > sizeof path)
        return false;
    memcpy(path, dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, file, fl + 1);
    bool ok;
    if (os_read_file(path, buf, sizeof buf) <= 0)
        return false;
    *v = parse_u64(buf, &ok);
    return ok; /* "max" is no limit */
}

static void find_cgroup(void)
{
    char buf[512];
    strcpy(cgroup_dir, "-");
    if (os_read_file("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return;
    char *line = strstr(buf, "0::"); /* the cgroup v2 line */
    if (!line)
        return;
    line += 3;
    char *end = strchr(line, '\n');
    if (end)
        *end = 0;
    size_t base = strlen("/sys/fs/cgroup"), l = strlen(line);
    if (base + l + 1 > sizeof cgroup_dir)
        return;
    memcpy(cgroup_dir, "/sys/fs/cgroup", base);
    memcpy(cgroup_dir + base, line, l + 1);
    if (!strcmp(cgroup_dir + base, "/"))
        cgroup_dir[base] = 0;
}

bool reclaimer_pressure(void)
{
    if (!cgroup_dir[0])
        find_cgroup();
    if (cgroup_dir[0] == '-')
        return false;
    uint64_t cur, high = UINT64_MAX, max = UINT64_MAX, v;
    if (read_u64(cgroup_dir, "memory.current", &cur)) {
        if (read_u64(cgroup_dir, "memory.high", &v))
            high = v;
        if (read_u64(cgroup_dir, "memory.max", &v))
            max = v;
        uint64_t limit = high < max ? high : max;
        if (limit != UINT64_MAX && (cur >= limit || limit - cur < limit / 8))
            return true;
    }
    char buf[256], path[320];
    size_t dl = strlen(cgroup_dir);
    memcpy(path, cgroup_dir, dl);
    memcpy(path + dl, "/memory.pressure", sizeof "/memory.pressure");
    if (os_read_file(path, buf, sizeof buf) > 0) {
        char *p = strstr(buf, "avg10=");
        bool ok;
        if (p && parse_u64(p + 6, &ok) >= PRESSURE_PSI && ok)
            return true;
    }
    return false;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts))
        ;
}

static void *reclaimer_main(void *arg)
{
    (void)arg;
    uint64_t last_pressure = 0;
    for (;;) {
        long t = sl_opt.dirty_decay_ms < sl_opt.lazy_decay_ms ? sl_opt.dirty_decay_ms : sl_opt.lazy_decay_ms;
        t /= 4;
        uint64_t tick = t < 10 ? 10 : t > 1000 ? 1000 : (uint64_t)t;
        sleep_ms(tick);
        uint64_t now = os_now_ms();
        bool pressure = false;
        if (now - last_pressure >= PRESSURE_EVERY_MS) {
            last_pressure = now;
            pressure = reclaimer_pressure() && page_purge_pending();
            if (pressure)
                atomic_fetch_add_explicit(&stats_global[STAT_pressure_events], 1, memory_order_relaxed);
        }
        page_purge_decay(now, pressure);
        huge_purge_decay(now, pressure);
        atomic_fetch_add_explicit(&stats_global[STAT_reclaimer_runs], 1, memory_order_relaxed);
        if (!page_purge_pending())
            sleep_ms(IDLE_SLEEP_MS);
    }
    return NULL;
}

static void reclaimer_start(void)
{
    if (sl_opt.purge == PURGE_OFF || atomic_exchange(&running, 1))
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, &attr, reclaimer_main, NULL) != 0)
        st_relaxed(&running, 0); /* no thread: slow paths still run the decay */
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

void reclaimer_init(void) { page_set_decay_hook(reclaimer_start); }
void reclaimer_fork_child(void) { st_relaxed(&running, 0); }
