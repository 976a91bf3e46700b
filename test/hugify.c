/* Hugepage-backed pageblocks (page/hugify.c, SLUICE_THP=collapse, the
 * default). CMakeLists.txt runs it with short decays. Checks:
 *   - dense pageblocks that stay dense are collapsed by the reclaimer
 *     (thp_collapse, thp_blocks), and the kernel then backs them with
 *     hugepages (block_thp_bytes);
 *   - the coverage gauges agree with the kernel: block_thp_bytes +
 *     huge_thp_bytes equals smaps_rollup's AnonHugePages (nothing else in
 *     this process has hugepages);
 *   - a purge does not split a dense hugepage: frees that leave the
 *     blocks dense, then decays and sl_purge, and the blocks are still
 *     hugepages; their free pages count in dirty_thp_bytes;
 *   - a block that turns sparse gives its hugepage up (thp_split) and is
 *     purged;
 *   - every byte of every object survives all of it, and fork.
 * With SLUICE_RECLAIMER=off (hugify_advise) the program's own slow paths
 * advise dense blocks MADV_HUGEPAGE instead, and so does the reclaimer
 * where MADV_COLLAPSE fails with EINVAL (hugify_nocollapse, injected: a
 * kernel older than 6.1); under injected madvise
 * failures (hugify_fault, the fault-injection build) every block stays a
 * plain one, counted in thp_failed, and nothing is lost.
 * With HUGIFY_SPIN=1 (hugify_busy) every CPU spins meanwhile: see
 * busy_cpus(); hugify_nostat does the same with every open refused.
 * With HUGIFY_UNPIN=1 (hugify_unpin) blocks come wholly free while a pass
 * has them pinned: see unpinned_free(). With HUGIFY_RUNS=1 (hugify_runs)
 * the objects are 64 KiB medium runs: the frees that leave the blocks
 * dense park runs in the page caches and the shared run cache, whose
 * decay must not split the hugepages either.
 * Skipped (with a line saying so) where the kernel has THP off. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

/* 4 KiB objects: about 12 pageblocks, dense; HUGIFY_RUNS=1: the same
 * bytes in 64 KiB medium runs, whose frees go to the page caches and the
 * shared run cache (a purge of parked runs must not split a hugepage) */
enum { N_MAX = 6000 };
static size_t OBJ = 4096;
static int N = N_MAX;
static unsigned char *objs[N_MAX];

static uint64_t rollup_kb(const char *key)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    unsigned long long kb = 0;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':')
            sscanf(line + k + 1, "%llu", &kb);
    if (f)
        fclose(f);
    return kb;
}

static bool thp_enabled(void)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = 0;
        fclose(f);
    }
    return f && !strstr(buf, "[never]");
}

static size_t intact(void)
{
    size_t bad = 0;
    for (int i = 0; i < N; i++)
        if (objs[i])
            for (size_t j = 0; j < OBJ; j += 512)
                bad += objs[i][j] != (unsigned char)(i * 13 + 1);
    return bad;
}

/* Every object intact, the heap consistent; free them all: the exit code. */
static int finish(void)
{
    CHECK_EQ(intact(), 0);
    CHECK(sl_check() == 0);
    for (int i = 0; i < N; i++)
        sl_free(objs[i]);
    return t_done("hugify");
}

static void *nothing(void *arg) { return arg; }

/* Wait (at most ms) for a stat to reach at least v. */
static uint64_t wait_stat(const char *name, uint64_t v, int ms)
{
    uint64_t got = 0;
    for (int t = 0; t < ms && (got = sl_stat(name)) < v; t += 50)
        usleep(50 * 1000);
    return got;
}

static void gauges_agree(const char *when)
{
    uint64_t ours = (sl_stat("block_thp_bytes") + sl_stat("huge_thp_bytes")) >> 10, kernel = rollup_kb("AnonHugePages");
    if (ours != kernel)
        fprintf(stderr, "%s: sluice says %llu kB in hugepages, smaps_rollup %llu kB\n", when,
                (unsigned long long)ours, (unsigned long long)kernel);
    CHECK_EQ(ours, kernel);
}

/* Keep the program's own slow paths running while waiting (without a
 * reclaimer they do the hugepage pass): a run too long for the page cache. */
static uint64_t wait_busy(const char *name, uint64_t v, int ms)
{
    uint64_t got = 0;
    for (int t = 0; t < ms && (got = sl_stat(name)) < v; t += 50) {
        sl_free(sl_malloc(512 << 10));
        usleep(50 * 1000);
    }
    return got;
}

