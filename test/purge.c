/* The purge layer: calloc after reuse of lazily freed memory is zero; memory
 * freed and left idle for the decay time is returned (RSS minus LazyFree
 * falls to near the live size) in free and dontneed modes; sl_purge returns
 * it at once; purge=off advises nothing; the reclaimer works after fork;
 * pressure in a cgroup with memory.high makes lazy memory clean at once
 * (skipped, with a message, where no cgroup can be made); threads churn
 * while the reclaimer purges under them.
 *
 * Options are read at start-up, so each scenario runs in a child process
 * started with its own SLUICE_* environment (short decays injected). RSS
 * checks are made only in the normal build (a sanitizer's own memory would
 * swamp them). Every wait is for a condition, with a deadline (t.h); the
 * decay's timing (ages, ticks, the cap) is unit-tested in unit_decay, so
 * these show the mechanism carrying it out. One fixed wait is left (in
 * scenario_calloc: see there). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#define MiB (1024.0 * 1024.0)

enum { LONG_MS = 20000 }; /* deadline of a wait: generous (a loaded machine, TSan) */

/* Every free byte outside dense hugepage blocks advised and the lazy ones
 * made clean: what the decay has to do. */
static bool decayed(void)
{
    return sl_stat("dirty_bytes") == sl_stat("dirty_thp_bytes") && sl_stat("lazy_bytes") == 0;
}

/* An allocation slow path (a run too long for the page cache), which runs
 * the decay when a tick is due; true, for use in a waited condition. */
static bool slow_path(void)
{
    sl_free(sl_malloc(300000));
    return true;
}

/* ---- scenarios (run in a child) ------------------------------------------ */

/* calloc must hand out zeros however the memory was freed before.
 * Round 1 waits out a short lazy decay (20 ms, at_once_free: the calloc's
 * own slow path then finds the lazy memory due, and makes it clean or
 * unmaps it first): the one fixed wait of this test. The program has no
 * thread, so there is nothing to watch for: the time passing is the
 * condition. With the other options' decays (100 ms and more, or none)
 * it waited for nothing, and is not made. */
static void scenario_calloc(void)
{
    size_t sizes[] = { 100, 40000, 300000, 900000, 3u << 20, 20u << 20 };
    const char *lazy_env = getenv("SLUICE_LAZY_DECAY_MS");
    long lazy_ms = lazy_env ? atol(lazy_env) : -1;
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            unsigned char *p = sl_malloc(n);
            memset(p, 0xa5, n);
            sl_free(p); /* dirty, or purged at once with decay 0 */
            if (round == 1 && lazy_ms >= 0 && lazy_ms <= 50)
                t_sleep_ms(60); /* past the lazy decay and a tick: due for clean */
            unsigned char *q = sl_calloc(1, n);
            size_t bad = 0;
            for (size_t k = 0; k < n; k += 64)
                bad += q[k] != 0;
            bad += q[n - 1] != 0;
            CHECK_EQ(bad, 0);
            memset(q, 0x5a, n);
            sl_free(q);
        }
}

/* Allocate about 290 MiB (medium runs and small objects), keep a tenth,
 * free the rest, idle past the decays: RSS - LazyFree comes down to the
 * live bytes plus a small overhead. Returns the live bytes. */
enum { NRUNS = 4096, NSMALL = 200000 };
static void *runs[NRUNS], *smalls[NSMALL];

static size_t fill_and_thin(void)
{
    size_t live = 0;
    for (int i = 0; i < NRUNS; i++) {
        runs[i] = sl_malloc(60000);
        memset(runs[i], 1, 60000);
    }
    for (int i = 0; i < NSMALL; i++) {
        smalls[i] = sl_malloc(256);
        memset(smalls[i], 2, 256);
    }
    for (int i = 0; i < NRUNS; i++)
        if (i % 10)
            sl_free(runs[i]);
        else
            live += 60000;
    /* small objects: the oldest tenth stays (every tenth one would pin
     * every slab, in any allocator) */
    for (int i = 0; i < NSMALL; i++)
        if (i >= NSMALL / 10)
            sl_free(smalls[i]);
        else
            live += 256;
    return live;
}

/* RSS - LazyFree is near the live bytes: at once (wait_ms 0), or within
 * wait_ms (a decay's last madvise may be in flight when its counts say
 * it is done). */
