/* Running out of memory loses nothing: memory the program freed is never
 * kept from it by sluice's caches, even after an allocation failed.
 *
 * A. Under an address-space limit (RLIMIT_AS, set here in a forked child
 *    per limit: 64, 128, 200 and 512 MiB above the child's VmSize when it
 *    starts), the sequence of the bug report, twice: 1 MiB blocks until
 *    NULL, 64-byte blocks, 16 MiB blocks, 256 KiB calloc blocks, one block
 *    grown by realloc, malloc(0) slots (zero-size zones; not in the bug
 *    report), two threads that run out (64 KiB blocks, then 2 KiB ones for
 *    the magazines), free everything into their own caches and exit, one
 *    that does the same and stays alive. Everything is freed after each
 *    step; then malloc of 90% of the largest single block the child could
 *    get at its start must succeed. At the end the second round must have
 *    got, in every step, at least 90% of what the first got (or one block
 *    less): the 90% malloc alone can be served by its own earlier block,
 *    kept in the huge cache, while the steps go short.
 * B. The checked mode (SLUICE_CHECK=1, in a child started again from
 *    /proc/self/exe): 64 KiB blocks until NULL, all freed, four rounds;
 *    each later round gets at least 95% of the bytes of the first.
 * C. Under a cgroup v2 memory.max (where one can be made here, else one
 *    line and skipped): a failure is an OOM kill rather than NULL, so a
 *    bounded variant: fill to 70% of memory.max, free, the same bytes
 *    again in other sizes; the child is not killed, and memory.current
 *    falls after sl_purge().
 * Every failed allocation is NULL with errno ENOMEM. After a failed check
 * the stats of sluice's caches are printed (sl_stat). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* The pointer array (mmap'd, not malloc'd, and before the limit is set):
 * also the cap of the 64-byte and malloc(0) phases, 2 million blocks
 * (128 MiB of 64-byte blocks), which keeps the 512 MiB run short; the 200
 * and 512 MiB limits reach the cap there before NULL, and say so. */
#define SLOTS      ((size_t)2000000)
#define SLICE      (SLOTS / 2) /* each of two threads fills its own half */
#define STACK_SIZE (256 * KiB) /* the threads' stacks: glibc caches freed ones */

static void *volatile sink;
static void **held;
static size_t baseline, limit_bytes, largest;
static int cur_round;
static size_t cur_limit_mib;

/* ---- /proc and printing, without malloc (it may be out of memory) ------- */

/* A "Key: N kB" line of /proc/self/status, in bytes. */
static size_t status_bytes(const char *key)
{
    long kib = proc_status(key);
    return kib > 0 ? (size_t)kib * KiB : 0;
}

static size_t vm_size(void) { return status_bytes("VmSize"); }

static double mib(size_t b) { return (double)b / (double)MiB; }
static double held_mib(void) { return ((double)vm_size() - (double)baseline) / (double)MiB; }

/* sluice's own figures for what it keeps: every statistic whose name has
 * "cache" in it, and the gauges of mapped and free memory. */
static void print_stats(const char *indent)
{
    /* the reclaim registry's drains (base/drain.h), in order: what each
     * held when an allocation last failed, and holds now */
    static const char *const drains[] = { "quarantine", "remote_batches", "magazines", "page_caches", "run_cache",
                                          "free_blocks", "huge_cache", "teardown", "zero_zones" };
    printf("%sallocations that failed and drained: %llu; held at the last failure (now):", indent,
           (unsigned long long)sl_stat("enomem_drains"));
    for (size_t i = 0; i < sizeof drains / sizeof *drains; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "enomem_held.%s", drains[i]);
        snprintf(b, sizeof b, "held.%s", drains[i]);
        printf(" %s=%.1fMiB (%.1f)", drains[i], mib((size_t)sl_stat(a)), mib((size_t)sl_stat(b)));
    }
    printf("\n%smapped_bytes=%.1fMiB\n", indent, mib((size_t)sl_stat("mapped_bytes")));
}

/* ---- the address-space limit ------------------------------------------- */

