/* Object caches: geometry and alignment, constructor semantics, shrink,
 * destroy with live objects, id reuse and exhaustion, bulk over own and
 * remote slabs and mixed caches, threads that exit while their objects
 * live on, create/destroy churn beside busy threads, fork. Misuse (wrong
 * cache, double free, use after destroy) is in death.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

static void test_geometry(void)
{
    size_t sizes[] = { 1, 8, 16, 24, 40, 100, 256, 1000, 3000, 4096, 5000, 20000, 65536, 131072 };
    size_t aligns[] = { 0, 8, 16, 32, 64, 256, 4096 };
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t ai = 0; ai < sizeof aligns / sizeof *aligns; ai++) {
            size_t sz = sizes[si], al = aligns[ai];
            sl_cache_t *c = sl_cache_create("geom", sz, al, 0, NULL);
            if (!c) {
                CHECK(sz + al > 131072); /* only past the 128 KiB limit */
                continue;
            }
            enum { N = 100 };
            char *p[N];
            int bad = 0;
            for (int i = 0; i < N; i++) {
                p[i] = sl_cache_alloc(c);
                if (!p[i] || ((uintptr_t)p[i] % (al > 16 ? al : 16)) || sl_usable_size(p[i]) < sz)
                    bad++;
                else
                    memset(p[i], i + 1, sz);
            }
            for (int i = 0; i < N; i++)
                if (p[i] && (p[i][0] != (char)(i + 1) || p[i][sz - 1] != (char)(i + 1)))
                    bad++;
            CHECK_EQ(bad, 0);
            for (int i = 0; i < N; i++)
                sl_cache_free(c, p[i]);
            sl_cache_destroy(c);
        }
    sl_cache_t *c = sl_cache_create("hw", 20, 0, SL_CACHE_HWCACHE_ALIGN, NULL);
    void *a = sl_cache_alloc(c), *b = sl_cache_alloc(c);
    CHECK(((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0);
    sl_cache_free(c, a);
    sl_cache_free(c, b);
    sl_cache_destroy(c);
    /* bad arguments */
    errno = 0;
    CHECK(!sl_cache_create("x", 0, 0, 0, NULL) && errno == EINVAL);
    CHECK(!sl_cache_create("x", 10, 24, 0, NULL) && errno == EINVAL);
    CHECK(!sl_cache_create("x", 10, 8192, 0, NULL) && errno == EINVAL);
    CHECK(!sl_cache_create("x", 10, 0, 0x100, NULL) && errno == EINVAL);
    CHECK(!sl_cache_create("x", (size_t)1 << 40, 0, 0, NULL) && errno == EINVAL);
    CHECK(!sl_cache_create("x", SIZE_MAX, 0, 0, NULL) && errno == EINVAL);
    sl_cache_destroy(NULL);
    sl_cache_free(NULL, NULL); /* NULL object: nothing to do (cache unused) */
}

/* ---- constructor ---------------------------------------------------------- */

struct obj {
    uint64_t magic;
    _Atomic int *counter;
    char payload[40];
};
static _Atomic int ctor_calls;
static void obj_ctor(void *p)
{
    struct obj *o = p;
    o->magic = 0xc0ffee;
    o->counter = &ctor_calls;
    memset(o->payload, 'c', sizeof o->payload);
    atomic_fetch_add(&ctor_calls, 1);
}

static void test_ctor(void)
{
    sl_cache_t *c = sl_cache_create("obj", sizeof(struct obj), 0, 0, obj_ctor);
    CHECK(c != NULL);
    ctor_calls = 0;
    struct obj *o = sl_cache_alloc(c);
    int after_first = ctor_calls;
    CHECK(after_first >= 1);                       /* constructed when carved */
    CHECK(o->magic == 0xc0ffee && o->payload[39] == 'c');
    o->payload[0] = 'u';                           /* the user's state */
    for (int i = 0; i < 10000; i++) {              /* free and reuse: no ctor */
        sl_cache_free(c, o);
        o = sl_cache_alloc(c);
        CHECK(o->magic == 0xc0ffee); /* the free-list link did not clobber it */
    }
    CHECK_EQ(ctor_calls, after_first);
    /* a working set that stays allocated is never reconstructed */
    enum { N = 5000 };
    static struct obj *objs[N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            objs[i] = sl_cache_alloc(c);
            if (objs[i]->magic != 0xc0ffee || objs[i]->counter != &ctor_calls)
                CHECK(!"object not constructed");
        }
        for (int i = 0; i < N; i++)
            sl_cache_free(c, objs[i]);
    }
    /* constructed when carved: at most once per object per slab life (an
     * empty slab goes back to the page layer and its objects with it) */
    int calls = ctor_calls;
    CHECK(calls >= N && calls <= 3 * (N + 1000));
    /* free() and sl_free_bulk take cache objects, and keep their state */
    o = sl_cache_alloc(c);
    sl_free(o);
    void *b[64];
    CHECK_EQ(sl_cache_alloc_bulk(c, 64, b), 64);
    int bad = 0;
    for (int i = 0; i < 64; i++)
        bad += ((struct obj *)b[i])->magic != 0xc0ffee;
    CHECK_EQ(bad, 0);
    sl_free_bulk(b, 64);
    CHECK_EQ(ctor_calls, calls);
    sl_cache_destroy(c);
}