static void check_near_live(size_t live, const char *when, unsigned wait_ms)
{
#if SL_OVERRIDE
    /* 10% of live, plus a fixed allowance: the program itself (a few MiB)
     * and pageblock headers of blocks that still hold live objects */
    uint64_t limit = live + live / 10 + (12u << 20), h = 0;
    bool ok = wait_ms ? T_WAIT((h = proc_held()) <= limit, wait_ms) : (h = proc_held()) <= limit;
    if (!ok)
        fprintf(stderr, "%s: Rss - LazyFree %.1f MiB, live %.1f MiB, limit %.1f MiB\n", when, h / MiB, live / MiB,
                limit / MiB);
    CHECK(ok);
#else
    (void)live, (void)when, (void)wait_ms;
#endif
}

/* The reclaimer thread starts (SLUICE_RECLAIMER=auto) once the program
 * has a thread of its own: one that has come and gone is enough. */
static void *nothing(void *arg) { return arg; }
static void become_threaded(void)
{
    pthread_t t;
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
}

static void scenario_decay(void)
{
    if (!getenv("SLUICE_RECLAIMER"))
        become_threaded();
    uint64_t before = proc_held(), cleaned = sl_stat("madv_dontneed_bytes");
    size_t live = fill_and_thin();
    (void)before;
    const char *mode = getenv("SLUICE_PURGE");
    bool dontneed = mode && !strcmp(mode, "dontneed");
    /* freed but not yet clean: what the decay has to do (most of it went
     * lazy already: the dirty cap purged it as it was freed; in dontneed
     * mode the cap made it clean, and the dirty rest is left). A slow
     * build (ThreadSanitizer) may see the reclaimer's ticks during the
     * fill: lazy pages over the cap for a tick are made clean then, so
     * what the ticks made clean since the start counts too. */
    if (dontneed)
        CHECK(sl_stat("dirty_bytes") > 0);
    else
        CHECK(sl_stat("dirty_bytes") + sl_stat("lazy_bytes") + (sl_stat("madv_dontneed_bytes") - cleaned) >
              (64u << 20));
    CHECK(T_WAIT(decayed(), LONG_MS)); /* decays of 100 and 300 ms, ticks of 25 ms */
    check_near_live(live, "after the decay", LONG_MS);
    /* free pages inside dense hugepage blocks stay (page/hugify.c); a block
     * that turns sparse meanwhile gives its free pages to the decay again,
     * dirty then lazy for a while (seen under ThreadSanitizer's slow
     * clock: 2.7 MiB lazy after decayed() had held): decayed again */
    CHECK(T_WAIT(decayed(), LONG_MS));
    CHECK_EQ(sl_stat("dirty_bytes") - sl_stat("dirty_thp_bytes"), 0);
    CHECK(sl_stat("reclaimer_runs") > 0); /* the reclaimer thread did it */
    /* free mode advises MADV_FREE only what the dirty cap keeps, and the
     * tick makes what is over it clean at once: whether any page went
     * lazy depends on the ticks' timing (test/growth_rss.c shows both) */
    if (dontneed)
        CHECK_EQ(sl_stat("madv_free_calls"), 0);
    CHECK(sl_stat("madv_dontneed_calls") > 0); /* clean at the end (decayed(): none left lazy) */
}

/* Long decays: nothing happens by itself, sl_purge releases at once. */
static void scenario_purge_now(void)
{
    uint64_t cleaned = sl_stat("madv_dontneed_bytes");
    size_t live = fill_and_thin();
    sl_free(sl_malloc(8u << 20)); /* a cached huge mapping too */
    /* a tick during the frees makes what is over the dirty cap clean at
     * once; the cached mapping is sl_purge's to unmap */
    CHECK(sl_stat("huge_cached_bytes") >= (8u << 20));
    CHECK(sl_stat("dirty_bytes") + sl_stat("lazy_bytes") + (sl_stat("madv_dontneed_bytes") - cleaned) >
          (32u << 20));
    sl_purge();
    CHECK_EQ(sl_stat("dirty_bytes"), 0);
    CHECK_EQ(sl_stat("lazy_bytes"), 0);
    CHECK_EQ(sl_stat("huge_cached_bytes"), 0);
    check_near_live(live, "after sl_purge", 0);
}

