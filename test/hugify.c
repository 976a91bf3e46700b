/* Hugepage-backed pageblocks (page/hugify.c, SLUICE_THP=collapse, the
 * default). CMakeLists.txt runs it with short decays. Checks:
 *   - dense pageblocks that stay dense are collapsed by the reclaimer
 *     (thp_collapse, thp_blocks), and the kernel then backs them with
 *     hugepages (block_thp_bytes);
 *   - the coverage gauges agree with the kernel: block_thp_bytes +
 *     huge_thp_bytes equals smaps_rollup's AnonHugePages (nothing else in
 *     this process has hugepages);
 *   - the decay does not split a dense hugepage: frees that leave the
 *     blocks dense, then the decay, and the blocks are still hugepages;
 *     their free pages count in dirty_thp_bytes;
 *   - sl_purge does (hugify_advise, where no pass runs meanwhile): it
 *     promises every free page clean, a dense hugepage's too;
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
 * With HUGIFY_QUIET=1 (hugify_quiet) other processes spin every CPU while
 * the program itself idles: see quiet_program().
 * With HUGIFY_UNTOUCHED=1 (hugify_untouched) the blocks are dense but
 * barely touched: see untouched(). With HUGIFY_UNPIN=1 (hugify_unpin) blocks come wholly free while a pass
 * has them pinned: see unpinned_free(). With HUGIFY_RUNS=1 (hugify_runs)
 * the objects are 64 KiB medium runs: the frees that leave the blocks
 * dense park runs in the page caches and the shared run cache, whose
 * decay must not split the hugepages either.
 * Skipped (with a line saying so) where the kernel has THP off.
 * Every wait is for a condition, with a deadline (t.h): collapse
 * selection and the decay's timing are unit-tested in unit_decay, so this
 * shows the mechanism carrying them out. One fixed wait is left, in
 * decay_had_its_chance (used twice): the injected dirty decay (100 ms),
 * after which the reclaimer's decay would purge what a dense block freed. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
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

enum { LONG_MS = 30000 }; /* deadline of a wait: generous (a loaded machine, TSan) */

/* While waiting: the program's own slow paths keep running (without a
 * reclaimer they do the hugepage pass), and there are dirty pages in the
 * page heap (the reclaimer does not idle a second between passes): a run
 * too long for the page cache, freed, at most every 20 ms. True, for use
 * in a waited condition. */
static bool churn(void)
{
    static unsigned long long last;
    unsigned long long now = t_now_ms();
    if (now - last >= 20) {
        last = now;
        sl_free(sl_malloc(512 << 10));
    }
    return true;
}

/* sl_purge, and then no free page dirty or lazy, no hugepage block left.
 * For use in a waited condition. */
static bool purged_clean(void)
{
    sl_purge();
    return sl_stat("dirty_bytes") == 0 && sl_stat("lazy_bytes") == 0 && sl_stat("thp_blocks") == 0;
}

static uint64_t ours_kb(void) { return (sl_stat("block_thp_bytes") + sl_stat("huge_thp_bytes")) >> 10; }

/* Both sides of the coverage gauges, in a reading no collapse or split
 * moved: sluice's own the same before and after the kernel's (a pass may
 * be running, and khugepaged). */
static bool gauges_read(uint64_t *ours, uint64_t *kernel)
{
    uint64_t before = ours_kb();
    *kernel = proc_smaps("AnonHugePages") >> 10;
    *ours = ours_kb();
    return *ours == before;
}

/* Every block sluice counts as a hugepage block (thp_blocks), read at a
 * moment no pass is between its pick and the kernel's answer (a picked
 * block counts first): the same counts before and after the smaps
 * reading, every counted block collapsed (none split yet). *bytes: the
 * kernel's hugepage bytes in sluice's memory then. */
static bool thp_reading(uint64_t *blocks, uint64_t *bytes)
{
    uint64_t c = sl_stat("thp_collapse"), b = sl_stat("thp_blocks");
    *bytes = ours_kb() << 10;
    *blocks = b;
    return b == c && sl_stat("thp_collapse") == c && sl_stat("thp_blocks") == b;
}

/* Each of them still a whole hugepage in the kernel's view: none split
 * behind sluice's back (a purge of part of one splits it). A total
 * against an earlier one would not show it: on a busy machine the
 * reclaimer goes on collapsing a block a second meanwhile. */