/* A constructor that allocates from its own cache carves further objects. */
static sl_cache_t *nested_cache;
static _Atomic int nested_depth;
static void nested_ctor(void *p)
{
    memset(p, 'n', 32);
    if (atomic_fetch_add(&nested_depth, 1) == 0) {
        void *q = sl_cache_alloc(nested_cache);
        CHECK(q != NULL && q != p);
        sl_cache_free(nested_cache, q);
    }
}

static void test_ctor_reentrant(void)
{
    nested_cache = sl_cache_create("nested", 32, 0, 0, nested_ctor);
    void *seen[200];
    int dup = 0;
    for (int i = 0; i < 200; i++) {
        seen[i] = sl_cache_alloc(nested_cache);
        for (int j = 0; j < i; j++)
            dup += seen[j] == seen[i];
    }
    CHECK_EQ(dup, 0);
    for (int i = 0; i < 200; i++)
        sl_cache_free(nested_cache, seen[i]);
    sl_cache_destroy(nested_cache);
}

/* ---- shrink, destroy, ids -------------------------------------------------- */

static void test_shrink_destroy(void)
{
    sl_cache_t *c = sl_cache_create("shrink", 200, 0, 0, NULL);
    enum { N = 20000 };
    static void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = sl_cache_alloc(c);
    for (int i = 0; i < N; i++)
        sl_cache_free(c, p[i]);
    size_t got = sl_cache_shrink(c);
    CHECK(got >= 4096); /* at least the kept spare and the current slab */
    CHECK_EQ(sl_cache_shrink(c), 0);
    void *q = sl_cache_alloc(c); /* still usable after a shrink */
    CHECK(q != NULL);
    sl_cache_free(c, q);
    sl_cache_destroy(c);

    /* destroy with live objects: all released at once, counted */
    uint64_t live0 = sl_stat("cache_destroy_live"), active0 = sl_stat("active_bytes");
    c = sl_cache_create("arena", 1000, 0, 0, NULL);
    for (int i = 0; i < N; i++)
        p[i] = sl_cache_alloc(c); /* 20 MB live */
    for (int i = 0; i < N; i += 2)
        sl_cache_free(c, p[i]);
    CHECK(sl_stat("active_bytes") >= active0 + 19000000);
    sl_cache_destroy(c);
    CHECK_EQ(sl_stat("cache_destroy_live") - live0, N / 2);
    sl_purge();
    CHECK(sl_stat("active_bytes") <= active0 + (1 << 20)); /* the pages really went back */
    CHECK_EQ(sl_stat("blocks_free"), 0);                  /* and sl_purge unmapped them */
    /* a new cache reuses the id; the old objects are not its objects */
    sl_cache_t *d = sl_cache_create("after", 1000, 0, 0, NULL);
    void *r = sl_cache_alloc(d);
    memset(r, 1, 1000);
    sl_cache_free(d, r);
    sl_cache_destroy(d);

    /* ids run out at 448 open caches, and come back */
    static sl_cache_t *many[600];
    int open = 0;
    while (open < 600 && (many[open] = sl_cache_create("many", 16, 0, 0, NULL)))
        open++;
    CHECK(open >= 400 && open < 600);
    CHECK_EQ(errno, ENOMEM);
    sl_cache_destroy(many[7]);
    many[7] = sl_cache_create("again", 16, 0, 0, NULL);
    CHECK(many[7] != NULL);
    for (int i = 0; i < open; i++) {
        void *x = sl_cache_alloc(many[i]);
        CHECK(x != NULL);
        if (i % 2)
            sl_cache_free(many[i], x); /* half destroyed with a live object */
        sl_cache_destroy(many[i]);
    }
}

static void test_reclaimable(void)
{
    sl_cache_t *c = sl_cache_create("dentry", 192, 0, SL_CACHE_RECLAIMABLE, NULL);
    void *p[5000];
    for (int i = 0; i < 5000; i++)
        p[i] = sl_cache_alloc(c);
    CHECK(sl_stat("blocks_reclaim") >= 1); /* its slabs sit in RECLAIM pageblocks */
    sl_cache_free_bulk(c, 5000, p);
    sl_cache_destroy(c);
}