/* ---- busy CPUs (HUGIFY_SPIN=1) --------------------------------------------- */

static _Atomic int spin_stop;

static void *spinner(void *arg)
{
    while (!spin_stop)
        ;
    return arg;
}

/* The aggregate line of /proc/stat: all jiffies, and idle + iowait. */
static bool cpu_times(uint64_t *total, uint64_t *idle)
{
    unsigned long long v[8] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    int got = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                         &v[6], &v[7])
                : 0;
    if (f)
        fclose(f);
    *total = *idle = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *idle = v[3] + v[4];
    return got == 8;
}

/* Every CPU kept busy by a spinner while the blocks age and after: the
 * reclaimer collapses one block a second, not a full pass (reclaimer.c
 * hugify_pass). With /proc/stat unreadable (HUGIFY_NOSTAT: every open
 * refused) it cannot tell, takes the CPUs for idle, and collapses them
 * all in one pass. Once the spinners stop, the rest come in one pass.
 * Skipped (with a line saying so) if the spinners leave a CPU idle (a
 * CPU quota). */
static int busy_cpus(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    pthread_t spin[64];
    int nspin = ncpu < 64 ? (int)ncpu : 64;
    uint64_t t0, i0, t1, i1;
    bool stat_ok = cpu_times(&t0, &i0);
    for (int i = 0; i < nspin; i++)
        pthread_create(&spin[i], NULL, spinner, NULL);
    for (int i = 0; i < N; i++) {
        objs[i] = sl_malloc(OBJ);
        memset(objs[i], i * 13 + 1, OBJ);
    }
    /* dense for 1 s, then 3.5 s of passes; dirty pages all along, so that
     * the reclaimer does not sleep a second between them (a pass a tick) */
    for (int ms = 0; ms < 4500; ms += 20) {
        sl_free(sl_malloc(512 << 10));
        usleep(20 * 1000);
    }
    uint64_t busy = sl_stat("thp_collapse");
    stat_ok = cpu_times(&t1, &i1) && stat_ok;
    spin_stop = 1;
    for (int i = 0; i < nspin; i++)
        pthread_join(spin[i], NULL);
    double idle = t1 > t0 ? (double)(i1 - i0) / (double)(t1 - t0) * (double)ncpu : 0; /* idle CPUs */
    uint64_t all = wait_stat("thp_collapse", busy + 1, 3000);
    for (int t = 0; t < 8; t++) { /* then until no more come (an idle reclaimer sleeps 1 s) */
        usleep(1500 * 1000);
        if (sl_stat("thp_collapse") == all)
            break;
        all = sl_stat("thp_collapse");
    }
    printf("hugify (%d spinners, %.2f CPUs idle meanwhile): %llu blocks collapsed while busy, %llu in all\n", nspin,
           idle, (unsigned long long)busy, (unsigned long long)all);
    if (!stat_ok || idle > 0.5) {
        printf("hugify: the spinners did not keep the CPUs busy here: the rate is not checked\n");
    } else {
#ifdef HUGIFY_NOSTAT
        CHECK(busy >= 8); /* unknown load: a full pass */
#else
        CHECK(busy >= 1); /* a long-lived dense block still gets its hugepage */
        CHECK(busy <= 6); /* one a second, not a pass of 32 */
        CHECK(all >= 8);  /* the rest once the CPUs are idle */
#endif
    }
    CHECK(sl_stat("thp_blocks") == all);
    return finish();
}

/* ---- blocks freed while pinned (HUGIFY_UNPIN=1) ------------------------------- */

enum { UNPIN_N = 16000 }; /* 4 KiB each: about 32 blocks, a whole pass */
static unsigned char *many[UNPIN_N];

/* A pass pins every block it picked, then collapses them one by one. Free
 * every object as soon as the first collapse is counted: the blocks still
 * waiting come wholly free while pinned, which no purge may unmap. Once
 * the pass is done with each, it must decay like any free block: the
 * dirty decay is 1 s (CMakeLists.txt), and within a few seconds of the
 * pass's end every block beyond the kept ones is unmapped. If the pass
 * ended before the frees (nothing left pinned) it says so. A fork then,
 * mid-pass: the child's own hugepage passes must still run. */