static void thp_blocks_whole(const char *when)
{
    uint64_t blocks = 0, bytes = 0;
    CHECK(T_WAIT(thp_reading(&blocks, &bytes), LONG_MS));
    if (bytes < blocks << 21)
        fprintf(stderr, "%s: %llu hugepage blocks, %llu MiB in hugepages\n", when, (unsigned long long)blocks,
                (unsigned long long)(bytes >> 20));
    CHECK(bytes >= blocks << 21);
}

static void gauges_agree(const char *when)
{
    uint64_t ours = 0, kernel = 0;
    CHECK(T_WAIT(gauges_read(&ours, &kernel), LONG_MS));
    if (ours != kernel)
        fprintf(stderr, "%s: sluice says %llu kB in hugepages, smaps_rollup %llu kB\n", when,
                (unsigned long long)ours, (unsigned long long)kernel);
    CHECK_EQ(ours, kernel);
}

/* The reclaimer's decay has had its chance at pages freed at freed_ms:
 * the dirty decay (SLUICE_DIRTY_DECAY_MS, 100 ms here, injected by
 * CMakeLists.txt) has passed since, and then the reclaimer has begun and
 * ended a pass (its decay, then its hugepage pass): the second pass
 * counted after that began after it. Waiting out the decay's age is a
 * fixed wait, the only one left in this test: nothing shows the decay has
 * looked at the pages and left them (that is what the caller checks).
 * With no reclaimer (hugify_advise) only this thread's slow paths (none
 * meanwhile) and sl_purge purge: nothing to wait for. */
static void decay_had_its_chance(unsigned long long freed_ms, bool reclaimer)
{
    if (!reclaimer)
        return;
    const char *e = getenv("SLUICE_DIRTY_DECAY_MS");
    unsigned long long due = freed_ms + (e ? strtoull(e, NULL, 10) : 1000) + 20; /* + the coarse clock's lag */
    unsigned long long now = t_now_ms();
    if (due > now)
        t_sleep_ms((unsigned)(due - now));
    uint64_t runs = sl_stat("reclaimer_runs");
    CHECK(T_WAIT(sl_stat("reclaimer_runs") >= runs + 2, LONG_MS));
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
 * hugify_pass): until the 4th has come, never more than one for each
 * second since the blocks were made (the first needs them dense for 1 s).
 * With /proc/stat unreadable (HUGIFY_NOSTAT: every open refused) it
 * cannot tell, takes the CPUs for idle, and collapses 8 and more in one
 * pass while they spin. Once the spinners stop, the rest come (8 in all).
 * The rate is not checked (with a line saying so) if the spinners leave a
 * CPU idle (a CPU quota), or if they hardly ran (other processes had the
 * CPUs: the program was quiet, and then a full pass is the policy). */
