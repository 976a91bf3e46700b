/* The shared run cache (page/runcache.c): medium runs that leave a
 * thread's page cache are parked whole and handed out again at the same
 * address, to this thread or another; at most the dirty cap is parked; a
 * request the buddy lists cannot meet gives the parked runs back before a
 * new pageblock is taken, and a run grows in place over a parked one; the decay, sl_purge and a fork child all see
 * them; sl_check checks them at every step.
 *
 * Each scenario runs in a child process started with its own SLUICE_*
 * environment (options are read at start-up), the reclaimer off and the
 * decays long unless the scenario is about the decay. Built against the
 * fault-injection library (runcache_fault), it adds a decay that finds
 * every madvise refused and a huge mapping the kernel refuses. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"
#if SL_FAULT_INJECT
#include <errno.h>

#include "../src/os/fault.h"
#endif

#define RUN_SIZE   (80u << 10) /* 20 pages: a medium run */
#define NRUNS      48          /* 3.75 MiB: more than a thread's page cache keeps (256 KiB, grown 2 MiB) */
#define MIB        (1u << 20)
#define DIRTY_MIN  (2u << 20) /* the dirty cap's floor (page/purge.c) */

static void *made[NRUNS];

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* A thread allocates NRUNS runs, writes them, frees them all and exits:
 * its page cache overflows into the shared cache, and its exit drains
 * the rest there. */
static void *churner(void *arg)
{
    (void)arg;
    for (int i = 0; i < NRUNS; i++) {
        made[i] = sl_malloc(RUN_SIZE);
        memset(made[i], i, RUN_SIZE);
    }
    for (int i = 0; i < NRUNS; i++)
        sl_free(made[i]);
    return NULL;
}

static void churn_in_thread(void)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, churner, NULL), 0);
    pthread_join(t, NULL);
}

static bool was_made(void *p)
{
    for (int i = 0; i < NRUNS; i++)
        if (made[i] == p)
            return true;
    return false;
}

/* The most that may be parked: the dirty cap (an eighth of the active
 * pages, at least 2 MiB). */
static uint64_t park_cap(void)
{
    uint64_t cap = sl_stat("active_bytes") / 8;
    return cap > DIRTY_MIN ? cap : DIRTY_MIN;
}

/* The runs another thread freed come back whole, at their addresses. */
static void scenario_reuse(void)
{
    churn_in_thread();
    uint64_t parked = sl_stat("parked_bytes"), taken = sl_stat("runcache_take");
    CHECK(parked >= 8 * RUN_SIZE);
    CHECK(parked <= park_cap());
    CHECK(parked <= sl_stat("dirty_bytes")); /* parked memory is free and dirty */
    CHECK_EQ(sl_check(), 0);
    unsigned k = (unsigned)(parked / RUN_SIZE), same = 0;
    void *again[NRUNS];
    for (unsigned i = 0; i < k; i++) {
        again[i] = sl_malloc(RUN_SIZE);
        same += was_made(again[i]);
        CHECK(((unsigned char *)again[i])[0] < NRUNS); /* the old bytes: reused, not refaulted */
    }
    CHECK_EQ(same, k);
    CHECK_EQ(sl_stat("runcache_take") - taken, k);
    CHECK_EQ(sl_stat("parked_bytes"), 0);
    CHECK_EQ(sl_check(), 0);
    for (unsigned i = 0; i < k; i++)
        sl_free(again[i]);
    CHECK_EQ(sl_check(), 0);
}

/* A run up to a quarter longer than asked for is taken whole; its usable
 * size is its own length. */
static void scenario_fit(void)
{
    churn_in_thread();
    uint64_t taken = sl_stat("runcache_take");
    void *p = sl_malloc(RUN_SIZE - 8192); /* 18 pages asked for: a 20-page run fits */
    CHECK(was_made(p));
    CHECK_EQ(sl_stat("runcache_take") - taken, 1);
    CHECK_EQ(sl_usable_size(p), RUN_SIZE);
    void *q = sl_malloc(RUN_SIZE / 2); /* 10 pages: a 20-page run is too long */
    CHECK_EQ(sl_stat("runcache_take") - taken, 1);
    sl_free(p);
    sl_free(q);
    CHECK_EQ(sl_check(), 0);
}