static void set_limit(size_t limit_mib, const char *what)
{
    baseline = vm_size();
    limit_bytes = limit_mib * MiB;
    struct rlimit rl = { baseline + limit_bytes, baseline + limit_bytes };
    int r = setrlimit(RLIMIT_AS, &rl);
    CHECK_EQ(r, 0);
    printf("exhaust: %s %zu MiB: baseline VmSize %zu KiB, RLIMIT_AS set to %zu KiB (baseline + %zu MiB)\n", what,
           limit_mib, baseline / KiB, (baseline + limit_bytes) / KiB, limit_mib);
}

/* ---- filling ------------------------------------------------------------ */

enum how { HOW_MALLOC, HOW_CALLOC };

/* Blocks of `size` into out until NULL or cap; *err: errno at the NULL (0
 * if the cap came first). No CHECK here: threads call it too. */
static size_t fill(size_t size, enum how how, void **out, size_t cap, int *err)
{
    *err = 0;
    for (size_t n = 0; n < cap; n++) {
        errno = 0;
        void *p = how == HOW_CALLOC ? calloc(1, size) : malloc(size);
        if (!p) {
            *err = errno ? errno : -1;
            return n;
        }
        if (size)
            memset(p, 0xa5, size < 64 ? size : 64);
        out[n] = p;
    }
    return cap;
}

static void free_all(void **ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
}

/* A failure is NULL with ENOMEM; reaching the cap is no failure when the
 * cap is expected (capped). */
static void check_end(const char *step, int err, int capped_ok)
{
    if (err == 0 && capped_ok)
        return;
    if (err != ENOMEM)
        printf("exhaust:   %s: the failure had errno %d (%s), not ENOMEM\n", step, err,
               err > 0 ? strerror(err) : "NULL");
    CHECK_EQ(err, ENOMEM);
}

/* The promise: after everything was freed, 90% of the largest block the
 * child could get at its start is there again. */
static void check90(const char *after)
{
    size_t held_b = vm_size() - baseline;
    size_t want = largest / 10 * 9;
    errno = 0;
    void *p = malloc(want);
    int err = errno;
    printf("exhaust:   [%zu MiB r%d] after %s: address space held %.1f MiB of %zu; malloc(%.1f MiB) = 90%% of the "
           "largest %.1f MiB: %s\n",
           cur_limit_mib, cur_round, after, mib(held_b), cur_limit_mib, mib(want), mib(largest),
           p ? "ok" : "FAILED");
    CHECK(p != NULL);
    if (p) {
        ((volatile char *)p)[0] = 1;
        ((volatile char *)p)[want - 1] = 1;
        sink = p;
        free(p);
    } else {
        if (err != ENOMEM)
            printf("exhaust:     errno %d, not ENOMEM\n", err);
        CHECK_EQ(err, ENOMEM);
        print_stats("exhaust:     ");
    }
}

/* The largest single malloc that succeeds, to 64 KiB; each success is
 * freed and purged (sl_purge, sl_flush) before the next try, so that the
 * reference itself does not depend on what sluice caches. */
static size_t find_largest(void)
{
    errno = 0;
    void *p = malloc(limit_bytes + MiB);
    CHECK(p == NULL && errno == ENOMEM);
    free(p);
    size_t lo = 0, hi = limit_bytes + MiB;
    while (hi - lo > 64 * KiB) {
        size_t mid = (lo + (hi - lo) / 2) & ~(64 * KiB - 1);
        errno = 0;
        p = malloc(mid);
        if (p) {
            ((volatile char *)p)[mid - 1] = 1;
            sink = p;
            free(p);
            sl_purge();
            sl_flush();
            lo = mid;
        } else {
            CHECK_EQ(errno, ENOMEM);
            hi = mid;
        }
    }
    return lo;
}

/* ---- threads ------------------------------------------------------------ */

struct worker {
    pthread_t tid;
    void **slots;
    size_t n64k, nsmall;
    int err64k, errsmall;
    int stay; /* stays alive after freeing, until released */
    int go, freed, release, poke, poked;
    pthread_barrier_t *bar;
};

