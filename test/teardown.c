/* Teardown (layer 8): a free of a big range returns at once and a pool of
 * workers releases it; sl_flush waits; memory is never lost to the queue
 * (a refused mapping finishes it, a queue past its bound makes the freeing
 * thread help); fork, signals, exit, a single-threaded program and
 * SLUICE_TEARDOWN=0. Options are read at start, so each case runs in a
 * fresh process (this program re-run with the case's name and
 * environment); a misuse case expects one line on stderr and an abort. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#define MiB ((size_t)1 << 20)

static bool mapped(const void *p)
{
    unsigned char v;
    return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) == 0;
}

static void touch(char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 1;
}

static char *big(size_t n)
{
    char *p = sl_malloc(n);
    if (p)
        touch(p, n);
    return p;
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

static void *nothing(void *a) { return a; }
/* Make the process multi-threaded, as the auto mode asks */
static void have_threads(void)
{
    pthread_t t;
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
}

static void flushed(void)
{
    sl_flush();
    CHECK_EQ(sl_stat("teardown_pending_bytes"), 0);
    CHECK_EQ(sl_stat("teardown_inflight_bytes"), 0);
}

/* No workers: a freed range waits, mapped but out of the pagemap, until
 * sl_flush. A range of at most 128 MiB goes to the huge cache first and
 * reaches the queue by sl_purge. */
static void case_queued(void)
{
    have_threads();
    char *p = big(256 * MiB);
    sl_free(p);
    CHECK_EQ(sl_stat("teardown_ranges"), 1);
    CHECK_EQ(sl_stat("teardown_pending_bytes"), 256 * MiB);
    CHECK(mapped(p));               /* reserved until its teardown ends */
    CHECK_EQ(sl_check(), 0);        /* not in the pagemap; counts add up */
    char *q = big(256 * MiB);
    CHECK(q && (q + 256 * MiB <= p || q >= p + 256 * MiB)); /* not reused early */
    sl_free(q);
    char *c = big(100 * MiB);
    sl_free(c); /* cached, not queued */
    CHECK_EQ(sl_stat("teardown_ranges"), 2);
    sl_purge();
    CHECK_EQ(sl_stat("teardown_ranges"), 3);
    CHECK(sl_stat("mapped_bytes") >= 612 * MiB);
    flushed();
    CHECK(!mapped(p) && !mapped(q) && !mapped(c));
    CHECK_EQ(sl_stat("teardown_bytes"), 612 * MiB);
    CHECK_EQ(sl_stat("teardown_helped"), sl_stat("teardown_batches"));
    CHECK_EQ(sl_stat("teardown_workers"), 0);
    CHECK_EQ(sl_check(), 0);
}

/* Workers release it; the freeing thread only queues. */
static void case_workers(void)
{
    have_threads();
    int before = threads_now();
    char *p = big(512 * MiB);
    madvise(p, 512 * MiB, MADV_NOHUGEPAGE);
    sl_free(p);
    CHECK_EQ(sl_stat("teardown_ranges"), 1);
    CHECK(sl_stat("teardown_workers") >= 1);
    CHECK(threads_now() > before);
    flushed();
    CHECK(!mapped(p));
    CHECK_EQ(sl_stat("teardown_bytes"), 512 * MiB);
    CHECK_EQ(sl_stat("teardown_batches"), 16); /* 32 MiB gather batches */
    CHECK(sl_stat("teardown_max_ns") > 0 && sl_stat("teardown_ns") >= sl_stat("teardown_max_ns"));
    /* a shrinking realloc queues the tail */
    char *r = big(512 * MiB);
    char *s = sl_realloc(r, 100 * MiB);
    CHECK(s == r && s[100 * MiB - 4096] == 1);
    CHECK_EQ(sl_stat("teardown_ranges"), 2);
    sl_free(s);
    flushed();
    CHECK(!mapped(r + 200 * MiB));
    CHECK_EQ(sl_check(), 0);
}

/* Wholly free pageblocks released in bulk (sl_purge, sl_cache_destroy)
 * reach the queue too, adjacent ones as one range, once workers run.
 * SLUICE_TEARDOWN_MIN=2M here, so that every block's range is queued, and
 * SLUICE_PURGE=off, so that the reclaimer's decay (which releases what it
 * unmaps itself) leaves the free blocks to sl_purge however slow the
 * build. */