/* Parked runs never exceed the cap, however much is freed. */
static void scenario_cap(void)
{
    enum { MANY = 400 }; /* 31 MiB */
    static void *p[MANY];
    bool parked_any = false;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < MANY; i++) {
            p[i] = sl_malloc(RUN_SIZE + (size_t)(i % 8) * 8192);
            memset(p[i], 1, 64);
        }
        for (int i = 0; i < MANY; i++) {
            sl_free(p[i]);
            if (i % 50 == 0)
                CHECK(sl_stat("parked_bytes") <= park_cap());
        }
        /* the last drop purge of a round (a drop: the pages in use down
         * by an eighth, decay.h) takes what was parked; a round whose last
         * frees all fit the thread's page cache (256 KiB at first) then
         * ends with none parked */
        parked_any |= sl_stat("parked_bytes") > 0;
        CHECK(sl_stat("parked_bytes") <= park_cap());
    }
    CHECK(parked_any);
    CHECK(sl_stat("runcache_flush") > 0); /* the oldest went back to the buddy lists */
    CHECK_EQ(sl_check(), 0);
}

/* A request the buddy lists cannot meet takes the parked runs back
 * before a new pageblock: every RUN or free pageblock has room for one
 * 1 MiB run (pages 256-511) once nothing is parked in it. */
static void scenario_room(void)
{
    churn_in_thread();
    CHECK(sl_stat("parked_bytes") > 0);
    uint64_t blocks = sl_stat("blocks"), room = sl_stat("blocks_run") + sl_stat("blocks_free");
    uint64_t flushed = sl_stat("runcache_flush");
    void *big[64];
    CHECK(room <= 64);
    for (uint64_t i = 0; i < room && i < 64; i++) {
        big[i] = sl_malloc(MIB);
        memset(big[i], 7, MIB);
    }
    CHECK_EQ(sl_stat("blocks"), blocks); /* no new pageblock */
    CHECK_EQ(sl_stat("parked_bytes"), 0);
    CHECK(sl_stat("runcache_flush") > flushed);
    CHECK_EQ(sl_stat("extfrag"), 0);
    CHECK_EQ(sl_check(), 0);
    for (uint64_t i = 0; i < room && i < 64; i++)
        sl_free(big[i]);
    CHECK_EQ(sl_check(), 0);
}

/* A run grows in place over a parked run that follows it: realloc takes
 * the parked run's pages back from the cache. */
#if SL_FAULT_INJECT
/* A huge mapping the kernel refuses: before it tries again, the parked
 * runs go back to the buddy lists so that the pageblocks they kept may be
 * unmapped (page_release_free_blocks(true)). */
static void scenario_refused_map(void)
{
    churn_in_thread();
    CHECK(sl_stat("parked_bytes") > 0);
    fault_config("mmap:every=1");
    errno = 0;
    void *p = sl_malloc(8u << 20);
    int err = errno;
    fault_config(NULL);
    CHECK(p == NULL);
    CHECK_EQ(err, ENOMEM);
    CHECK_EQ(sl_stat("parked_bytes"), 0);
    CHECK_EQ(sl_check(), 0);
    p = sl_malloc(8u << 20); /* mappings allowed again */
    CHECK(p != NULL);
    sl_free(p);
    CHECK_EQ(sl_check(), 0);
}

/* Every madvise refused: the decay gives the parked runs back to the buddy
 * lists still dirty (none is lost, none is advised) and stops at the
 * refusal until its next tick. */