static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wcond = PTHREAD_COND_INITIALIZER;

/* 64 KiB blocks (medium runs) until NULL, then 2 KiB blocks (small
 * objects, through the magazines) until NULL; the two threads of a pair
 * wait for each other, so both have run out before either frees. Then
 * everything is freed by its own thread, into that thread's caches, and
 * the thread exits, or waits (stay) until released. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_mutex_lock(&wlock);
    while (!w->go)
        pthread_cond_wait(&wcond, &wlock);
    pthread_mutex_unlock(&wlock);
    w->n64k = fill(64 * KiB, HOW_MALLOC, w->slots, SLICE, &w->err64k);
    w->nsmall = fill(2 * KiB, HOW_MALLOC, w->slots + w->n64k, SLICE - w->n64k, &w->errsmall);
    if (w->bar)
        pthread_barrier_wait(w->bar);
    free_all(w->slots, w->n64k + w->nsmall);
    pthread_mutex_lock(&wlock);
    w->freed = 1;
    pthread_cond_broadcast(&wcond);
    while (w->stay && !w->release) {
        if (w->poke) { /* one allocation slow path: a request to give back is answered there */
            pthread_mutex_unlock(&wlock);
            sink = malloc(3000); /* a class this thread has not used: its slow path */
            free(sink);
            pthread_mutex_lock(&wlock);
            w->poke = 0;
            w->poked = 1;
            pthread_cond_broadcast(&wcond);
        }
        pthread_cond_wait(&wcond, &wlock);
    }
    pthread_mutex_unlock(&wlock);
    return NULL;
}

/* Threads are made before the limit's largest block is measured, so their
 * stacks are inside the reference, and no pthread_create meets a full
 * address space. Per round: a pair that exits, one that stays. */
static struct worker workers[2][3];
static int worker_ok[2][3];

static void start_workers(void)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_SIZE);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++) {
            struct worker *w = &workers[r][i];
            memset(w, 0, sizeof *w);
            w->slots = held + (i == 1 ? SLICE : 0);
            w->stay = i == 2;
            int e = pthread_create(&w->tid, &attr, worker_main, w);
            if (e)
                printf("exhaust:   pthread_create: %s\n", strerror(e));
            CHECK_EQ(e, 0);
            worker_ok[r][i] = !e;
        }
    pthread_attr_destroy(&attr);
}

static void go(struct worker *w)
{
    pthread_mutex_lock(&wlock);
    w->go = 1;
    pthread_cond_broadcast(&wcond);
    pthread_mutex_unlock(&wlock);
}

static void report_worker(const char *who, struct worker *w)
{
    printf("exhaust:   [%zu MiB r%d] %s: %zu blocks of 64 KiB (%.1f MiB), then %zu of 2 KiB (%.1f MiB) until "
           "NULL; freed by the thread\n",
           cur_limit_mib, cur_round, who, w->n64k, mib(w->n64k * 64 * KiB), w->nsmall, mib(w->nsmall * 2 * KiB));
    check_end(who, w->err64k, 0);
    check_end(who, w->errsmall, 0);
}

/* ---- case A --------------------------------------------------------------- */

/* What each step got, per round (blocks; bytes for the threads), and the
 * one-block slack of its comparison. */
enum { NSTEPS = 8 };
static const char *const step_names[NSTEPS] = { "1 MiB blocks",      "64-byte blocks",          "16 MiB blocks",
                                                 "256 KiB calloc",    "realloc growth (MiB)",    "malloc(0) slots",
                                                 "two threads (bytes)", "alive thread (bytes)" };
static const size_t step_unit[NSTEPS] = { 1, 1, 1, 1, 1, 1, 64 * KiB, 64 * KiB };
static size_t amounts[2][NSTEPS];

static void step_fill(int k, const char *what, size_t size, enum how how, size_t cap)
{
    int err;
    size_t n = fill(size, how, held, cap, &err);
    amounts[cur_round - 1][k] = n;
    printf("exhaust:   [%zu MiB r%d] %s: %zu blocks (%.1f MiB) %s\n", cur_limit_mib, cur_round, what, n,
           mib(n * size), err ? "until NULL" : "(the cap: not run out)");
    check_end(what, err, 1);
    free_all(held, n);
    check90(what);
}