/* ---- bulk ---------------------------------------------------------------- */

/* sl_cache_set_reclaim: the shrinker of a cache whose owner keeps objects
 * it could give back (a user-side free list). sl_purge asks it with want =
 * SIZE_MAX; it frees and says how many; the counters agree. Removed with
 * NULL, forgotten by sl_cache_destroy: not asked again. A shrinker set and
 * removed on one thread while another calls sl_purge is seen whole. */
enum { HELD = 1000 };
static void *held[HELD];
static size_t nheld, asked, last_want;

static size_t give_back(sl_cache_t *c, size_t want)
{
    asked++;
    last_want = want;
    size_t n = 0;
    while (nheld && n < want) {
        sl_cache_free(c, held[--nheld]);
        n++;
    }
    return n;
}

static _Atomic int toggling;
static sl_cache_t *toggle_cache;
static size_t nothing_back(sl_cache_t *c, size_t want)
{
    (void)want;
    CHECK(c == toggle_cache);
    return 0;
}

static void *toggler(void *arg)
{
    (void)arg;
    while (atomic_load(&toggling)) {
        sl_cache_set_reclaim(toggle_cache, nothing_back);
        sl_cache_set_reclaim(toggle_cache, NULL);
    }
    return NULL;
}

static void test_set_reclaim(void)
{
    sl_cache_t *c = sl_cache_create("held", 200, 0, SL_CACHE_RECLAIMABLE, NULL);
    CHECK(c != NULL);
    for (nheld = 0; nheld < HELD; nheld++)
        held[nheld] = sl_cache_alloc(c);
    uint64_t calls = sl_stat("reclaim_calls"), objects = sl_stat("reclaim_objects");
    sl_cache_set_reclaim(c, give_back);
    sl_purge();
    CHECK_EQ(asked, 1);
    CHECK(last_want == SIZE_MAX);
    CHECK_EQ(nheld, 0);
    CHECK_EQ(sl_stat("reclaim_calls"), calls + 1);
    CHECK_EQ(sl_stat("reclaim_objects"), objects + HELD);
    sl_cache_set_reclaim(c, NULL);
    sl_purge();
    CHECK_EQ(asked, 1);
    sl_cache_set_reclaim(c, give_back);
    sl_cache_destroy(c);
    sl_purge();
    CHECK_EQ(asked, 1);
    toggle_cache = sl_cache_create("toggled", 64, 0, 0, NULL);
    atomic_store(&toggling, 1);
    pthread_t t;
    pthread_create(&t, NULL, toggler, NULL);
    for (int i = 0; i < 200; i++)
        sl_purge();
    atomic_store(&toggling, 0);
    pthread_join(t, NULL);
    sl_cache_destroy(toggle_cache);
}

static void test_bulk(void)
{
    static void *objs[100000];
    size_t batches[] = { 1, 2, 3, 8, 31, 64, 250, 4097, 100000 };
    unsigned long long seed = 3;
    sl_cache_t *c = sl_cache_create("bulk", 72, 0, 0, NULL);
    sl_cache_t *k = sl_cache_create("bulk_ctor", 56, 0, 0, obj_ctor);
    for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
        size_t n = batches[bi];
        CHECK_EQ(sl_cache_alloc_bulk(c, n, objs), n);
        for (size_t i = 0; i < n; i++)
            memset(objs[i], (int)i, 72);
        if (bi % 2)
            t_shuffle(objs, n, &seed);
        for (size_t i = 0; i < n; i += 7)
            if (i % 3 == 0)
                objs[i] = objs[i] ? (sl_cache_free(c, objs[i]), NULL) : NULL; /* NULL entries */
        sl_cache_free_bulk(c, n, objs);
        CHECK_EQ(sl_cache_alloc_bulk(k, n, objs), n);
        int bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += ((struct obj *)objs[i])->magic != 0xc0ffee;
        CHECK_EQ(bad, 0);
        sl_cache_free_bulk(k, n, objs);
    }
    /* sl_free_bulk: any mix of caches, malloc sizes and NULLs */
    enum { M = 6000 };
    for (int i = 0; i < M; i++) {
        int r = i % 5;
        objs[i] = r == 0 ? sl_cache_alloc(c) : r == 1 ? sl_cache_alloc(k) : r == 2 ? sl_malloc((size_t)i % 3000 + 1)
                 : r == 3 ? sl_malloc(40000) : NULL;
    }
    t_shuffle(objs, M, &seed);
    sl_free_bulk(objs, M);
    CHECK_EQ(sl_cache_alloc_bulk(c, 0, objs), 0);
    sl_cache_free_bulk(c, 0, objs);
    sl_cache_destroy(c);
    sl_cache_destroy(k);
}