static void scenario_refused(void)
{
    /* 48 MiB handed out (never touched): the churn's 3.75 MiB of frees is
     * no drop (an eighth of the pages in use), whose purge, by the
     * freeing thread before the reclaimer is up, would take what its
     * page cache (256 KiB at first) let through to the shared cache */
    enum { BALLAST = 48 };
    void *ballast[BALLAST];
    for (int i = 0; i < BALLAST; i++)
        CHECK((ballast[i] = sl_malloc(MIB)) != NULL);
    churn_in_thread();
    uint64_t parked = sl_stat("parked_bytes");
    CHECK(parked > 0);
    sleep_ms(500); /* decay 100 ms, ticks of 25 ms */
    CHECK(sl_stat("madv_failed") > 0);
    CHECK_EQ(sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls"), 0);
    CHECK(sl_stat("parked_bytes") < parked);
    CHECK(sl_stat("dirty_bytes") >= parked); /* all of it still resident */
    CHECK_EQ(sl_check(), 0);
    void *p[8];
    for (int i = 0; i < 8; i++) {
        p[i] = sl_malloc(RUN_SIZE);
        memset(p[i], 9, RUN_SIZE);
    }
    CHECK_EQ(sl_check(), 0);
    for (int i = 0; i < 8; i++)
        sl_free(p[i]);
    for (int i = 0; i < BALLAST; i++)
        sl_free(ballast[i]);
}
#endif

static void *pair[2];
static void *make_pair(void *arg)
{
    (void)arg;
    pair[0] = sl_malloc(128u << 10); /* 32 pages: the two halves of a 64-page chunk */
    pair[1] = sl_malloc(128u << 10);
    memset(pair[0], 5, 128u << 10);
    sl_free(pair[1]); /* parked when the thread exits */
    return NULL;
}

static void scenario_grow(void)
{
    sl_free(sl_malloc(16)); /* this thread's heap, which counts its reallocs */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, make_pair, NULL), 0);
    pthread_join(t, NULL);
    CHECK((char *)pair[1] == (char *)pair[0] + (128u << 10));
    CHECK_EQ(sl_stat("parked_bytes"), 128u << 10);
    uint64_t inplace = sl_stat("realloc_inplace");
    void *p = sl_realloc(pair[0], 256u << 10);
    CHECK(p == pair[0]);
    CHECK_EQ(sl_stat("realloc_inplace") - inplace, 1);
    CHECK_EQ(sl_stat("parked_bytes"), 0);
    CHECK(((unsigned char *)p)[(128u << 10) - 1] == 5);
    CHECK_EQ(sl_check(), 0);
    sl_free(p);
}

/* Parked runs decay like dirty pages: advised, back to the buddy lists. */
static void scenario_decay(void)
{
    churn_in_thread(); /* a thread: the reclaimer may start */
    CHECK(sl_stat("parked_bytes") > 0);
    uint64_t advised = sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls");
    sleep_ms(1000); /* decay 100 ms, ticks of 25 ms */
    CHECK_EQ(sl_stat("parked_bytes"), 0);
    CHECK_EQ(sl_stat("dirty_bytes") - sl_stat("dirty_thp_bytes"), 0);
    CHECK(sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls") > advised);
    CHECK_EQ(sl_check(), 0);
}

/* sl_purge gives back what is parked. */
static void scenario_purge(void)
{
    churn_in_thread();
    CHECK(sl_stat("parked_bytes") > 0);
    sl_purge();
    CHECK_EQ(sl_stat("parked_bytes"), 0);
    CHECK_EQ(sl_stat("dirty_bytes"), 0);
    CHECK_EQ(sl_check(), 0);
}

/* A run that grew in place over a parked run keeps, inside it, the parked
 * run's descriptor with its run-cache links, which lie where a slab keeps
 * its owner. Once the pages are free again and made slabs (grouping off:
 * one pageblock type for both), the slabs a refill parks in the thread's
 * page cache have no owner (sl_check: "page cache holds a slab that has
 * an owner" before block_mark_run cleared the slot). */
static void *linked[3];
static void *make_linked(void *arg)
{
    (void)arg;
    linked[0] = sl_malloc(64u << 10); /* stays: the pageblock stays mapped */
    pair[0] = sl_malloc(128u << 10);
    pair[1] = sl_malloc(128u << 10);
    linked[1] = sl_malloc(128u << 10);
    sl_free(pair[1]);
    sl_free(linked[1]); /* parked first at exit: pair[1] links to it */
    return NULL;
}

static void scenario_reslab(void)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, make_linked, NULL), 0);
    pthread_join(t, NULL);
    CHECK((char *)pair[1] == (char *)pair[0] + (128u << 10));
    CHECK_EQ(sl_stat("parked_bytes"), 256u << 10);
    void *p = sl_realloc(pair[0], 256u << 10); /* over pair[1] */
    CHECK(p == pair[0]);
    sl_free(p);
    sl_purge(); /* every run back to the buddy lists */
    CHECK_EQ(sl_stat("parked_bytes"), 0);
    enum { N = 16384 }; /* 1 MiB of 64-byte objects */
    static void *obj[N];
    unsigned inside = 0;
    for (int i = 0; i < N; i++) {
        obj[i] = sl_malloc(64);
        CHECK(obj[i] != NULL);
        inside += (char *)obj[i] >= (char *)p && (char *)obj[i] < (char *)p + (256u << 10);
        if (i % 64 == 0)
            CHECK_EQ(sl_check(), 0);
    }
    CHECK(inside > 0); /* the grown run's pages became slabs */
    for (int i = 0; i < N; i++)
        sl_free(obj[i]);
    sl_free(linked[0]);
    CHECK_EQ(sl_check(), 0);
}