/* purge=off: no madvise at all, no reclaimer; sl_purge still unmaps free
 * pageblocks. No thread came with the frees, so nothing but this thread
 * could advise later (the old check waited 300 ms to see that). */
static void scenario_off(void)
{
    int t0 = proc_threads();
    fill_and_thin();
    CHECK_EQ(proc_threads(), t0);
    CHECK_EQ(sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls"), 0);
    CHECK_EQ(sl_stat("reclaimer_runs"), 0);
    uint64_t blocks = sl_stat("blocks");
    for (int i = 0; i < NRUNS; i += 10)
        sl_free(runs[i]);
    for (int i = 0; i < NSMALL / 10; i++)
        sl_free(smalls[i]);
    sl_purge();
    CHECK(sl_stat("blocks") < blocks);
    CHECK_EQ(sl_stat("madv_free_calls"), 0);
    CHECK_EQ(sl_stat("reclaimer_runs"), 0);
    CHECK_EQ(proc_threads(), t0);
}

/* Decay 0: every freed run is advised as it is freed. */
static void scenario_at_once(void)
{
    for (int i = 0; i < 100; i++) {
        char *p = sl_malloc(256 << 10);
        memset(p, 3, 256 << 10);
        sl_free(p);
    }
    CHECK(sl_stat("madv_free_calls") >= 100);
    CHECK(sl_stat("dirty_bytes") < (1u << 20));
}

/* The reclaimer runs in a fork child too (it is started again there). */
static void scenario_fork(void)
{
    become_threaded();
    char *p = sl_malloc(30u << 20);
    sl_free(sl_malloc(1u << 20)); /* starts the reclaimer in the parent */
    CHECK(T_WAIT(sl_stat("reclaimer_runs") > 0, LONG_MS)); /* it runs */
    pid_t pid = fork();
    if (pid == 0) {
        size_t live = fill_and_thin();
        /* nothing but a reclaimer in this process could purge now */
        int ok = T_WAIT(decayed(), LONG_MS);
        if (!ok)
            fprintf(stderr, "fork child: dirty %llu lazy %llu\n", (unsigned long long)sl_stat("dirty_bytes"),
                    (unsigned long long)sl_stat("lazy_bytes"));
#if SL_OVERRIDE
        ok &= T_WAIT(proc_held() <= live + live / 10 + (40u << 20), LONG_MS); /* the parent's 30 MiB is shared in */
#else
        (void)live;
#endif
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sl_free(p);
}

/* A single-threaded program (SLUICE_RECLAIMER=auto, the default) or
 * SLUICE_RECLAIMER=off: no thread; nothing decays while the program is
 * idle (no thread came with the frees: nothing but this thread could
 * purge; the old check idled 500 ms to see that), and its own allocation
 * slow paths run the decay once it works again. */
static void scenario_no_thread(void)
{
    int t0 = proc_threads();
    fill_and_thin();
    CHECK_EQ(sl_stat("reclaimer_runs"), 0);
    CHECK(sl_stat("dirty_bytes") + sl_stat("lazy_bytes") > 0);
    CHECK_EQ(proc_threads(), t0); /* no thread came */
#if SL_OVERRIDE /* a sanitizer runs threads of its own */
    CHECK_EQ(proc_threads(), 1); /* still single-threaded */
#endif
    /* slow paths, until the lazy memory (300 ms) has been made clean */
    CHECK(T_WAIT(slow_path() && sl_stat("lazy_bytes") == 0 && sl_stat("madv_dontneed_calls") > 0, LONG_MS));
    CHECK(sl_stat("madv_dontneed_calls") > 0);
    CHECK_EQ(sl_stat("lazy_bytes"), 0);
    CHECK_EQ(sl_stat("reclaimer_runs"), 0); /* past the decays now: still no reclaimer */
    CHECK_EQ(proc_threads(), t0);
}

/* Threads churn medium runs and small objects while the reclaimer purges
 * with 1 ms decays (ThreadSanitizer watches the page layer here). */
static void *churn(void *arg)
{
    unsigned long long seed = (uintptr_t)arg + 1;
    void *keep[64] = { 0 };
    for (int i = 0; i < 20000; i++) {
        int k = (int)(t_rand(&seed) % 64);
        sl_free(keep[k]);
        size_t n = t_rand(&seed) % 4 ? 16 + t_rand(&seed) % 2000 : 20000 + t_rand(&seed) % 400000;
        keep[k] = (i % 7) ? sl_malloc(n) : sl_calloc(1, n);
        ((char *)keep[k])[0] = 1;
        ((char *)keep[k])[n - 1] = 1;
    }
    for (int k = 0; k < 64; k++)
        sl_free(keep[k]);
    return NULL;
}

/* A churning single-threaded program: it frees far more than the dirty cap
 * and takes it back at once, over and over, for less than a tick. At most
 * one purge may run in that time (before, every big free purged and the
 * next round faulted the same pages back in). Then, idle for the decay, it
 * all goes back. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void scenario_churn(void)
{
    enum { N = 400 };
    static void *v[N];
    for (int i = 0; i < N; i++)
        v[i] = sl_malloc(100000);
    for (int i = 0; i < N; i++) /* every eighth stays, spread over the blocks: none comes wholly free */
        if (i % 8)
            sl_free(v[i]);
    uint64_t t0 = now_ms();
    while (now_ms() - t0 < 100) {
        for (int i = 0; i < N; i++)
            if (i % 8) {
                v[i] = sl_malloc(100000);
                memset(v[i], 5, 100000);
            }
        for (int i = 0; i < N; i++) /* about 35 MB: far past 4x the dirty cap (2 MiB here) */
            if (i % 8)
                sl_free(v[i]);
    }
    /* one purge per tick (250 ms here) at most, of about 35 MB: purging on
     * every big free advised that much on every round */
    CHECK(sl_stat("madv_free_bytes") + sl_stat("madv_dontneed_bytes") <= (80u << 20));
    CHECK(sl_stat("dirty_bytes") >= (16u << 20));
    /* slow paths (each runs the decay when a tick is due), until the 1 s decay has come */
    CHECK(T_WAIT(slow_path() && sl_stat("dirty_bytes") <= (8u << 20), LONG_MS));
    CHECK(sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls") > 0);
    CHECK(sl_stat("dirty_bytes") <= (8u << 20));
    for (int i = 0; i < N; i += 8)
        sl_free(v[i]);
}

/* A single-threaded program frees most of what it has and goes idle: the
 * freeing thread itself purges down to the dirty cap once it is far past
 * it (no thread, and maybe no later slow path, to do it), though at most
 * once per tick, so what it frees after that within the tick stays dirty. */
static void scenario_idle_free(void)
{
    fill_and_thin();
    CHECK(sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls") > 0);
    CHECK(sl_stat("lazy_bytes") + sl_stat("clean_bytes") >= (16u << 20));
    CHECK_EQ(sl_stat("reclaimer_runs"), 0);
}

static void scenario_threads(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, churn, (void *)(intptr_t)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK(T_WAIT(sl_stat("madv_free_calls") > 0, LONG_MS));
}

/* Pressure: this process in a cgroup whose memory.high (v2) or soft limit
 * (v1) sits just above its usage; the free memory that long decays keep
 * resident is made clean at once. With decays of an hour, free memory
 * within the dirty cap stays dirty for the hour (memory over the cap goes
 * lazy at a tick and clean a tick later, lazy pages counting in the RSS:
 * decay.h, so that is not what pressure is for): 4 MiB freed out of 64
 * (the thread's page cache takes up to 2 MiB of it), the rest kept in
 * use, whose usage keeps the limit's margin wide. */
static void scenario_pressure(const char *cg, bool v2)
{
    become_threaded(); /* pressure is watched by the reclaimer thread */
    for (int i = 0; i < 512; i++) {
        runs[i] = sl_malloc(128 << 10);
        memset(runs[i], 4, 128 << 10);
    }
    for (int i = 0; i < 512; i += 16) /* no pageblock comes wholly free */
        sl_free(runs[i]);
    uint64_t dirty = sl_stat("dirty_bytes"), dontneed = sl_stat("madv_dontneed_bytes");
    CHECK(dirty >= (1u << 20)); /* within the cap: kept for the decay's hour */
    /* memory.high just above the current usage: headroom under 1/8 */
    char path[512], cur[64];
    snprintf(path, sizeof path, "%s/%s", cg, v2 ? "memory.current" : "memory.usage_in_bytes");
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, cur, sizeof cur - 1) : -1;
    if (fd >= 0)
        close(fd);
    CHECK(n > 0);
    unsigned long long usage = n > 0 ? (cur[n] = 0, strtoull(cur, NULL, 10)) : 0;
    snprintf(path, sizeof path, "%s/%s", cg, v2 ? "memory.high" : "memory.soft_limit_in_bytes");
    /* no dprintf: its stdio buffer is a malloc, which could map a
     * pageblock, and a heap that grows holds its free pages to the cap
     * itself (purge_growth) */
    char limit[32];
    int len = snprintf(limit, sizeof limit, "%llu\n", usage + usage / 20);
    fd = open(path, O_WRONLY);
    CHECK(fd >= 0 && write(fd, limit, (size_t)len) == len);
    close(fd);
    /* made clean; what comes back dirty afterwards (the thread's page
     * cache, given back on request) may stay */
    CHECK(T_WAIT(sl_stat("madv_dontneed_bytes") >= dontneed + dirty, LONG_MS));
    CHECK(sl_stat("pressure_events") > 0);
}

/* ---- driver --------------------------------------------------------------- */

static int run(const char *self, const char *scenario, const char *const env[])
{
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; env[i]; i += 2)
            setenv(env[i], env[i + 1], 1);
        execl(self, self, scenario, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok)
        fprintf(stderr, "scenario %s failed (status %d)\n", scenario, status);
    return ok;
}

/* A fresh memory cgroup (v2 under /sys/fs/cgroup, or v1 under
 * /sys/fs/cgroup/memory) that this test may limit, or NULL. */
static char cgroup[512];
static bool cgroup_v2;
static const char *make_cgroup(void)
{
    const char *bases[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/memory" };
    const char *probe[] = { "memory.high", "memory.soft_limit_in_bytes" };
    for (int i = 0; i < 2; i++) {
        snprintf(cgroup, sizeof cgroup, "%s/sluice-test-%d", bases[i], (int)getpid());
        if (mkdir(cgroup, 0755) != 0)
            continue;
        char f[600];
        snprintf(f, sizeof f, "%s/%s", cgroup, probe[i]);
        if (access(f, W_OK) == 0) {
            cgroup_v2 = i == 0;
            return cgroup;
        }
        rmdir(cgroup);
    }
    return NULL;
}

/* sl_purge while the reclaimer decays (1 ms): the reclaimer may have a
 * block's spans off the free lists when sl_purge first unmaps the wholly
 * free blocks; sl_purge still leaves none mapped (it failed 6-12 rounds in
 * 300 before page_purge_all looked again after its own purge). */
static void scenario_purge_race(void)
{
    pthread_t t; /* a second thread: the reclaimer starts */
    CHECK_EQ(pthread_create(&t, NULL, nothing, NULL), 0);
    pthread_join(t, NULL);
    enum { N = 4000, ROUNDS = 300 }; /* 16 MiB of 4 KiB objects */
    static void *p[N];
    unsigned left = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++) {
            p[i] = sl_malloc(4096);
            memset(p[i], 1, 4096);
        }
        for (int i = 0; i < N; i++)
            sl_free(p[i]);
        sl_purge();
        left += sl_stat("blocks_free") != 0;
    }
    CHECK_EQ(left, 0);
    CHECK(sl_stat("reclaimer_runs") > 0); /* the race was there to be had */
    CHECK_EQ(sl_check(), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        const char *s = argv[1];
        if (!strcmp(s, "calloc"))
            scenario_calloc();
        else if (!strcmp(s, "decay"))
            scenario_decay();
        else if (!strcmp(s, "purge_now"))
            scenario_purge_now();
        else if (!strcmp(s, "off"))
            scenario_off();
        else if (!strcmp(s, "at_once"))
            scenario_at_once();
        else if (!strcmp(s, "fork"))
            scenario_fork();
        else if (!strcmp(s, "threads"))
            scenario_threads();
        else if (!strcmp(s, "no_thread"))
            scenario_no_thread();
        else if (!strcmp(s, "churn"))
            scenario_churn();
        else if (!strcmp(s, "purge_race"))
            scenario_purge_race();
        else if (!strcmp(s, "idle_free"))
            scenario_idle_free();
        else if (!strcmp(s, "pressure"))
            scenario_pressure(argv[2], !strcmp(argv[3], "v2"));
        return t_done(s);
    }
    const char *self = "/proc/self/exe";
    static const char *const fast_free[] = { "SLUICE_PURGE", "free", "SLUICE_DIRTY_DECAY_MS", "100",
                                             "SLUICE_LAZY_DECAY_MS", "300", NULL };
    static const char *const fast_dontneed[] = { "SLUICE_PURGE", "dontneed", "SLUICE_DIRTY_DECAY_MS", "100",
                                                 "SLUICE_LAZY_DECAY_MS", "300", NULL };
    static const char *const slow[] = { "SLUICE_DIRTY_DECAY_MS", "3600000", "SLUICE_LAZY_DECAY_MS", "3600000",
                                        NULL };
    static const char *const off[] = { "SLUICE_PURGE", "off", NULL };
    static const char *const at_once_free[] = { "SLUICE_DIRTY_DECAY_MS", "0", "SLUICE_LAZY_DECAY_MS", "20", NULL };
    static const char *const at_once_dn[] = { "SLUICE_PURGE", "dontneed", "SLUICE_DIRTY_DECAY_MS", "0", NULL };
    static const char *const tiny[] = { "SLUICE_DIRTY_DECAY_MS", "1", "SLUICE_LAZY_DECAY_MS", "2", NULL };
    static const char *const none[] = { NULL };
    CHECK(run(self, "calloc", none));
    CHECK(run(self, "calloc", fast_free));
    CHECK(run(self, "calloc", fast_dontneed));
    CHECK(run(self, "calloc", at_once_free));
    CHECK(run(self, "calloc", at_once_dn));
    CHECK(run(self, "calloc", off));
    CHECK(run(self, "decay", fast_free));
    CHECK(run(self, "decay", fast_dontneed));
    CHECK(run(self, "purge_now", slow));
    CHECK(run(self, "off", off));
    CHECK(run(self, "at_once", at_once_free));
    CHECK(run(self, "fork", fast_free));
    CHECK(run(self, "threads", tiny));
    CHECK(run(self, "purge_race", tiny));
    static const char *const no_thread[] = { "SLUICE_RECLAIMER", "off", "SLUICE_DIRTY_DECAY_MS", "100",
                                             "SLUICE_LAZY_DECAY_MS", "300", NULL };
    static const char *const single[] = { "SLUICE_DIRTY_DECAY_MS", "100", "SLUICE_LAZY_DECAY_MS", "300", NULL };
    static const char *const forced[] = { "SLUICE_RECLAIMER", "on", "SLUICE_DIRTY_DECAY_MS", "100",
                                          "SLUICE_LAZY_DECAY_MS", "300", NULL };
    static const char *const churny[] = { "SLUICE_RECLAIMER", "off", "SLUICE_DIRTY_DECAY_MS", "1000",
                                          "SLUICE_LAZY_DECAY_MS", "10000", NULL };
    CHECK(run(self, "churn", churny));
    CHECK(run(self, "idle_free", churny));
    CHECK(run(self, "no_thread", no_thread));
    CHECK(run(self, "no_thread", single)); /* the default keeps a single-threaded program so */
    CHECK(run(self, "decay", forced));     /* unless asked: then the thread runs the decay */
    const char *cg = make_cgroup();
    if (!cg) {
        printf("purge: pressure test skipped: cannot create a memory cgroup under /sys/fs/cgroup "
               "(v2 with memory.high, or v1 with the memory controller; needs write access)\n");
    } else {
        pid_t pid = fork();
        if (pid == 0) {
            char procs[600];
            snprintf(procs, sizeof procs, "%s/cgroup.procs", cg);
            int fd = open(procs, O_WRONLY);
            if (fd < 0 || dprintf(fd, "%d\n", (int)getpid()) < 0)
                _exit(77);
            close(fd);
            static const char *const env[] = { "SLUICE_DIRTY_DECAY_MS", "3600000", "SLUICE_LAZY_DECAY_MS",
                                               "3600000", NULL };
            for (int i = 0; env[i]; i += 2)
                setenv(env[i], env[i + 1], 1);
            execl(self, self, "pressure", cg, cgroup_v2 ? "v2" : "v1", (char *)NULL);
            _exit(127);
        }
        int status;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
            printf("purge: pressure test skipped: cannot move a process into %s\n", cg);
        else
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        rmdir(cg);
    }
    return t_done("purge");
}