static void round_a(int round)
{
    cur_round = round;
    struct worker *ws = workers[round - 1];
    step_fill(0, "1 MiB blocks", MiB, HOW_MALLOC, SLOTS);
    step_fill(1, "64-byte blocks", 64, HOW_MALLOC, SLOTS);
    step_fill(2, "16 MiB blocks", 16 * MiB, HOW_MALLOC, SLOTS);
    step_fill(3, "256 KiB calloc blocks", 256 * KiB, HOW_CALLOC, SLOTS);

    /* one block grown by 1 MiB steps until realloc fails */
    errno = 0;
    void *p = malloc(MiB), *q;
    int err = errno;
    size_t size = p ? MiB : 0;
    while (p) {
        errno = 0;
        q = realloc(p, size + MiB);
        if (!q) {
            err = errno;
            break;
        }
        ((volatile char *)q)[size] = 1;
        p = q;
        size += MiB;
    }
    amounts[round - 1][4] = size / MiB;
    if (p)
        printf("exhaust:   [%zu MiB r%d] realloc growth: reached %zu MiB, the next step failed\n", cur_limit_mib,
               round, size / MiB);
    else
        printf("exhaust:   [%zu MiB r%d] realloc growth: the first block, malloc(1 MiB), failed\n", cur_limit_mib,
               round);
    check_end("realloc growth", err, 0);
    free(p);
    check90("realloc growth");

    step_fill(5, "malloc(0) slots", 0, HOW_MALLOC, SLOTS);

    /* two threads run out, free into their own caches, exit */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    if (worker_ok[round - 1][0] && worker_ok[round - 1][1]) {
        ws[0].bar = ws[1].bar = &bar;
        go(&ws[0]);
        go(&ws[1]);
        pthread_join(ws[0].tid, NULL);
        pthread_join(ws[1].tid, NULL);
        worker_ok[round - 1][0] = worker_ok[round - 1][1] = 0;
        report_worker("thread 1 of 2 (exited)", &ws[0]);
        report_worker("thread 2 of 2 (exited)", &ws[1]);
        amounts[round - 1][6] = (ws[0].n64k + ws[1].n64k) * 64 * KiB + (ws[0].nsmall + ws[1].nsmall) * 2 * KiB;
        check90("two threads that exited");
    }
    pthread_barrier_destroy(&bar);

    /* one thread runs out, frees, and stays (blocked on a condition) */
    if (worker_ok[round - 1][2]) {
        go(&ws[2]);
        pthread_mutex_lock(&wlock);
        while (!ws[2].freed)
            pthread_cond_wait(&wcond, &wlock);
        pthread_mutex_unlock(&wlock);
        report_worker("thread that stays alive", &ws[2]);
        amounts[round - 1][7] = ws[2].n64k * 64 * KiB + ws[2].nsmall * 2 * KiB;
        /* Its caches are its own to give back (no other thread touches
         * them): a failed allocation asks it to, and it does on its next
         * allocation slow path. So: at once, or once it has allocated. */
        void *p = malloc(largest / 10 * 9);
        printf("exhaust:   [%zu MiB r%d] with a live thread's caches: malloc of 90%%: %s\n", cur_limit_mib, round,
               p ? "ok at once" : "failed: the live thread allocates once");
        free(p);
        if (!p) {
            pthread_mutex_lock(&wlock);
            ws[2].poke = 1;
            pthread_cond_broadcast(&wcond);
            while (!ws[2].poked)
                pthread_cond_wait(&wcond, &wlock);
            pthread_mutex_unlock(&wlock);
        }
        check90("a thread that stays alive (answered)");
        pthread_mutex_lock(&wlock);
        ws[2].release = 1;
        pthread_cond_broadcast(&wcond);
        pthread_mutex_unlock(&wlock);
        pthread_join(ws[2].tid, NULL);
        worker_ok[round - 1][2] = 0;
    }
}