static void case_blocks(void)
{
    have_threads();
    sl_free(big(256 * MiB)); /* starts the workers */
    flushed();
    uint64_t bytes0 = sl_stat("teardown_bytes") + sl_stat("teardown_sync_bytes");
    uint64_t ranges0 = sl_stat("teardown_ranges");
    uint64_t unmaps0 = sl_stat("block_unmap");
    enum { N = 300 };
    static void *runs[N];
    for (int i = 0; i < N; i++)
        runs[i] = big(1 * MiB); /* page runs in pageblocks */
    for (int i = 0; i < N; i++)
        sl_free(runs[i]);
    sl_purge();
    flushed();
    uint64_t blocks = sl_stat("block_unmap") - unmaps0;
    CHECK(blocks >= 100);
    CHECK_EQ(sl_stat("teardown_bytes") + sl_stat("teardown_sync_bytes") - bytes0, blocks * 2 * MiB);
    CHECK(sl_stat("teardown_ranges") - ranges0 >= 1);
    printf("blocks: %llu pageblocks unmapped as %llu ranges, %llu synchronous\n", (unsigned long long)blocks,
           (unsigned long long)(sl_stat("teardown_ranges") - ranges0), (unsigned long long)sl_stat("teardown_sync"));
    /* an object cache destroyed with its slabs */
    sl_cache_t *c = sl_cache_create("pages", 4096, 0, 0, NULL);
    for (int i = 0; i < 50000; i++)
        CHECK(sl_cache_alloc(c) != NULL);
    bytes0 = sl_stat("teardown_bytes") + sl_stat("teardown_sync_bytes");
    unmaps0 = sl_stat("block_unmap");
    ranges0 = sl_stat("teardown_ranges");
    sl_cache_destroy(c);
    flushed();
    blocks = sl_stat("block_unmap") - unmaps0;
    CHECK(blocks >= 50);
    CHECK(sl_stat("teardown_ranges") - ranges0 < blocks / 4); /* neighbours go together */
    printf("cache: %llu pageblocks unmapped as %llu ranges\n", (unsigned long long)blocks,
           (unsigned long long)(sl_stat("teardown_ranges") - ranges0));
    CHECK_EQ(sl_stat("teardown_bytes") + sl_stat("teardown_sync_bytes") - bytes0, blocks * 2 * MiB);
    CHECK_EQ(sl_check(), 0);
}

#if SL_OVERRIDE /* ulimit -v and 64 GiB do not mix with a sanitizer's shadow memory */
/* 64 GiB, one page touched in every 64 MiB: queued, released, gone. */
static void case_64g(void)
{
    have_threads();
    size_t n = (size_t)64 << 30;
    char *p = sl_malloc(n);
    CHECK(p != NULL);
    if (!p)
        return;
    for (size_t off = 0; off < n; off += 64 * MiB)
        p[off] = 1;
    sl_free(p);
    CHECK_EQ(sl_stat("teardown_ranges"), 1);
    flushed();
    CHECK(!mapped(p) && !mapped(p + n - 1));
    CHECK_EQ(sl_stat("teardown_bytes"), n);
    CHECK_EQ(sl_stat("teardown_batches"), n / (32 * MiB));
    CHECK_EQ(sl_check(), 0);
}
#endif

/* An idle worker exits after SLUICE_TEARDOWN_IDLE_MS (50 here). */
static void case_idle_exit(void)
{
    have_threads();
    int before = threads_now();
    sl_free(big(256 * MiB));
    flushed();
    for (int i = 0; i < 100 && threads_now() > before; i++)
        sleep_ms(20);
    CHECK_EQ(threads_now(), before);
    sl_free(big(256 * MiB)); /* and a new one starts for new work */
    CHECK(sl_stat("teardown_workers") >= 2);
    flushed();
}

#if SL_OVERRIDE
/* A mapping refused while teardown is pending: the allocating thread
 * finishes the queue and tries again. Under ulimit -v the queued 1 GiB
 * still counts, so the second 1 GiB fits only once it is unmapped. */
static void case_enomem(void)
{
    have_threads();
    struct rlimit rl;
    long vm_kb = proc_status("VmSize");
    rl.rlim_cur = rl.rlim_max = (rlim_t)vm_kb * 1024 + 1536 * MiB;
    CHECK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
    char *p = big(1024 * MiB);
    CHECK(p != NULL);
    sl_free(p);
    CHECK_EQ(sl_stat("teardown_pending_bytes"), 1024 * MiB);
    errno = 0;
    char *q = sl_malloc(1024 * MiB);
    CHECK(q != NULL);
    CHECK_EQ(errno, 0);
    CHECK(sl_stat("teardown_helped") >= 1);
    CHECK_EQ(sl_stat("teardown_pending_bytes"), 0);
    sl_free(q);
    /* with nothing queued a refusal is plain ENOMEM */
    sl_flush();
    void *r = sl_malloc(2048 * MiB);
    CHECK(r == NULL && errno == ENOMEM);
}
#endif