/* ---- threads ------------------------------------------------------------- */

enum { NTHREADS = 4, PER_THREAD = 20000 };
static sl_cache_t *shared[3];
static void *handoff[NTHREADS][PER_THREAD];

/* Each thread allocates into handoff[id]; then frees the next thread's
 * objects (remote frees, one by one and in bulk), and exits with the rest
 * of its own still live. */
static pthread_barrier_t barrier;
static _Atomic int worker_bad;
static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned long long seed = (unsigned long long)id + 1;
    for (int i = 0; i < PER_THREAD; i++) {
        sl_cache_t *c = shared[i % 3];
        handoff[id][i] = sl_cache_alloc(c);
        memset(handoff[id][i], id, 24);
        if (t_rand(&seed) % 4 == 0) { /* churn on own slabs */
            void *t = sl_cache_alloc(c);
            sl_cache_free(c, t);
        }
    }
    pthread_barrier_wait(&barrier);
    int victim = (id + 1) % NTHREADS;
    int bad = 0;
    for (int i = 0; i < PER_THREAD / 2; i++) {
        char *p = handoff[victim][i];
        bad += p[0] != victim || p[23] != victim;
        sl_cache_free(shared[i % 3], p);
        handoff[victim][i] = NULL;
    }
    /* the second half in bulk, per cache */
    for (int cidx = 0; cidx < 3; cidx++) {
        void *batch[PER_THREAD / 4];
        size_t n = 0;
        for (int i = PER_THREAD / 2; i < PER_THREAD * 3 / 4; i++) {
            if (i % 3 != cidx)
                continue;
            batch[n++] = handoff[victim][i];
            handoff[victim][i] = NULL;
        }
        sl_cache_free_bulk(shared[cidx], n, batch);
    }
    atomic_fetch_add(&worker_bad, bad);
    return NULL;
}

/* Create, use and destroy caches while other threads use theirs. */
static _Atomic int churn_stop;
static void *churner(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_stop)) {
        sl_cache_t *c = sl_cache_create("churn", 96, 0, 0, obj_ctor);
        void *p[300];
        for (int i = 0; i < 300; i++)
            p[i] = sl_cache_alloc(c);
        for (int i = 0; i < 300; i += 2)
            sl_cache_free(c, p[i]);
        sl_cache_destroy(c); /* half of them still live */
    }
    return NULL;
}

static void test_threads(void)
{
    shared[0] = sl_cache_create("t24", 24, 0, 0, NULL);
    shared[1] = sl_cache_create("t200", 200, 0, 0, obj_ctor);
    shared[2] = sl_cache_create("t3000", 3000, 0, SL_CACHE_RECLAIMABLE, NULL);
    uint64_t live0 = sl_stat("cache_destroy_live");
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    pthread_t t[NTHREADS], ch;
    pthread_create(&ch, NULL, churner, NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&churn_stop, 1);
    pthread_join(ch, NULL);
    CHECK_EQ(worker_bad, 0);
    CHECK(sl_check() == 0);
    /* the exited threads' objects: free some here, destroy the rest */
    size_t still = 0;
    for (int id = 0; id < NTHREADS; id++)
        for (int i = 0; i < PER_THREAD; i++)
            if (handoff[id][i]) {
                if (i % 2)
                    sl_cache_free(shared[i % 3], handoff[id][i]);
                else
                    still++;
            }
    uint64_t churn_live = sl_stat("cache_destroy_live") - live0;
    for (int i = 0; i < 3; i++)
        sl_cache_destroy(shared[i]);
    CHECK_EQ(sl_stat("cache_destroy_live") - live0 - churn_live, still);
}

static void test_fork(void)
{
    sl_cache_t *c = sl_cache_create("forked", 128, 0, 0, obj_ctor);
    void *p = sl_cache_alloc(c);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = ((struct obj *)p)->magic == 0xc0ffee;
        sl_cache_free(c, p);
        void *q[1000];
        ok &= sl_cache_alloc_bulk(c, 1000, q) == 1000;
        sl_cache_free_bulk(c, 1000, q);
        sl_cache_destroy(c);
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sl_cache_free(c, p);
    sl_cache_destroy(c);
}

int main(void)
{
    test_geometry();
    test_ctor();
    test_ctor_reentrant();
    test_shrink_destroy();
    test_reclaimable();
    test_set_reclaim();
    test_bulk();
    test_threads();
    test_fork();
    CHECK(sl_check() == 0);
    return t_done("cache");
}