/* CPU seconds this process has used, all its threads. */
static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int busy_cpus(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    pthread_t spin[64];
    int nspin = ncpu < 64 ? (int)ncpu : 64;
    uint64_t t0, i0, t1, i1;
    bool stat_ok = cpu_times(&t0, &i0);
    double cpu0 = process_cpu_s();
    for (int i = 0; i < nspin; i++)
        pthread_create(&spin[i], NULL, spinner, NULL);
    unsigned long long made_ms = t_now_ms(); /* no block is dense before this */
    for (int i = 0; i < N; i++) {
        objs[i] = sl_malloc(OBJ);
        memset(objs[i], i * 13 + 1, OBJ);
    }
#ifdef HUGIFY_NOSTAT
    uint64_t want = 8; /* unknown load: a full pass */
#else
    uint64_t want = 4; /* one a second: the 4th about 4 s in */
#endif
    /* dense for 1 s, then passes; dirty pages all along (churn), so that
     * the reclaimer does not idle a second between them (a pass a tick) */
    bool came = T_WAIT(churn() && sl_stat("thp_collapse") >= want, LONG_MS);
    /* and picked: a pass marks every block it picks at once (thp_blocks),
     * and collapses them one by one (slowly, on busy CPUs) */
    uint64_t busy = sl_stat("thp_collapse"), picked = sl_stat("thp_blocks");
    unsigned long long took = t_now_ms() - made_ms;
    stat_ok = cpu_times(&t1, &i1) && stat_ok;
    double ran = (process_cpu_s() - cpu0) / ((double)took / 1000 + 1e-3); /* CPUs this process had */
    spin_stop = 1;
    for (int i = 0; i < nspin; i++)
        pthread_join(spin[i], NULL);
    double idle = t1 > t0 ? (double)(i1 - i0) / (double)(t1 - t0) * (double)ncpu : 0; /* idle CPUs */
    /* the rest once the CPUs are idle: at least 8 in all, at a moment
     * between passes (a block being collapsed counts in thp_blocks first) */
    uint64_t all = 0;
    bool rest = T_WAIT(churn() && (all = sl_stat("thp_collapse")) >= 8 && sl_stat("thp_blocks") == all, LONG_MS);
    printf("hugify (%d spinners, %.2f CPUs idle meanwhile, %.2f CPUs run by this process): %llu blocks collapsed "
           "(%llu picked) while busy, in %llu ms; %llu in all\n",
           nspin, idle, ran, (unsigned long long)busy, (unsigned long long)picked, took, (unsigned long long)all);
    CHECK(came); /* a long-lived dense block still gets its hugepage (NOSTAT: 8 in a pass) */
    if (!stat_ok || idle > 0.5) {
        printf("hugify: the spinners did not keep the CPUs busy here: the rate is not checked\n");
    } else if (ran < (double)nspin / 2) {
        /* other processes took the CPUs (a loaded machine, this test
         * niced): the program was quiet, for which a full pass is right */
        printf("hugify: the spinners hardly ran (the machine's other work had the CPUs): the rate is not checked\n");
    } else {
#ifndef HUGIFY_NOSTAT
        /* one a second (the first once dense for 1 s), not a pass of 32 */
        CHECK(busy <= 1 + took / 1000);
        CHECK(picked <= 1 + took / 1000);
#endif
    }
    CHECK(rest); /* the rest once the CPUs are idle, each one a hugepage block */
    return finish();
}

/* ---- a quiet program on busy CPUs (HUGIFY_QUIET=1) ------------------------- */

/* Every CPU kept busy by spinner processes (not this one's threads) while
 * the program idles: its threads use no CPU, so the reclaimer takes it
 * for quiet (decay.h: hugify_quiet) and collapses a full pass, not one
 * block a second: 8 and more in all sooner than 8 s after the blocks were
 * made (the first pass once they have been dense for 1 s). The program
 * polls every 100 ms, so that it stays quiet. The spinners die with the
 * test (PR_SET_PDEATHSIG) and after LONG_MS in any case. */