static int unpinned_free(void)
{
    for (int i = 0; i < UNPIN_N; i++) {
        many[i] = sl_malloc(OBJ);
        memset(many[i], i * 7 + 1, OBJ);
    }
    sl_free(sl_malloc(512 << 10)); /* dirty pages in the page heap: the reclaimer starts */
    uint64_t blocks = sl_stat("blocks"), at = 0;
    for (int us = 0; us < 8000000 && !(at = sl_stat("thp_collapse") + sl_stat("thp_failed")); us += 100)
        usleep(100);
    size_t bad = 0;
    for (int i = 0; i < UNPIN_N; i++) {
        for (size_t j = 0; j < OBJ; j += 1024)
            bad += many[i][j] != (unsigned char)(i * 7 + 1);
        sl_free(many[i]);
    }
    uint64_t after_frees = sl_stat("thp_collapse") + sl_stat("thp_failed"), done = after_frees;
    /* fork in the middle of the pass: the child has no pass running, so
     * its blocks are not pinned for ever, and its own passes still run
     * (they would be shut out if the pass's flag were inherited) */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        uint64_t before = sl_stat("thp_collapse") + sl_stat("thp_advise") + sl_stat("thp_failed"), got = before;
        for (int i = 0; i < N; i++) {
            objs[i] = sl_malloc(OBJ);
            memset(objs[i], i * 13 + 1, OBJ);
        }
        for (int ms = 0; ms < 8000 && got == before; ms += 50) { /* its own slow paths, or a new reclaimer */
            sl_free(sl_malloc(512 << 10));
            usleep(50 * 1000);
            got = sl_stat("thp_collapse") + sl_stat("thp_advise") + sl_stat("thp_failed");
        }
        _exit(got > before && intact() == 0 && sl_check() == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int t = 0; t < 10; t++) { /* until the pass is over */
        usleep(300 * 1000);
        uint64_t now = sl_stat("thp_collapse") + sl_stat("thp_failed");
        if (now == done)
            break;
        done = now;
    }
    uint64_t free_blocks = sl_stat("blocks_free");
    for (int ms = 0; ms < 8000 && free_blocks > 4; ms += 100) { /* the decay */
        usleep(100 * 1000);
        free_blocks = sl_stat("blocks_free");
    }
    printf("hugify: %llu blocks; the frees began after %llu collapses and ended after %llu (the fork came then), of "
           "%llu; %llu blocks wholly free left mapped after the decay\n",
           (unsigned long long)blocks, (unsigned long long)at, (unsigned long long)after_frees,
           (unsigned long long)done, (unsigned long long)free_blocks);
    CHECK(at > 0);
    CHECK_EQ(bad, 0);
    if (after_frees >= done)
        printf("hugify: the pass ended before the frees did: nothing was freed while pinned\n");
    else
        CHECK(free_blocks <= 4); /* the kept ones (FREE_BLOCKS_MIN) */
    sl_purge(); /* unmaps every free block no pass has pinned: none may stay pinned */
    CHECK_EQ(sl_stat("blocks_free"), 0);
    CHECK(sl_check() == 0);
    return t_done("hugify");
}

