/* The watermark boost (reclaim/boost.c) and the shrinker protocol
 * (cache.c). CMakeLists.txt runs it as `boost` (SLUICE_HEAP_LIMIT=16M)
 * and `boost_off` (the same with SLUICE_BOOST=0).
 *   - Past the budget, extfrag events raise the boost; the reclaimer
 *     thread then calls the shrinker of a reclaimable cache (on its own
 *     thread, none of ours), and the thread heaps give back their page
 *     caches and spare slabs (boost_drains). With SLUICE_BOOST=0 none of
 *     that happens. Every byte of every object is checked.
 *   - In a program that only allocates, the low watermark alone (no event
 *     yet) gets the shrinker called on the reclaimer.
 *   - sl_cache_set_reclaim(c, NULL) returns only once a running call of
 *     the old shrinker has returned, and the shrinker is not called again.
 *   - A shrinker may remove itself.
 *   - fork while a shrinker runs on another thread: the child can remove
 *     it at once (no call is running there).
 *   - A shrinker that frees nothing while the heap stays short of room is
 *     asked at growing intervals (about 5 times in 1.5 s, not 30).
 * Every wait is for a condition, with a deadline (t.h): the boost's
 * policy (watermarks, rise, lapse) is unit-tested in unit_antifrag.
 * Uses the sl_ names (UBSan and TSan builds run it too). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

/* ---- an LRU cache with a shrinker ---------------------------------------- */

struct rec {
    struct rec *prev, *next;
    unsigned char v;
    unsigned char payload[495];
};
static sl_cache_t *lru_cache;
static pthread_mutex_t lru_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec *head, *tail;
static size_t count;
static _Atomic int shrinker_calls, shrinker_foreign, bad;
static __thread bool ours; /* set by each thread this test starts, and main */

static bool rec_intact(const struct rec *r)
{
    for (size_t i = 0; i < sizeof r->payload; i++)
        if (r->payload[i] != r->v)
            return false;
    return true;
}

static size_t lru_shrink(sl_cache_t *c, size_t want)
{
    shrinker_calls++;
    if (!ours)
        shrinker_foreign++;
    size_t n = 0;
    pthread_mutex_lock(&lru_lock);
    while (n < want && tail) {
        struct rec *r = tail;
        tail = r->prev;
        if (tail)
            tail->next = NULL;
        else
            head = NULL;
        count--;
        bad += !rec_intact(r);
        sl_cache_free(c, r);
        n++;
    }
    pthread_mutex_unlock(&lru_lock);
    return n;
}

static void lru_push(struct rec *r)
{
    pthread_mutex_lock(&lru_lock);
    r->prev = NULL;
    r->next = head;
    if (head)
        head->prev = r;
    head = r;
    if (!tail)
        tail = r;
    count++;
    pthread_mutex_unlock(&lru_lock);
}

static _Atomic int stop;

/* Fills the LRU (capped at 12 MiB), as a program's cache would. */
static void *filler(void *arg)
{
    unsigned char v = 1;
    (void)arg;
    ours = true;
    while (!stop) {
        struct rec *r = sl_cache_alloc(lru_cache);
        if (!r) {
            bad++;
            break;
        }
        r->v = v++;
        memset(r->payload, r->v, sizeof r->payload);
        struct rec *evict = NULL;
        lru_push(r);
        pthread_mutex_lock(&lru_lock);
        if (count > (12u << 20) / sizeof *r) {
            evict = tail;
            tail = evict->prev;
            tail->next = NULL;
            count--;
        }
        pthread_mutex_unlock(&lru_lock);
        if (evict) {
            bad += !rec_intact(evict);
            sl_cache_free(lru_cache, evict);
        }
    }
    return NULL;
}

/* Small long-lived objects and medium buffers, mixed: past the budget the
 * types fall back into each other's blocks. */
static void *mixer(void *arg)
{
    enum { SMALL = 20000, RUNS = 24 };
    static unsigned char *small[SMALL], *runs[RUNS];
    unsigned long long seed = 5;
    (void)arg;
    ours = true;
    for (unsigned i = 0; !stop; i++) {
        unsigned s = (unsigned)(t_rand(&seed) % SMALL), r = i % RUNS;
        if (small[s]) {
            bad += small[s][0] != (unsigned char)s || small[s][63] != (unsigned char)s;
            sl_free(small[s]);
        }
        small[s] = sl_malloc(64 + s % 128);
        memset(small[s], (int)s, 64);
        if (runs[r]) {
            bad += runs[r][0] != (unsigned char)r || runs[r][40000] != (unsigned char)r;
            sl_free(runs[r]);
        }
        runs[r] = sl_malloc((48 << 10) + (t_rand(&seed) % 4) * 4096);
        memset(runs[r], (int)r, 48 << 10);
    }
    for (unsigned i = 0; i < SMALL; i++)
        sl_free(small[i]);
    for (unsigned i = 0; i < RUNS; i++)
        sl_free(runs[i]);
    return NULL;
}