/* SLUICE_TEARDOWN_MAX_PENDING=256M, no workers: a freeing thread that
 * finds the queue past the bound releases batches until it is not. */
static void case_bound(void)
{
    have_threads();
    size_t most = 0;
    for (int i = 0; i < 6; i++) {
        sl_free(big(200 * MiB));
        size_t pend = sl_stat("teardown_pending_bytes");
        most = pend > most ? pend : most;
    }
    CHECK(most <= 256 * MiB + 200 * MiB);
    CHECK(sl_stat("teardown_helped") > 0);
    flushed();
    CHECK_EQ(sl_stat("teardown_bytes"), 6 * 200 * MiB);
}

/* The same bound set while the program runs (sl_ctl), after a first
 * queued range has resolved the limits with the default (an eighth of
 * RAM): the new bound holds from the next free. */
static void case_bound_ctl(void)
{
    have_threads();
    sl_free(big(200 * MiB));
    sl_flush();
    int64_t bound = 256 * MiB;
    CHECK_EQ(sl_ctl("opt.teardown_max_pending", NULL, NULL, &bound, sizeof bound), 0);
    uint64_t helped = sl_stat("teardown_helped");
    size_t most = 0;
    for (int i = 0; i < 6; i++) {
        sl_free(big(200 * MiB));
        size_t pend = sl_stat("teardown_pending_bytes");
        most = pend > most ? pend : most;
    }
    CHECK(most <= 256 * MiB + 200 * MiB);
    CHECK(sl_stat("teardown_helped") > helped);
    flushed();
}

struct churn {
    unsigned long long seed;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    for (int i = 0; i < 12; i++) {
        size_t n = (130 + t_rand(&c->seed) % 100) * MiB;
        char *p = sl_malloc(n);
        if (!p)
            return (void *)1;
        for (size_t off = 0; off < n; off += 64 << 10)
            p[off] = (char)i;
        void *small[64];
        for (int k = 0; k < 64; k++)
            small[k] = sl_malloc(16 + k * 24);
        if (p[n / 2 & ~(size_t)0xffff] != (char)i)
            return (void *)2;
        sl_free(p);
        for (int k = 0; k < 64; k++)
            sl_free(small[k]);
    }
    return NULL;
}