static void case_a(size_t limit_mib)
{
    cur_limit_mib = limit_mib;
    set_limit(limit_mib, "A: address-space limit");
    start_workers();
    largest = find_largest();
    printf("exhaust:   [%zu MiB] the largest single block at the start: %.1f MiB (to 64 KiB)\n", limit_mib,
           mib(largest));
    CHECK(largest >= limit_bytes / 2);
    round_a(1);
    round_a(2);
    /* every step ran out: each failure drained the registry first */
    print_stats("exhaust:   ");
    CHECK(sl_stat("enomem_drains") >= 8);
    /* Checked again: the second round, after everything the first one
     * freed, gets what the first got in every step (90%, or one block
     * less), so memory freed before is not kept from any kind of request. */
    for (int k = 0; k < NSTEPS; k++) {
        size_t a = amounts[0][k], b = amounts[1][k];
        /* how far realloc grows in place (mremap) depends on where the
         * neighbouring mappings lie, not on what sluice keeps: reported,
         * not compared (check90 after it holds sluice to the promise) */
        if (k == 4) {
            printf("exhaust:   [%zu MiB] %s: round 1 %zu, round 2 %zu (not compared)\n", limit_mib, step_names[k], a,
                   b);
            continue;
        }
        int ok = b * 10 >= a * 9 || b + step_unit[k] >= a;
        printf("exhaust:   [%zu MiB] %s: round 1 %zu, round 2 %zu (%.1f%%): %s\n", limit_mib, step_names[k], a, b,
               a ? 100.0 * (double)b / (double)a : 100.0, ok ? "ok" : "FAILED (round 2 under 90% of round 1)");
        CHECK(ok);
    }
}

/* ---- case B: the checked mode, in a child started again ------------------- */

static int case_b_child(size_t limit_mib)
{
    size_t cap = limit_mib * MiB / (64 * KiB) + 64;
    held = mmap(NULL, cap * sizeof *held, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (held == MAP_FAILED)
        return 2;
    set_limit(limit_mib, "B: SLUICE_CHECK=1, address-space limit");
    size_t first = 0;
    for (int r = 1; r <= 4; r++) {
        int err;
        size_t n = fill(64 * KiB, HOW_MALLOC, held, cap, &err);
        size_t bytes = n * 64 * KiB;
        if (r == 1)
            first = bytes;
        printf("exhaust:   [B %zu MiB] round %d: %zu blocks of 64 KiB (%.1f MiB) until NULL: %.1f%% of round 1%s\n",
               limit_mib, r, n, mib(bytes), first ? 100.0 * (double)bytes / (double)first : 0.0,
               r > 1 && bytes * 100 < first * 95 ? " (under 95%: FAILED)" : "");
        check_end("checked mode 64 KiB blocks", err, 0);
        CHECK(n > 0);
        if (r > 1) {
            CHECK(bytes * 100 >= first * 95);
            if (bytes * 100 < first * 95)
                print_stats("exhaust:     ");
        }
        free_all(held, n);
        printf("exhaust:   [B %zu MiB] round %d: all freed; address space held %.1f MiB of %zu\n", limit_mib, r,
               held_mib(), limit_mib);
    }
    fprintf(stderr, "exhaust-counts %d %d\n", t_pass, t_fail);
    return 0;
}

/* Runs case B's child: SLUICE_CHECK=1 is read at start, so a fresh exec. */
static void case_b(const char *argv0, size_t limit_mib)
{
    static char out[1 << 16];
    char arg[32];
    size_t len;
    snprintf(arg, sizeof arg, "B%zu", limit_mib);
    int status = t_run_self(argv0, arg, "SLUICE_CHECK=1", out, sizeof out, &len);
    int p = 0, f = 0;
    char *line = strstr(out, "exhaust-counts ");
    if (line) {
        sscanf(line, "exhaust-counts %d %d", &p, &f);
        *line = 0;
    }
    fputs(out, stderr);
    t_pass += p;
    t_fail += f;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0 && line))
        printf("exhaust:   [B %zu MiB] the child %s %d\n", limit_mib,
               WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && line);
}