static void boost_scenario(bool boost_on)
{
    lru_cache = sl_cache_create("boost-lru", sizeof(struct rec), 0, SL_CACHE_RECLAIMABLE, NULL);
    sl_cache_set_reclaim(lru_cache, lru_shrink);
    ours = true;
    pthread_t f, m;
    pthread_create(&f, NULL, filler, NULL);
    pthread_create(&m, NULL, mixer, NULL);
    if (boost_on) { /* until an event, and the reclaimer has called the shrinker and drained */
        CHECK(T_WAIT(sl_stat("extfrag") && shrinker_foreign && sl_stat("boost_drains"), 20000));
    } else {
        /* until an event, and then until the reclaimer has been twice
         * round its loop: the second pass began after the event, so with
         * the boost on it would have boosted (an event kicks it, and the
         * boost runs first in a pass) */
        CHECK(T_WAIT(sl_stat("extfrag") > 0, 20000));
        uint64_t runs = sl_stat("reclaimer_runs");
        CHECK(T_WAIT(sl_stat("reclaimer_runs") >= runs + 2, 20000));
    }
    stop = 1;
    pthread_join(f, NULL);
    pthread_join(m, NULL);
    printf("boost %s: extfrag %llu, boosts %llu, passes %llu, drains %llu, shrinker calls %d (%d on the "
           "reclaimer)\n",
           boost_on ? "on" : "off", (unsigned long long)sl_stat("extfrag"), (unsigned long long)sl_stat("boost_events"),
           (unsigned long long)sl_stat("boost_runs"), (unsigned long long)sl_stat("boost_drains"), (int)shrinker_calls,
           (int)shrinker_foreign);
    CHECK(sl_stat("extfrag") > 0); /* the budget was reached */
    if (boost_on) {
        CHECK(sl_stat("boost_events") > 0);
        CHECK(sl_stat("boost_runs") > 0);
        CHECK(shrinker_foreign > 0); /* on the reclaimer thread */
        CHECK(sl_stat("reclaim_calls") > 0);
        CHECK(sl_stat("boost_drains") > 0);
    } else {
        CHECK_EQ(sl_stat("boost_events"), 0);
        CHECK_EQ(sl_stat("boost_runs"), 0);
        CHECK_EQ(shrinker_calls, 0);
        CHECK_EQ(sl_stat("boost_drains"), 0);
    }
    CHECK_EQ(bad, 0);
    sl_cache_set_reclaim(lru_cache, NULL);
    pthread_mutex_lock(&lru_lock);
    for (struct rec *r = head; r; r = r->next)
        bad += !rec_intact(r);
    pthread_mutex_unlock(&lru_lock);
    CHECK_EQ(bad, 0);
    CHECK(sl_check() == 0);
    sl_cache_destroy(lru_cache);
}

/* ---- the low watermark alone starts the reclaimer ---------------------------- */

static void *nothing(void *arg) { return arg; }

/* One step of a program that only allocates records: batches of 256, on
 * and on while far from the budget; near it, one batch a step (the caller
 * polls between steps: the reclaimer gets in). Done once the shrinker has
 * been called on the reclaimer, or twice the budget was made. */
static size_t wmark_made;
static bool wmark_step(void)
{
    uint64_t budget = sl_stat("budget_bytes"), block = 2u << 20;
    size_t cap = (size_t)(2 * budget / sizeof(struct rec));
    do {
        for (int i = 0; i < 256; i++, wmark_made++) {
            struct rec *r = sl_cache_alloc(lru_cache);
            r->v = (unsigned char)wmark_made;
            memset(r->payload, r->v, sizeof r->payload);
            lru_push(r);
        }
    } while (!shrinker_foreign && wmark_made < cap && (sl_stat("blocks") + 2) * block < budget);
    return shrinker_foreign || wmark_made >= cap;
}

/* A program that only allocates: the headroom falling under the low
 * watermark, with no event yet, is enough for the reclaimer to be started
 * (by an owner's slow path: no dirty pages may be there to start it) and
 * to call the shrinker on its own thread. Run first, before anything is
 * freed. */