int main(void)
{
    const char *r = getenv("SLUICE_RECLAIMER");
    bool in_thread = r && !strcmp(r, "off"); /* no reclaimer: MADV_HUGEPAGE by a slow path */
#ifdef HUGIFY_FAULT
    bool refused = true; /* SLUICE_FAULT=madvise:every=1: every madvise fails */
#else
    bool refused = false;
#endif
#ifdef HUGIFY_NOCOLLAPSE
    in_thread = true; /* SLUICE_FAULT=collapse:every=1 (EINVAL): the reclaimer advises instead */
#endif
    if (!thp_enabled()) {
        printf("hugify: transparent hugepages are off here: skipped\n");
        return 0;
    }
    pthread_t t; /* the reclaimer starts once the program has a thread */
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
    const char *spin = getenv("HUGIFY_SPIN");
    if (spin && *spin == '1')
        return busy_cpus();
    const char *unpin = getenv("HUGIFY_UNPIN");
    if (unpin && *unpin == '1')
        return unpinned_free();
    const char *runs = getenv("HUGIFY_RUNS");
    if (runs && *runs == '1') {
        OBJ = 65536;
        N = N_MAX * 4096 / 65536;
    }
    for (int i = 0; i < N; i++) {
        objs[i] = sl_malloc(OBJ);
        memset(objs[i], i * 13 + 1, OBJ);
    }
    sl_free(sl_malloc(512 << 10)); /* dirty pages in the page heap: the reclaimer starts */
    if (refused || in_thread) {
        const char *stat = refused ? "thp_failed" : "thp_advise";
        uint64_t got = wait_busy(stat, 4, 6000);
        printf("hugify (%s): %llu %s\n", refused ? "madvise refused" : "no reclaimer", (unsigned long long)got, stat);
        CHECK(got >= 4);
        CHECK_EQ(sl_stat("thp_collapse"), 0);
        if (refused) { /* a refused block is not counted as a hugepage, and is purged as any */
            /* a pass may be between its pick and the refusal (the block
             * counts while it is being advised): wait for one that is not */
            for (int t = 0; t < 3000 && (sl_stat("thp_blocks") || sl_stat("block_thp_bytes")); t += 10)
                usleep(10 * 1000);
            CHECK_EQ(sl_stat("thp_blocks"), 0);
            CHECK_EQ(sl_stat("block_thp_bytes"), 0);
            /* a refused block is tried again only once it has been dense
             * another HUGIFY_AGE_MS (1 s), not on every pass: in 1.5 s,
             * at most twice more each */
            uint64_t failed = sl_stat("thp_failed");
            usleep(1500 * 1000);
            uint64_t again = sl_stat("thp_failed") - failed, blocks = sl_stat("blocks");
            printf("hugify (madvise refused): %llu more refusals in 1.5 s, %llu blocks\n", (unsigned long long)again,
                   (unsigned long long)blocks);
            CHECK(again <= 2 * blocks);
        } else {
            CHECK(sl_stat("thp_blocks") >= 4);
            for (int i = 0; i < N; i += 16) { /* still dense: advised blocks are not purged */
                sl_free(objs[i]);
                objs[i] = NULL;
            }
            uint64_t advised = sl_stat("thp_blocks");
            usleep(500 * 1000);
            sl_purge();
            CHECK_EQ(sl_stat("thp_split"), 0);
            CHECK(sl_stat("thp_blocks") >= advised); /* none given up */
        }
        gauges_agree("after the advice");
        return finish();
    }
    /* dense for HUGIFY_AGE_MS (1 s), then the reclaimer's next pass */
    uint64_t collapsed = wait_stat("thp_collapse", 4, 5000);
    /* then until no more come (the reclaimer collapses 8 per pass) */
    for (int t = 0; t < 10; t++) {
        usleep(1500 * 1000);
        uint64_t now = sl_stat("thp_collapse");
        if (now == collapsed && sl_stat("thp_blocks") == now)
            break;
        collapsed = now;
    }
    printf("hugify: %llu blocks collapsed, %llu thp blocks, %llu MiB of pageblocks in hugepages\n",
           (unsigned long long)collapsed, (unsigned long long)sl_stat("thp_blocks"),
           (unsigned long long)(sl_stat("block_thp_bytes") >> 20));
    CHECK(collapsed >= 4);
    CHECK(sl_stat("thp_blocks") >= 4);
    CHECK(sl_stat("block_thp_bytes") >= 4ull << 21);
    gauges_agree("after the collapse");
    CHECK_EQ(intact(), 0);

    /* frees that leave the blocks dense: every 16th object */
    uint64_t thp_before = sl_stat("block_thp_bytes");
    for (int i = 0; i < N; i += 16) {
        sl_free(objs[i]);
        objs[i] = NULL;
    }
    usleep(800 * 1000); /* decays of 100 and 300 ms: purging would have run */
    sl_purge();
    CHECK(sl_stat("dirty_thp_bytes") > 0); /* the freed pages stay, counted */
    CHECK(sl_stat("block_thp_bytes") >= thp_before); /* none split */
    CHECK_EQ(sl_stat("thp_split"), 0);
    gauges_agree("after the purge of dense blocks");
    CHECK_EQ(intact(), 0);

    pid_t pid = fork();
    if (pid == 0) { /* the child's blocks are its own copies: same data */
        _exit(intact() == 0 && sl_check() == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* sparse: keep one object in 8 */
    for (int i = 0; i < N; i++)
        if (i % 8 && objs[i]) {
            sl_free(objs[i]);
            objs[i] = NULL;
        }
    usleep(800 * 1000);
    sl_purge();
    CHECK(sl_stat("thp_split") > 0);
    CHECK(sl_stat("block_thp_bytes") < thp_before);
    gauges_agree("after the sparse blocks were purged");
    return finish();
}