/* ---- case C: a cgroup v2 memory.max ------------------------------------- */

#define CG_MAX ((size_t)256 << 20)

static char cg_dir[560];

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    ssize_t r = write(fd, s, strlen(s));
    int e = r < 0 ? errno : 0;
    close(fd);
    return e;
}

static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == '\n') && (p[n] == 0 || p[n] == ' ' || p[n] == '\n'))
            return 1;
    return 0;
}

static size_t cg_current(void)
{
    char path[600], buf[64];
    snprintf(path, sizeof path, "%s/memory.current", cg_dir);
    return proc_read(path, buf, sizeof buf) > 0 ? (size_t)strtoull(buf, NULL, 10) : 0;
}

/* Make cg_dir, a new cgroup with memory.max = CG_MAX, under the current
 * cgroup or the root of the cgroup2 mount. 1, or 0 with the reason;
 * *enabled: the memory controller was switched on in parent's
 * subtree_control here (to be switched off again). */
static int cg_make(char *reason, size_t rcap, char *parent_out, size_t pcap, int *enabled)
{
    static char buf[1 << 16];
    char mnt[256] = "", rel[256] = "", mroot[256] = "/";
    *enabled = 0;
    if (proc_read("/proc/self/mountinfo", buf, sizeof buf) <= 0) {
        snprintf(reason, rcap, "/proc/self/mountinfo unreadable");
        return 0;
    }
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *sep = strstr(line, " - cgroup2 ");
        char root[256], point[256];
        if (sep && sscanf(line, "%*s %*s %*s %255s %255s", root, point) == 2) {
            memcpy(mnt, point, sizeof mnt);
            memcpy(mroot, root, sizeof mroot);
            break;
        }
    }
    if (!mnt[0]) {
        snprintf(reason, rcap, "no cgroup2 file system is mounted");
        return 0;
    }
    if (proc_read("/proc/self/cgroup", buf, sizeof buf) > 0) {
        char *p = strstr(buf, "0::");
        if (p && (p == buf || p[-1] == '\n')) {
            p += 3;
            size_t n = strcspn(p, "\n");
            if (n < sizeof rel)
                memcpy(rel, p, n), rel[n] = 0;
        }
    }
    /* the current cgroup, relative to the mount's root (a mount of a
     * subtree shows the path from the hierarchy's root in /proc/self/cgroup) */
    size_t lr = strlen(mroot);
    if (strcmp(mroot, "/") && !strncmp(rel, mroot, lr) && (rel[lr] == '/' || !rel[lr]))
        memmove(rel, rel + lr, strlen(rel + lr) + 1);
    char cands[2][520];
    int ncand = 0;
    if (rel[0] && strcmp(rel, "/"))
        snprintf(cands[ncand++], sizeof cands[0], "%s%s", mnt, rel);
    snprintf(cands[ncand++], sizeof cands[0], "%s", mnt);
    snprintf(reason, rcap, "no candidate cgroup");
    for (int c = 0; c < ncand; c++) {
        const char *par = cands[c];
        char path[600], list[256];
        snprintf(path, sizeof path, "%.500s/cgroup.controllers", par);
        if (proc_read(path, list, sizeof list) < 0) {
            snprintf(reason, rcap, "%s unreadable: %s", path, strerror(errno));
            continue;
        }
        if (!has_word(list, "memory")) {
            list[strcspn(list, "\n")] = 0;
            snprintf(reason, rcap, "the memory controller is not in %s (\"%s\")", path, list);
            continue;
        }
        snprintf(path, sizeof path, "%.500s/cgroup.subtree_control", par);
        if (proc_read(path, list, sizeof list) < 0 || !has_word(list, "memory")) {
            int e = write_str(path, "+memory");
            if (e) {
                snprintf(reason, rcap, "enabling +memory in %s: %s", path, strerror(e));
                continue;
            }
            *enabled = 1;
        }
        snprintf(cg_dir, sizeof cg_dir, "%.500s/sluice-exhaust-%d", par, (int)getpid());
        if (mkdir(cg_dir, 0755)) {
            snprintf(reason, rcap, "mkdir %s: %s", cg_dir, strerror(errno));
            goto next;
        }
        char val[32];
        snprintf(val, sizeof val, "%zu", CG_MAX);
        snprintf(path, sizeof path, "%s/memory.max", cg_dir);
        int e = write_str(path, val);
        if (!e && (proc_read(path, list, sizeof list) <= 0 || strtoull(list, NULL, 10) != CG_MAX))
            e = EIO;
        if (e) {
            snprintf(reason, rcap, "writing %s: %s", path, strerror(e));
            rmdir(cg_dir);
            goto next;
        }
        snprintf(path, sizeof path, "%s/memory.swap.max", cg_dir);
        write_str(path, "0"); /* no swap: past the limit the kernel has to kill (where the file exists) */
        snprintf(parent_out, pcap, "%.500s", par);
        return 1;
    next:
        if (*enabled) {
            snprintf(path, sizeof path, "%.500s/cgroup.subtree_control", par);
            write_str(path, "-memory");
            *enabled = 0;
        }
    }
    cg_dir[0] = 0;
    return 0;
}