/* A fork child inherits the parked runs and takes them, as the parent does. */
static void scenario_fork(void)
{
    churn_in_thread();
    uint64_t parked = sl_stat("parked_bytes");
    CHECK(parked > 0);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = sl_check() != 0 || sl_stat("parked_bytes") != parked;
        void *p = sl_malloc(RUN_SIZE);
        bad |= !was_made(p) || sl_stat("parked_bytes") != parked - RUN_SIZE;
        memset(p, 3, RUN_SIZE);
        sl_free(p);
        bad |= sl_check() != 0;
        _exit(bad);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    void *p = sl_malloc(RUN_SIZE);
    CHECK(was_made(p));
    sl_free(p);
    CHECK_EQ(sl_check(), 0);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
        bool decays;
    } scenarios[] = {
        { "reuse", scenario_reuse, false }, { "fit", scenario_fit, false },   { "cap", scenario_cap, false },
        { "room", scenario_room, false },   { "decay", scenario_decay, true }, { "purge", scenario_purge, false },
        { "fork", scenario_fork, false },   { "grow", scenario_grow, false },   { "reslab", scenario_reslab, false },
#if SL_FAULT_INJECT
        { "refused", scenario_refused, true },  { "refused_map", scenario_refused_map, false },
#endif
    };
    enum { N = sizeof scenarios / sizeof *scenarios };
    if (argc > 1) {
        for (int i = 0; i < N; i++)
            if (!strcmp(argv[1], scenarios[i].name))
                scenarios[i].fn();
        return t_done(argv[1]);
    }
    static const char still[] = "SLUICE_RECLAIMER=off SLUICE_DIRTY_DECAY_MS=3600000 SLUICE_LAZY_DECAY_MS=3600000";
    static const char decaying[] = "SLUICE_RECLAIMER=on SLUICE_DIRTY_DECAY_MS=100 SLUICE_LAZY_DECAY_MS=300";
    static const char one_type[] = "SLUICE_ANTIFRAG=0 SLUICE_RECLAIMER=off SLUICE_DIRTY_DECAY_MS=3600000 "
                                   "SLUICE_LAZY_DECAY_MS=3600000";
    static const char refused[] = "SLUICE_FAULT=madvise:every=1 SLUICE_RECLAIMER=on SLUICE_DIRTY_DECAY_MS=100 "
                                  "SLUICE_LAZY_DECAY_MS=300";
    for (int i = 0; i < N; i++) {
        char out[8192];
        size_t n;
        const char *env = !strcmp(scenarios[i].name, "refused")  ? refused
                          : !strcmp(scenarios[i].name, "reslab") ? one_type
                          : scenarios[i].decays                  ? decaying
                                                                 : still;
        int status = t_run_self(argv[0], scenarios[i].name, env, out, sizeof out, &n);
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok)
            fprintf(stderr, "scenario %s failed (status %d):\n%s", scenarios[i].name, status, out);
        CHECK(ok);
    }
    return t_done("runcache");
}