static void watermark_starts_reclaimer(void)
{
    lru_cache = sl_cache_create("boost-wmark", sizeof(struct rec), 0, SL_CACHE_RECLAIMABLE, NULL);
    sl_cache_set_reclaim(lru_cache, lru_shrink);
    pthread_t t; /* the program is no longer single-threaded: it may have a reclaimer */
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
    ours = true;
    CHECK_EQ(sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls"), 0);
    CHECK(T_WAIT(wmark_step(), 20000));
    printf("boost: low watermark: %zu records made, %d shrinker calls on the reclaimer, extfrag %llu\n",
           wmark_made, (int)shrinker_foreign, (unsigned long long)sl_stat("extfrag"));
    CHECK(shrinker_foreign > 0);
    sl_cache_set_reclaim(lru_cache, NULL);
    for (struct rec *r = head, *next; r; r = next) {
        next = r->next;
        bad += !rec_intact(r);
        sl_cache_free(lru_cache, r);
    }
    head = tail = NULL;
    count = 0;
    CHECK_EQ(bad, 0);
    sl_cache_destroy(lru_cache);
    shrinker_calls = shrinker_foreign = 0;
}

/* ---- removal waits for a running call --------------------------------------- */

/* slow_shrink is a call that lasts until the test lets it go: once the
 * remover is seen blocked (slow_watch: removal_waits), or once the fork
 * is done (slow_release: fork_during_shrink); at most 20 s. */
static _Atomic int slow_in, slow_out, slow_calls, slow_watch, slow_release;
static pid_t main_tid;

/* Is thread tid blocked in the kernel (state S or D in /proc)? No
 * allocation: it runs inside a shrinker. */
static bool thread_blocked(pid_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* "tid (comm) S ..." */
    return p && (p[2] == 'S' || p[2] == 'D');
}

static size_t slow_shrink(sl_cache_t *c, size_t want)
{
    (void)c, (void)want;
    slow_calls++;
    slow_in = 1;
    T_WAIT(slow_release || (slow_watch && thread_blocked(main_tid)), 20000);
    slow_out = 1;
    return 0;
}

static void *purger(void *arg)
{
    (void)arg;
    sl_purge();
    return NULL;
}

/* The call runs until this thread is seen blocked after it began the
 * removal: a removal that waits blocks, and the call then returns before
 * it does; one that does not wait returns with the call still running
 * (it would be let go only at the join, once this thread blocks there). */
static void removal_waits(void)
{
    sl_cache_t *c = sl_cache_create("boost-slow", 64, 0, SL_CACHE_RECLAIMABLE, NULL);
    sl_cache_set_reclaim(c, slow_shrink);
    main_tid = (pid_t)syscall(SYS_gettid);
    pthread_t p;
    pthread_create(&p, NULL, purger, NULL);
    CHECK(T_WAIT(slow_in, 20000));
    slow_watch = 1; /* from here this thread blocks only in the removal (or the join) */
    sl_cache_set_reclaim(c, NULL);
    CHECK_EQ(slow_out, 1); /* returned only after the call had */
    pthread_join(p, NULL);
    int calls = slow_calls;
    sl_purge();
    CHECK_EQ(slow_calls, calls); /* not called again */
    sl_cache_destroy(c);
}

/* ---- a shrinker that removes itself ----------------------------------------- */

static _Atomic int self_calls;
static size_t self_removing(sl_cache_t *c, size_t want)
{
    (void)want;
    self_calls++;
    sl_cache_set_reclaim(c, NULL); /* must not wait for itself */
    return 0;
}

static void self_removal(void)
{
    sl_cache_t *c = sl_cache_create("boost-self", 64, 0, 0, NULL);
    sl_cache_set_reclaim(c, self_removing);
    sl_purge();
    sl_purge();
    CHECK_EQ(self_calls, 1);
    sl_cache_destroy(c);
}

/* ---- fork while a shrinker runs elsewhere -------------------------------------- */

static void fork_during_shrink(void)
{
    sl_cache_t *c = sl_cache_create("boost-fork", 64, 0, SL_CACHE_RECLAIMABLE, NULL);
    slow_in = slow_out = slow_watch = slow_release = 0;
    sl_cache_set_reclaim(c, slow_shrink);
    pthread_t p;
    pthread_create(&p, NULL, purger, NULL);
    CHECK(T_WAIT(slow_in, 20000));
    pid_t pid = fork(); /* the call is running, and lasts until slow_release */
    if (pid == 0) {
        alarm(5); /* a hang is a failure, not a stuck test */
        sl_cache_set_reclaim(c, NULL); /* no call is running here */
        void *o = sl_cache_alloc(c);
        sl_cache_free(c, o);
        sl_cache_destroy(c);
        _exit(0);
    }
    slow_release = 1;
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_join(p, NULL);
    CHECK_EQ(slow_out, 1);
    sl_cache_destroy(c); /* forgets the shrinker, waiting as removal does */
}

/* ---- a shrinker that frees nothing is asked less and less ---------------------- */

enum { STUCK_MAX = 256, STUCK_WINDOW_MS = 1500 };
static _Atomic int stuck_calls;
static _Atomic uint64_t stuck_ms[STUCK_MAX]; /* when each ask came */
static size_t refusing_shrink(sl_cache_t *c, size_t want)
{
    (void)c;
    (void)want;
    int k = stuck_calls++;
    if (k < STUCK_MAX)
        stuck_ms[k] = t_now_ms();
    return 0;
}

/* Has the window closed: an ask STUCK_WINDOW_MS or more after the first
 * ask at or after from_ms (*first: its index)? */
static bool stuck_window_closed(uint64_t from_ms, int *first)
{
    int n = stuck_calls < STUCK_MAX ? stuck_calls : STUCK_MAX;
    for (*first = 0; *first < n && stuck_ms[*first] < from_ms; ++*first)
        ;
    return *first < n && stuck_ms[n - 1] >= stuck_ms[*first] + STUCK_WINDOW_MS;
}

/* The heap held under the high watermark by live buffers (no event, no
 * progress possible): the reclaimer keeps boosting, and a shrinker that
 * frees nothing is asked at 50 ms, then at intervals doubling up to 1.6 s
 * (boost.c shrink_due): about 5 asks in 1.5 s, against 30 at a fixed
 * 50 ms. The window opens at the first ask once the buffers are all made
 * (the deficit is steady from then on; asks before it were paced by the
 * deficits before) and closes at the first ask 1.5 s or more after it.
 * The times are taken in the shrinker (on the reclaimer): a late test
 * thread does not move them, and a loaded machine only spreads them. */
static void shrinker_backs_off(void)
{
    sl_cache_t *c = sl_cache_create("boost-stuck", 64, 0, SL_CACHE_RECLAIMABLE, NULL);
    void *keep = sl_cache_alloc(c); /* the cache has something to give, in name */
    sl_cache_set_reclaim(c, refusing_shrink);
    enum { BUF = 64 << 10 };
    uint64_t budget = sl_stat("budget_bytes");
    size_t n = (size_t)(budget * 7 / 8 / BUF);
    unsigned char **bufs = sl_malloc(n * sizeof *bufs);
    for (size_t i = 0; i < n; i++) {
        bufs[i] = sl_malloc(BUF);
        memset(bufs[i], (int)i, BUF);
    }
    uint64_t made_ms = t_now_ms();
    int first = 0;
    CHECK(T_WAIT(stuck_window_closed(made_ms, &first), 20000)); /* asked again, 1.5 s on */
    sl_cache_set_reclaim(c, NULL);
    int calls = stuck_calls < STUCK_MAX ? stuck_calls : STUCK_MAX, in_window = 0;
    printf("boost: a shrinker that frees nothing: asked at");
    for (int k = 0; k < calls; k++) {
        in_window += k >= first && stuck_ms[k] < stuck_ms[first] + STUCK_WINDOW_MS;
        printf(" %s%lld", k == first ? "[" : "", (long long)(stuck_ms[k] - stuck_ms[first]));
    }
    printf(" ms: %d asks in the 1.5 s from [\n", in_window);
    CHECK(calls >= 3);      /* asked again, at growing intervals */
    CHECK(in_window <= 8); /* not every 50 ms (at most 15 in 3 s, as before) */
    for (size_t i = 0; i < n; i++) {
        bad += bufs[i][0] != (unsigned char)i || bufs[i][BUF - 1] != (unsigned char)i;
        sl_free(bufs[i]);
    }
    CHECK_EQ(bad, 0);
    sl_free(bufs);
    sl_cache_free(c, keep);
    sl_cache_destroy(c);
}

int main(void)
{
    const char *b = getenv("SLUICE_BOOST");
    bool boost_on = !(b && !strcmp(b, "0"));
    if (!sl_stat("budget_bytes")) {
        printf("boost: no heap budget (SLUICE_HEAP_LIMIT): the scenario needs one\n");
        CHECK(0);
    }
    if (boost_on)
        watermark_starts_reclaimer();
    boost_scenario(boost_on);
    removal_waits();
    self_removal();
    fork_during_shrink();
    if (boost_on)
        shrinker_backs_off();
    return t_done("boost");
}