static int quiet_program(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    pid_t spin[64], parent = getpid();
    int nspin = ncpu < 64 ? (int)ncpu : 64;
    uint64_t t0, i0, t1, i1;
    bool stat_ok = cpu_times(&t0, &i0);
    for (int i = 0; i < nspin; i++)
        if ((spin[i] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            unsigned long long until = t_now_ms() + LONG_MS;
            while (getppid() == parent && t_now_ms() < until)
                ;
            _exit(0);
        }
    unsigned long long made_ms = t_now_ms(); /* no block is dense before this */
    for (int i = 0; i < N; i++) {
        objs[i] = sl_malloc(OBJ);
        memset(objs[i], i * 13 + 1, OBJ);
    }
    sl_free(sl_malloc(512 << 10)); /* dirty pages in the page heap: the reclaimer starts */
    bool came = T_WAIT_EVERY(sl_stat("thp_collapse") >= 8, LONG_MS, 100000);
    unsigned long long took = t_now_ms() - made_ms;
    uint64_t collapsed = sl_stat("thp_collapse");
    stat_ok = cpu_times(&t1, &i1) && stat_ok;
    for (int i = 0; i < nspin; i++)
        if (spin[i] > 0) {
            kill(spin[i], SIGKILL);
            waitpid(spin[i], NULL, 0);
        }
    double idle = t1 > t0 ? (double)(i1 - i0) / (double)(t1 - t0) * (double)ncpu : 0;
    printf("hugify (%d spinner processes, %.2f CPUs idle meanwhile, the program quiet): %llu blocks collapsed in "
           "%llu ms\n",
           nspin, idle, (unsigned long long)collapsed, took);
    CHECK(came);
    if (!stat_ok || idle > 0.5)
        printf("hugify: the spinners did not keep the CPUs busy here: a full pass is no news\n");
    else
        CHECK(collapsed > 1 + took / 1000); /* faster than one a second: a full pass */
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
 * pass's end every block beyond the kept ones is unmapped; and sl_purge
 * then unmaps them all (none stays pinned once the pass is over). If the
 * pass ended before the frees (nothing left pinned) it says so. A fork
 * then, mid-pass: the child's own hugepage passes must still run. */
static int unpinned_free(void)
{
    for (int i = 0; i < UNPIN_N; i++) {
        many[i] = sl_malloc(OBJ);
        memset(many[i], i * 7 + 1, OBJ);
    }
    sl_free(sl_malloc(512 << 10)); /* dirty pages in the page heap: the reclaimer starts */
    uint64_t blocks = sl_stat("blocks"), at = 0;
    /* every 100 us: the frees are to come while the pass has blocks to go */
    T_WAIT_EVERY((at = sl_stat("thp_collapse") + sl_stat("thp_failed")) > 0, LONG_MS, 100);
    size_t bad = 0;
    for (int i = 0; i < UNPIN_N; i++) {
        for (size_t j = 0; j < OBJ; j += 1024)
            bad += many[i][j] != (unsigned char)(i * 7 + 1);
        sl_free(many[i]);
    }
    uint64_t after_frees = sl_stat("thp_collapse") + sl_stat("thp_failed");
    /* fork in the middle of the pass: the child has no pass running, so
     * its blocks are not pinned for ever, and its own passes still run
     * (they would be shut out if the pass's flag were inherited) */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(2 * LONG_MS / 1000);
        uint64_t before = sl_stat("thp_collapse") + sl_stat("thp_advise") + sl_stat("thp_failed"), got = before;
        for (int i = 0; i < N; i++) {
            objs[i] = sl_malloc(OBJ);
            memset(objs[i], i * 13 + 1, OBJ);
        }
        /* its own slow paths, or a new reclaimer */
        T_WAIT(churn() && (got = sl_stat("thp_collapse") + sl_stat("thp_advise") + sl_stat("thp_failed")) > before,
               LONG_MS);
        _exit(got > before && intact() == 0 && sl_check() == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the decay, once the pass is done with the blocks (a pinned block
     * stays mapped, and counts as wholly free) */
    uint64_t free_blocks = 0;
    T_WAIT((free_blocks = sl_stat("blocks_free")) <= 4, LONG_MS);
    /* sl_purge unmaps every free block no pass has pinned: once the pass
     * is over none is left (none may stay pinned) */
    bool emptied = T_WAIT((sl_purge(), sl_stat("blocks_free") == 0), LONG_MS);
    /* the pass is over now (its blocks are unpinned, each counted first) */
    uint64_t done = sl_stat("thp_collapse") + sl_stat("thp_failed");
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
    CHECK(emptied);
    CHECK_EQ(sl_stat("blocks_free"), 0);
    CHECK(sl_check() == 0);
    return t_done("hugify");
}

/* ---- dense blocks never touched (HUGIFY_UNTOUCHED=1) --------------------- */

/* 64 KiB medium runs, about 12 blocks: dense, but only the first page of
 * each run written, a sixteenth of the block resident. A collapse would
 * make all of it resident (16 times the RSS): every pass must leave them
 * plain (thp_untouched, hugify_resident_enough), and they stay plain and
 * small. Without that check they are collapsed (thp_collapse), or advised
 * for khugepaged. */
static int untouched(void)
{
    OBJ = 65536;
    N = N_MAX * 4096 / 65536;
    for (int i = 0; i < N; i++) {
        objs[i] = sl_malloc(OBJ);
        objs[i][0] = 1;
    }
    sl_free(sl_malloc(512 << 10)); /* dirty pages in the page heap: the reclaimer starts */
    uint64_t left = 0;
    T_WAIT(churn() && (left = sl_stat("thp_untouched")) >= 4, LONG_MS);
    uint64_t rss = sl_stat("resident_bytes"), in_use = (uint64_t)N * OBJ;
    printf("hugify (untouched runs): %llu blocks left plain, %llu collapsed or advised; %llu KiB resident of %llu "
           "KiB in use\n",
           (unsigned long long)left, (unsigned long long)(sl_stat("thp_collapse") + sl_stat("thp_advise")),
           (unsigned long long)(rss >> 10), (unsigned long long)(in_use >> 10));
    CHECK(left >= 4);
    CHECK_EQ(sl_stat("thp_collapse") + sl_stat("thp_advise"), 0);
    /* a picked block counts in thp_blocks until its look at the pages */
    CHECK(T_WAIT(sl_stat("thp_blocks") == 0 && sl_stat("block_thp_bytes") == 0, LONG_MS));
    CHECK(rss < in_use / 4); /* the headers, a page a run, the churn's run */
    size_t bad = 0;
    for (int i = 0; i < N; i++) {
        bad += objs[i][0] != 1;
        sl_free(objs[i]);
    }
    CHECK_EQ(bad, 0);
    CHECK(sl_check() == 0);
    return t_done("hugify");
}

int main(void)
{
    const char *r = getenv("SLUICE_RECLAIMER");
    bool in_thread = r && !strcmp(r, "off"); /* no reclaimer: MADV_HUGEPAGE by a slow path */
    bool reclaimer = !in_thread;
#ifdef HUGIFY_FAULT
    bool refused = true; /* SLUICE_FAULT=madvise:every=1: every madvise fails */
#else
    bool refused = false;
#endif
#ifdef HUGIFY_NOCOLLAPSE
    in_thread = true; /* SLUICE_FAULT=collapse:every=1 (EINVAL): the reclaimer advises instead */
#endif
    if (!proc_thp_enabled()) {
        printf("hugify: transparent hugepages are off here: skipped\n");
        return 0;
    }
    pthread_t t; /* the reclaimer starts once the program has a thread */
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
    const char *spin = getenv("HUGIFY_SPIN");
    if (spin && *spin == '1')
        return busy_cpus();
    const char *quiet = getenv("HUGIFY_QUIET");
    if (quiet && *quiet == '1')
        return quiet_program();
    const char *unpin = getenv("HUGIFY_UNPIN");
    if (unpin && *unpin == '1')
        return unpinned_free();
    const char *untouch = getenv("HUGIFY_UNTOUCHED");
    if (untouch && *untouch == '1')
        return untouched();
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
        uint64_t got = 0;
        T_WAIT(churn() && (got = sl_stat(stat)) >= 4, LONG_MS);
        printf("hugify (%s): %llu %s\n", refused ? "madvise refused" : "no reclaimer", (unsigned long long)got, stat);
        CHECK(got >= 4);
        CHECK_EQ(sl_stat("thp_collapse"), 0);
        if (refused) { /* a refused block is not counted as a hugepage, and is purged as any */
            /* a pass may be between its pick and the refusal (the block
             * counts while it is being advised): at a moment between passes */
            CHECK(T_WAIT(sl_stat("thp_blocks") == 0 && sl_stat("block_thp_bytes") == 0, LONG_MS));
            /* a refused block is tried again only once it has been dense
             * another DECAY_HUGIFY_AGE_MS (1 s), not on every pass: over
             * the reclaimer's next 8 passes (a tick apart: every madvise
             * is refused, so dirty pages stay and it never idles), at
             * most once each for every second they took, and one more
             * (the clock the passes read is coarse) */
            uint64_t failed = sl_stat("thp_failed"), runs = sl_stat("reclaimer_runs");
            unsigned long long from = t_now_ms();
            CHECK(T_WAIT(sl_stat("reclaimer_runs") >= runs + 8, LONG_MS));
            uint64_t again = sl_stat("thp_failed") - failed, blocks = sl_stat("blocks");
            unsigned long long took = t_now_ms() - from;
            printf("hugify (madvise refused): %llu more refusals in 8 passes (%llu ms), %llu blocks\n",
                   (unsigned long long)again, took, (unsigned long long)blocks);
            CHECK(again <= blocks * (2 + took / 1000));
        } else {
            CHECK(sl_stat("thp_blocks") >= 4);
            /* still dense: advised blocks are not purged. 48 objects in a
             * row of every 512 (under a tenth): whole slabs come empty, so
             * that the blocks have free pages the program wrote */
            for (int i = 0; i < N; i++)
                if (i % 512 < 48 && objs[i]) {
                    sl_free(objs[i]);
                    objs[i] = NULL;
                }
            uint64_t advised = sl_stat("thp_blocks");
            if (reclaimer) { /* hugify_nocollapse: the reclaimer advises */
                decay_had_its_chance(t_now_ms(), reclaimer);
            } else { /* the slow paths' decay has its chance: they run for the
                      * dirty decay's age and more (a wait on the clock, as in
                      * decay_had_its_chance: nothing shows the decay has looked
                      * at the pages and left them) */
                const char *e = getenv("SLUICE_DIRTY_DECAY_MS");
                unsigned long long due = t_now_ms() + (e ? strtoull(e, NULL, 10) : 1000) + 50;
                T_WAIT(churn() && t_now_ms() >= due, LONG_MS);
            }
            CHECK_EQ(sl_stat("thp_split"), 0);
            CHECK(sl_stat("thp_blocks") >= advised); /* none given up */
            CHECK(sl_stat("dirty_thp_bytes") > 0);    /* the freed pages stay, counted */
            /* sl_purge: every free page clean, the hugepages' too. With a
             * reclaimer, a block its pass is advising right then is pinned
             * and keeps its flag: purged again until no pass was (a split
             * block is not picked again for a second) */
            CHECK(T_WAIT(purged_clean(), LONG_MS));
            printf("hugify (%s): sl_purge split %llu hugepage blocks (%llu were advised); %llu bytes dirty, %llu lazy\n",
                   reclaimer ? "the reclaimer advises" : "no reclaimer", (unsigned long long)sl_stat("thp_split"),
                   (unsigned long long)advised, (unsigned long long)sl_stat("dirty_bytes"),
                   (unsigned long long)sl_stat("lazy_bytes"));
            CHECK(sl_stat("thp_split") >= advised);
        }
        gauges_agree("after the advice");
        return finish();
    }
    /* dense for DECAY_HUGIFY_AGE_MS (1 s), then the reclaimer's next pass
     * (all of them in it; on a busy machine one a second: the rest come
     * while the test goes on, which changes none of its checks) */
    CHECK(T_WAIT(sl_stat("thp_collapse") >= 4, LONG_MS));
    uint64_t collapsed = sl_stat("thp_collapse");
    printf("hugify: %llu blocks collapsed, %llu thp blocks, %llu MiB of pageblocks in hugepages\n",
           (unsigned long long)collapsed, (unsigned long long)sl_stat("thp_blocks"),
           (unsigned long long)(sl_stat("block_thp_bytes") >> 20));
    CHECK(collapsed >= 4);
    CHECK(sl_stat("thp_blocks") >= 4);
    CHECK(sl_stat("block_thp_bytes") >= 4ull << 21);
    thp_blocks_whole("after the collapse");
    gauges_agree("after the collapse");
    CHECK_EQ(intact(), 0);

    /* frees that leave the blocks dense: every 16th object */
    uint64_t thp_before = sl_stat("block_thp_bytes");
    for (int i = 0; i < N; i += 16) {
        sl_free(objs[i]);
        objs[i] = NULL;
    }
    decay_had_its_chance(t_now_ms(), reclaimer); /* the decay would have purged them by now */
    CHECK(sl_stat("dirty_thp_bytes") > 0); /* the freed pages stay, counted */
    CHECK(sl_stat("block_thp_bytes") >= thp_before); /* none split */
    CHECK_EQ(sl_stat("thp_split"), 0);
    thp_blocks_whole("after the decay of dense blocks");
    gauges_agree("after the decay of dense blocks");
    CHECK_EQ(intact(), 0);

    pid_t pid = fork();
    if (pid == 0) { /* the child's blocks are its own copies: same data */
        _exit(intact() == 0 && sl_check() == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* sparse: keep one object in 8; sl_purge purges them (whatever the
     * decay did first). At a moment between passes: a block a pass is
     * collapsing (picked: counted in thp_blocks, not yet in thp_collapse)
     * is pinned, no purge splits it, and it turns a hugepage after the
     * purge; with the program quiet meanwhile, the rest of the dense
     * blocks come in one pass, not one a second. */
    CHECK(T_WAIT(sl_stat("thp_blocks") == sl_stat("thp_collapse"), LONG_MS));
    thp_before = sl_stat("block_thp_bytes");
    for (int i = 0; i < N; i++)
        if (i % 8 && objs[i]) {
            sl_free(objs[i]);
            objs[i] = NULL;
        }
    sl_purge();
    CHECK(sl_stat("thp_split") > 0);
    CHECK(sl_stat("block_thp_bytes") < thp_before);
    gauges_agree("after the sparse blocks were purged");
    return finish();
}