/* In the cgroup: pass 1 fills 1 MiB blocks (every page touched) until
 * memory.current, or the bytes asked, reach 70% of memory.max; freed; pass 2 asks the same
 * bytes again in other sizes (4 KiB, 24 KiB, 256 KiB, 3 MiB, in turn),
 * freed; then sl_purge. */
static void c_child(void)
{
    size_t cur0 = cg_current(), target = CG_MAX / 10 * 7;
    printf("exhaust:   [C] in %s: memory.max %zu MiB, memory.current %.1f MiB at the start\n", cg_dir, CG_MAX / MiB,
           mib(cur0));
    size_t n = 0, bytes1 = 0;
    while (n < SLOTS && bytes1 < target && cg_current() < target) { /* bytes too: memory.current may read 0 */
        errno = 0;
        void *p = malloc(MiB);
        if (!p) {
            CHECK_EQ(errno, ENOMEM);
            break;
        }
        memset(p, 0x5a, MiB);
        held[n++] = p;
        bytes1 += MiB;
    }
    size_t peak1 = cg_current();
    CHECK(peak1 > 0); /* memory.current could be read */
    free_all(held, n);
    printf("exhaust:   [C] pass 1: %zu blocks of 1 MiB; memory.current %.1f MiB, %.1f MiB after free\n", n,
           mib(peak1), mib(cg_current()));
    static const size_t sizes[] = { 4 * KiB, 24 * KiB, 256 * KiB, 3 * MiB };
    size_t bytes2 = 0, peak2 = 0;
    n = 0;
    while (n < SLOTS && bytes2 < bytes1) {
        size_t size = sizes[n % 4];
        errno = 0;
        void *p = malloc(size);
        if (!p) {
            CHECK_EQ(errno, ENOMEM);
            break;
        }
        memset(p, 0x3c, size);
        held[n++] = p;
        bytes2 += size;
    }
    peak2 = cg_current();
    CHECK(bytes2 >= bytes1);
    free_all(held, n);
    size_t before = cg_current();
    sl_purge();
    sl_flush();
    size_t after = cg_current();
    printf("exhaust:   [C] pass 2: %zu blocks of 4 KiB to 3 MiB (%.1f MiB); memory.current %.1f MiB, %.1f MiB "
           "after free, %.1f MiB after sl_purge (VmRSS %.1f MiB)\n",
           n, mib(bytes2), mib(peak2), mib(before), mib(after), mib(status_bytes("VmRSS")));
    CHECK(after < before || after <= cur0 + CG_MAX / 20);
    CHECK(after <= cur0 + CG_MAX * 15 / 100);
}