/* Threads free big ranges while others map new ones. */
static void case_threads(void)
{
    pthread_t t[4];
    struct churn c[4];
    for (int i = 0; i < 4; i++) {
        c[i].seed = 0x9e3779b97f4a7c15ull * (unsigned)(i + 1);
        pthread_create(&t[i], NULL, churn_main, &c[i]);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
    CHECK_EQ(sl_stat("teardown_ranges") + sl_stat("teardown_sync"), 48);
    flushed();
    CHECK_EQ(sl_check(), 0);
}

/* Fork with a range queued (no workers): the child unmaps it, and starts
 * its own queue; the parent still has it. */
static void case_fork_pending(void)
{
    have_threads();
    char *p = big(256 * MiB);
    sl_free(p);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = !mapped(p) && sl_stat("teardown_pending_bytes") == 0 && sl_check() == 0;
        sl_free(big(256 * MiB));
        ok &= sl_stat("teardown_pending_bytes") == 256 * MiB;
        sl_flush();
        ok &= sl_stat("teardown_pending_bytes") == 0;
        _exit(ok ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(mapped(p));
    flushed();
    CHECK(!mapped(p));
}

/* Fork while workers are releasing: the child inherits no half-done
 * queue and no workers, and can go on allocating and freeing. */
static void case_fork_inflight(void)
{
    have_threads();
    for (int i = 0; i < 12; i++) {
        char *p = big(256 * MiB);
        madvise(p, 256 * MiB, MADV_NOHUGEPAGE);
        sl_free(p);
        sleep_ms(i % 3);
        pid_t pid = fork();
        if (pid == 0) {
            int ok = sl_stat("teardown_pending_bytes") == 0 && sl_stat("teardown_inflight_bytes") == 0 &&
                     !mapped(p) && sl_check() == 0;
            have_threads();
            sl_free(big(128 * MiB + 4096));
            sl_flush();
            ok &= sl_stat("teardown_inflight_bytes") == 0 && sl_check() == 0;
            _exit(ok ? 0 : 1);
        }
        int st;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    flushed();
    CHECK_EQ(sl_check(), 0);
}

/* Signals sent to the process never land on a worker: they block all. */
static _Atomic long other_thread_hits, hits;
static pid_t main_tid;
static void on_usr1(int sig)
{
    (void)sig;
    hits++;
    if ((pid_t)syscall(SYS_gettid) != main_tid)
        other_thread_hits++;
}

static void case_signals(void)
{
    have_threads();
    main_tid = (pid_t)syscall(SYS_gettid);
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 4; i++) {
        sl_free(big(256 * MiB));
        for (int k = 0; k < 50; k++)
            kill(getpid(), SIGUSR1);
    }
    flushed();
    CHECK(sl_stat("teardown_workers") >= 1);
    for (int i = 0; i < 100 && hits < 200; i++)
        sleep_ms(10);
    CHECK_EQ(hits, 200);
    CHECK_EQ(other_thread_hits, 0);
}

/* Exit with teardown pending or in flight: nothing waits for it. */
static void case_exit(void)
{
    have_threads();
    sl_free(big(1024 * MiB));
    exit(0);
}

/* A single-threaded program (auto): no thread is started; the caller
 * unmaps the range itself. */
static void case_single(void)
{
    char *p = big(256 * MiB);
    sl_free(p);
    CHECK(!mapped(p));
    CHECK_EQ(sl_stat("teardown_ranges"), 0);
    CHECK_EQ(sl_stat("teardown_sync"), 1);
#if SL_OVERRIDE /* a sanitizer's runtime may have a thread of its own */
    CHECK_EQ(threads_now(), 1);
#endif
}

/* SLUICE_TEARDOWN=0: synchronous even with threads. */
static void case_off(void)
{
    have_threads();
    char *p = big(256 * MiB);
    sl_free(p);
    CHECK(!mapped(p));
    CHECK_EQ(sl_stat("teardown_ranges"), 0);
    CHECK_EQ(sl_stat("teardown_workers"), 0);
}

/* Misuse of a range in teardown: out of the pagemap, so reported as a
 * pointer sluice does not own. */
static void case_double_free(void)
{
    have_threads();
    char *p = big(256 * MiB);
    sl_free(p);
    sl_free(p);
}

static void case_realloc_freed(void)
{
    have_threads();
    char *p = big(256 * MiB);
    sl_free(p);
    p = sl_realloc(p, 10);
}

struct tcase {
    const char *name, *env, *message; /* message: the one line of an abort */
    void (*fn)(void);
};

#define NOWORK "SLUICE_TEARDOWN=on SLUICE_TEARDOWN_WORKERS=0"
static const struct tcase cases[] = {
    { "queued", NOWORK, NULL, case_queued },
    { "workers", "SLUICE_TEARDOWN_WORKERS=2", NULL, case_workers },
    { "blocks", "SLUICE_TEARDOWN_MIN=2M SLUICE_PURGE=off", NULL, case_blocks },
    { "idle_exit", "SLUICE_TEARDOWN_IDLE_MS=50", NULL, case_idle_exit },
    { "bound", NOWORK " SLUICE_TEARDOWN_MAX_PENDING=256M", NULL, case_bound },
    { "bound_ctl", NOWORK, NULL, case_bound_ctl },
    { "threads", "", NULL, case_threads },
    { "fork_pending", NOWORK, NULL, case_fork_pending },
    { "fork_inflight", "SLUICE_TEARDOWN_WORKERS=2", NULL, case_fork_inflight },
    { "signals", "", NULL, case_signals },
    { "exit_inflight", "", NULL, case_exit },
    { "exit_pending", NOWORK, NULL, case_exit },
    { "single", "", NULL, case_single },
    { "off", "SLUICE_TEARDOWN=0", NULL, case_off },
    { "double_free", NOWORK, "sluice: free of a pointer sluice did not allocate: 0x", case_double_free },
    { "realloc_freed", "", "sluice: realloc of a pointer sluice did not allocate: 0x", case_realloc_freed },
#if SL_OVERRIDE /* ulimit -v and 64 GiB do not mix with a sanitizer's shadow memory */
    { "enomem", NOWORK, NULL, case_enomem },
    { "64g", "", NULL, case_64g },
#endif
};

int main(int argc, char **argv)
{
    size_t ncases = sizeof cases / sizeof *cases;
    if (argc > 1) {
        for (size_t i = 0; i < ncases; i++)
            if (!strcmp(argv[1], cases[i].name)) {
                cases[i].fn();
                return t_done(argv[1]);
            }
        return 2;
    }
    for (size_t i = 0; i < ncases; i++) {
        char out[4096];
        size_t n;
        int st = t_run_self(argv[0], cases[i].name, cases[i].env, out, sizeof out, &n);
        const char *m = cases[i].message;
        bool ok = m ? WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(out, m) &&
                          strchr(out, '\n') == out + n - 1
                    : WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok)
            fprintf(stderr, "case %s (%s): status %#x, stderr:\n%s\n", cases[i].name, cases[i].env, st, out);
        else
            printf("case %s: ok\n", cases[i].name);
        fflush(stdout);
        CHECK(ok);
    }
    return t_done("teardown");
}
