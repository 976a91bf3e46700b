/* The heap budget (SLUICE_HEAP_LIMIT; CMakeLists.txt runs this test with
 * 6M as budget_6m and with none as budget_none). Within the budget a type
 * short of room maps a new pageblock; past it, it takes a piece of another
 * type's block first: an external fragmentation event, serious when slab
 * pages land in a RUN block, and a block at least half free is re-typed.
 * Every byte of every live allocation carries a pattern that is checked
 * before it is freed, and sl_check runs after each phase, with threads
 * and in a forked child too. Without a budget, the same work makes no
 * event at all. Uses the sl_ names (UBSan and TSan builds run it too). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

struct obj {
    unsigned char *p;
    size_t n;
    unsigned char v;
};

/* Allocate and fill; false if sl_malloc failed (the harness's CHECK is for
 * the main thread only: workers count their failures themselves). */
static bool take(struct obj *o, size_t n, unsigned char v)
{
    o->p = sl_malloc(n);
    o->n = n;
    o->v = v;
    if (o->p)
        memset(o->p, v, n);
    return o->p != NULL;
}

static bool intact(const struct obj *o)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->p[i] != o->v) {
            fprintf(stderr, "budget: %p byte %zu is %#x, not %#x\n", (void *)o->p, i, o->p[i], o->v);
            return false;
        }
    return true;
}

static size_t give(struct obj *o)
{
    size_t bad = o->p && !intact(o);
    sl_free(o->p);
    o->p = NULL;
    return bad;
}

/* Runs first, every other one freed; then slab pages, which past the
 * budget go into the RUN blocks' holes (serious events). */
static uint64_t max_blocks; /* the most pageblocks seen in slab_into_run */

static void slab_into_run(void)
{
    enum { RUNS = 48, SMALL = 9000 };
    static struct obj run[RUNS], small[SMALL];
    size_t bad = 0;
    for (int i = 0; i < RUNS; i++)
        CHECK(take(&run[i], 96 << 10, (unsigned char)(i + 1)));
    for (int i = 0; i < RUNS; i += 2)
        bad += give(&run[i]);
    for (int i = 0; i < SMALL; i++)
        CHECK(take(&small[i], 256 + (size_t)(i % 4) * 64, (unsigned char)(i * 7 + 3)));
    uint64_t blocks = sl_stat("blocks");
    max_blocks = blocks > max_blocks ? blocks : max_blocks;
    CHECK(sl_check() == 0);
    for (int i = 1; i < RUNS; i += 2)
        bad += give(&run[i]);
    for (int i = 0; i < SMALL; i++)
        bad += give(&small[i]);
    CHECK_EQ(bad, 0);
    CHECK(sl_check() == 0);
}

/* Slabs first, most objects freed (sparse slab blocks, none wholly
 * free); then medium runs, which past the budget go into the SLAB blocks. */
static void run_into_slab(void)
{
    enum { SMALL = 12000, RUNS = 40 };
    static struct obj small[SMALL], run[RUNS];
    size_t bad = 0;
    for (int i = 0; i < SMALL; i++)
        CHECK(take(&small[i], 4096, (unsigned char)(i + 5)));
    for (int i = 0; i < SMALL; i++)
        if (i % 16)
            bad += give(&small[i]);
    for (int i = 0; i < RUNS; i++)
        CHECK(take(&run[i], 64 << 10, (unsigned char)(i * 3 + 1)));
    CHECK(sl_check() == 0);
    for (int i = 0; i < RUNS; i++)
        bad += give(&run[i]);
    for (int i = 0; i < SMALL; i += 16)
        bad += give(&small[i]);
    CHECK_EQ(bad, 0);
    CHECK(sl_check() == 0);
}

/* Threads mixing sizes under the budget, each freeing half of what the
 * next one allocated (cross-thread frees). */
enum { THREADS = 4, LIVE = 600, ROUNDS = 6 };
static struct obj shared[THREADS][LIVE];
static pthread_barrier_t barrier;
static _Atomic size_t thread_bad;

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    unsigned long long seed = 77 + (unsigned)me;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < LIVE; i++) {
            size_t n = t_rand(&seed) % 3 ? 32 + t_rand(&seed) % 2000 : (16 << 10) + t_rand(&seed) % (200 << 10);
            thread_bad += !take(&shared[me][i], n, (unsigned char)(me * 50 + i + r));
        }
        pthread_barrier_wait(&barrier);
        int next = (me + 1) % THREADS;
        for (int i = 0; i < LIVE; i += 2) /* the neighbour's even ones */
            thread_bad += give(&shared[next][i]);
        pthread_barrier_wait(&barrier);
        for (int i = 1; i < LIVE; i += 2) /* our own odd ones */
            thread_bad += give(&shared[me][i]);
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

static void threads(void)
{
    pthread_t t[THREADS];
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);
    CHECK_EQ(thread_bad, 0);
    CHECK(sl_check() == 0);
}

int main(void)
{
    uint64_t budget = sl_stat("budget_bytes");
    const char *env = getenv("SLUICE_HEAP_LIMIT");
    if (env) /* the tests give it in M; without it a cgroup's limit may be the budget */
        CHECK_EQ(budget, (uint64_t)strtoull(env, NULL, 10) << 20);
    slab_into_run();
    uint64_t serious = sl_stat("extfrag_serious");
    run_into_slab();
    threads();
    pid_t pid = fork();
    if (pid == 0) { /* the child inherits the budget and its blocks */
        slab_into_run();
        run_into_slab();
        _exit(t_fail ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    uint64_t events = sl_stat("extfrag");
    printf("budget %llu: extfrag %llu, serious %llu (slab pages in RUN blocks, first phase)\n",
           (unsigned long long)budget, (unsigned long long)events, (unsigned long long)serious);
    if (env) {
        CHECK(serious > 0);      /* past the budget, slab pages took RUN holes */
        /* and with no hole left, a new block all the same: never ENOMEM */
        CHECK(max_blocks << 21 > budget);
        CHECK(events > serious); /* and runs took pieces of SLAB blocks */
    } else if (!budget) {
        CHECK_EQ(events, 0);     /* no budget: a new block, never a piece */
    }
    CHECK(sl_check() == 0);
    return t_done("budget");
}