static void case_c(void)
{
    char reason[1024], parent[600];
    int enabled;
    if (!cg_make(reason, sizeof reason, parent, sizeof parent, &enabled)) {
        printf("exhaust: cgroup memory.max not available here: %s\n", reason);
        return;
    }
    int *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fds[2];
    if (shared == MAP_FAILED || pipe(fds)) {
        printf("exhaust: cgroup memory.max not available here: no shared page or pipe\n");
        rmdir(cg_dir);
        return;
    }
    shared[0] = shared[1] = 0;
    shared[2] = -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c = 0;
        close(fds[1]);
        if (read(fds[0], &c, 1) != 1 || c != 'y')
            _exit(0);
        alarm(120);
        t_pass = t_fail = 0;
        c_child();
        shared[0] = t_pass;
        shared[1] = t_fail;
        shared[2] = 0;
        _exit(0);
    }
    close(fds[0]);
    char path[700], val[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", cg_dir);
    snprintf(val, sizeof val, "%d", (int)pid);
    int e = pid > 0 ? write_str(path, val) : errno;
    if (pid > 0 && write(fds[1], e ? "n" : "y", 1) != 1)
        e = EPIPE;
    close(fds[1]);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (e) {
        printf("exhaust: cgroup memory.max not available here: moving the child into %s: %s\n", cg_dir, strerror(e));
    } else {
        char ev[1024];
        snprintf(path, sizeof path, "%s/memory.events", cg_dir);
        long oom_kills = -1;
        if (proc_read(path, ev, sizeof ev) > 0) {
            char *k = strstr(ev, "oom_kill ");
            if (k)
                oom_kills = atol(k + 9);
        }
        int killed = WIFSIGNALED(status);
        printf("exhaust:   [C] the child %s %d; oom_kill in memory.events: %ld\n",
               killed ? "was killed by signal" : "exited with status", killed ? WTERMSIG(status) : WEXITSTATUS(status),
               oom_kills);
        CHECK(!killed && WEXITSTATUS(status) == 0 && shared[2] == 0);
        CHECK(oom_kills <= 0);
        t_pass += shared[0];
        t_fail += shared[1];
    }
    for (int i = 0; i < 50 && rmdir(cg_dir) && errno == EBUSY; i++)
        usleep(20000);
    if (enabled) {
        snprintf(path, sizeof path, "%s/cgroup.subtree_control", parent);
        write_str(path, "-memory");
    }
    munmap(shared, 4096);
}

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* no buffer to malloc, none duplicated by fork */
    if (argc > 1 && argv[1][0] == 'B')
        return case_b_child((size_t)atol(argv[1] + 1));
    unsigned long long t0 = t_now_ms();
    held = mmap(NULL, SLOTS * sizeof *held, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                0);
    int *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (held == MAP_FAILED || shared == MAP_FAILED) {
        perror("exhaust: mmap");
        return 1;
    }
    static const size_t limits[] = { 64, 128, 200, 512 };
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
        shared[0] = shared[1] = 0;
        shared[2] = -1;
        pid_t pid = fork();
        if (pid == 0) {
            alarm(120); /* a hang is a failure, not a stuck test */
            t_pass = t_fail = 0;
            case_a(limits[i]);
            shared[0] = t_pass;
            shared[1] = t_fail;
            shared[2] = 0;
            _exit(0);
        }
        int status = 0;
        if (pid > 0)
            waitpid(pid, &status, 0);
        int ok = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && shared[2] == 0;
        if (!ok)
            printf("exhaust:   [%zu MiB] the child %s %d\n", limits[i],
                   WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        CHECK(ok);
        t_pass += shared[0];
        t_fail += shared[1];
        printf("exhaust: A %zu MiB done at %.1f s: %d passed, %d failed\n", limits[i],
               (double)(t_now_ms() - t0) / 1000.0, shared[0], shared[1]);
    }
    case_b(argv[0], 64);
    case_b(argv[0], 512);
    printf("exhaust: B done at %.1f s\n", (double)(t_now_ms() - t0) / 1000.0);
    case_c();
    printf("exhaust: all done in %.1f s\n", (double)(t_now_ms() - t0) / 1000.0);
    return t_done("exhaust");
}
