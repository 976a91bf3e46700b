/* Bulk operations: sl_alloc_bulk all-or-none, sl_free_bulk over own and
 * remote slabs, mixed sizes (small, medium, huge), NULL entries, shuffled
 * order, batches of 1 to 100,000; contents checked; stats show splices;
 * unlinked objects beside the magazine's, and in a thread's slabs across
 * fork. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

static void test_roundtrip(void)
{
    static void *objs[100000];
    size_t batches[] = { 1, 2, 3, 8, 31, 64, 65, 250, 1000, 4097, 100000 };
    size_t sizes[] = { 1, 16, 24, 100, 256, 1000, 4096, 16384 };
    unsigned long long seed = 7;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
            size_t n = batches[bi], sz = sizes[si];
            if (sz * n > (256u << 20))
                continue;
            CHECK_EQ(sl_alloc_bulk(sz, n, objs), n);
            int bad = 0;
            for (size_t i = 0; i < n; i++) {
                if (!objs[i] || ((uintptr_t)objs[i] & 15 && sz >= 16) || sl_usable_size(objs[i]) < sz)
                    bad++;
                memset(objs[i], (int)(i & 0xff), sz);
            }
            for (size_t i = 0; i < n; i++)
                if (((unsigned char *)objs[i])[sz - 1] != (unsigned char)(i & 0xff))
                    bad++;
            CHECK_EQ(bad, 0);
            if (bi % 2)
                t_shuffle(objs, n, &seed);
            uint64_t calls = sl_stat("bulk_free_calls");
            sl_free_bulk(objs, n);
            CHECK_EQ(sl_stat("bulk_free_calls"), calls + 1);
        }
    /* distinct pointers */
    CHECK_EQ(sl_alloc_bulk(48, 5000, objs), 5000);
    int dup = 0;
    for (size_t i = 1; i < 5000; i++)
        for (size_t j = i < 64 ? 0 : i - 64; j < i; j++)
            dup += objs[i] == objs[j];
    CHECK_EQ(dup, 0);
    sl_free_bulk(objs, 5000);
}

/* A bulk free that empties whole slabs keeps up to 64 KiB of them as
 * spares (slab/heap.c slab_spare_room): allocating the same objects again
 * builds no slab. 256-byte objects live in 4-page slabs, so 4 spares; a
 * batch of 10 slabs' worth releases the rest at once, and sl_purge the
 * spares. */
static void test_spares(void)
{
    enum { N = 640 };
    static void *objs[N];
    sl_purge();
    CHECK_EQ(sl_alloc_bulk(256, N, objs), N);
    uint64_t made = sl_stat("slab_new"), released = sl_stat("slab_release");
    sl_free_bulk(objs, N);
    uint64_t freed = sl_stat("slab_release") - released;
    CHECK(freed >= 4 && freed <= 7); /* 10 slabs, some partly carved at the start: 4 kept */
    for (int round = 0; round < 50; round++) {
        CHECK_EQ(sl_alloc_bulk(256, 250, objs), 250);
        sl_free_bulk(objs, 250);
    }
    CHECK_EQ(sl_stat("slab_new") - made, 0);
    CHECK_EQ(sl_stat("slab_release") - released, freed);
    CHECK(sl_check() == 0);
    sl_purge();
    CHECK(sl_stat("slab_release") - released >= freed + 3);
    CHECK(sl_check() == 0);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

/* Objects this thread frees in bulk become unlinked (slab.h): nothing is
 * written into them, and the slab finds them in the bitmap when its free
 * list runs dry. The odd objects are freed one by one first, so the
 * magazine holds objects of the same slabs, which have no live bit either:
 * the relink must leave those to the magazine, or one object would be
 * handed out twice. sl_alloc_bulk relinks with the magazine still full. */
static void test_unlinked(void)
{
    enum { N = 512, M = N / 2 };
    static unsigned char *a[N];
    static void *even[M], *again[N + 64];
    for (int i = 0; i < N; i++) {
        a[i] = sl_malloc(64);
        memset(a[i], 0xab, 64);
    }
    for (int i = 1; i < N; i += 2)
        sl_free(a[i]);
    for (int i = 0; i < M; i++)
        even[i] = a[2 * i];
    sl_free_bulk(even, M);
    int touched = 0;
    for (int i = 0; i < N; i += 2) /* freed memory: read only to show nothing was written */
        for (int j = 0; j < 64; j++)
            touched += a[i][j] != 0xab;
    CHECK_EQ(touched, 0);
    CHECK(sl_check() == 0); /* used == carved - free - unlinked */
    CHECK_EQ(sl_alloc_bulk(64, N, again), N);
    for (int i = 0; i < 64; i++) /* the magazine */
        again[N + i] = sl_malloc(64);
    for (int i = 0; i < N + 64; i++)
        memset(again[i], i & 0xff, 64);
    int bad = 0;
    for (int i = 0; i < N + 64; i++)
        bad += ((unsigned char *)again[i])[0] != (i & 0xff) || ((unsigned char *)again[i])[63] != (i & 0xff);
    CHECK_EQ(bad, 0);
    qsort(again, N + 64, sizeof *again, cmp_ptr);
    int dup = 0;
    for (int i = 1; i < N + 64; i++)
        dup += again[i] == again[i - 1];
    CHECK_EQ(dup, 0);
    CHECK(sl_check() == 0);
    sl_free_bulk(again, N + 64);
    CHECK(sl_check() == 0);
}

/* fork while another thread's slabs hold unlinked objects: in the child
 * that thread is gone, its heap is orphaned and its partial slabs are
 * repaired when adopted (slab_repair links the unlinked objects and must
 * zero their count, or the child's counts are wrong). */
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fork_cv = PTHREAD_COND_INITIALIZER;
static int fork_phase;

static void *unlinked_holder(void *arg)
{
    (void)arg;
    enum { K = 256 };
    static void *objs[K], *even[K / 2];
    for (int i = 0; i < K; i++)
        objs[i] = sl_malloc(64);
    for (int i = 0; i < K / 2; i++)
        even[i] = objs[2 * i];
    sl_free_bulk(even, K / 2); /* half of each slab: partial slabs with unlinked objects */
    pthread_mutex_lock(&fork_mu);
    fork_phase = 1;
    pthread_cond_broadcast(&fork_cv);
    while (fork_phase != 2) /* alive across the fork */
        pthread_cond_wait(&fork_cv, &fork_mu);
    pthread_mutex_unlock(&fork_mu);
    for (int i = 1; i < K; i += 2)
        sl_free(objs[i]);
    return NULL;
}

static void test_unlinked_fork(void)
{
    pthread_t t;
    pthread_create(&t, NULL, unlinked_holder, NULL);
    pthread_mutex_lock(&fork_mu);
    while (fork_phase != 1)
        pthread_cond_wait(&fork_cv, &fork_mu);
    pthread_mutex_unlock(&fork_mu);
    pid_t pid = fork();
    if (pid == 0) {
        enum { M = 2000 };
        static unsigned char *got[M];
        int bad = 0;
        for (int i = 0; i < M; i++) { /* takes the orphan's partial slabs */
            got[i] = sl_malloc(64);
            memset(got[i], i & 0xff, 64);
        }
        for (int i = 0; i < M; i++)
            bad += got[i][0] != (i & 0xff) || got[i][63] != (i & 0xff);
        bad += sl_check() != 0;
        for (int i = 0; i < M; i++)
            sl_free(got[i]);
        _exit(bad == 0 && sl_check() == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_mutex_lock(&fork_mu);
    fork_phase = 2;
    pthread_cond_broadcast(&fork_cv);
    pthread_mutex_unlock(&fork_mu);
    pthread_join(t, NULL);
    CHECK(sl_check() == 0);
}

static void test_mixed(void)
{
    enum { N = 3000 };
    void *objs[N];
    unsigned long long seed = 11;
    for (int i = 0; i < N; i++) {
        unsigned long long r = t_rand(&seed) % 100;
        size_t sz = r < 80 ? 1 + r * 7 : r < 95 ? 20000 + r * 1000 : (2u << 20) + r;
        objs[i] = (r % 13 == 0) ? NULL : sl_malloc(sz);
    }
    t_shuffle(objs, N, &seed);
    sl_free_bulk(objs, N); /* any mix of sizes, NULLs skipped */
    sl_free_bulk(NULL, 0);
    void *again[N];
    CHECK_EQ(sl_alloc_bulk(64, N, again), N); /* memory came back and is reusable */
    sl_free_bulk(again, N);
    CHECK(1);
}

static void test_all_or_none(void)
{
    void *objs[4] = { (void *)1, (void *)1, (void *)1, (void *)1 };
    errno = 0;
    CHECK_EQ(sl_alloc_bulk((size_t)1 << 50, 4, objs), 0);
    CHECK_EQ(errno, ENOMEM);
    CHECK_EQ(sl_alloc_bulk(64, 0, objs), 0);
}

/* Objects allocated by one thread, freed in bulk by another (remote), and
 * batches mixing both owners. */
struct job {
    void **objs;
    size_t n;
};

static void *free_job(void *arg)
{
    struct job *j = arg;
    sl_free_bulk(j->objs, j->n);
    return NULL;
}

static void *alloc_job(void *arg)
{
    struct job *j = arg;
    if (sl_alloc_bulk(200, j->n, j->objs) != j->n)
        j->n = 0;
    return NULL;
}

static void test_remote(void)
{
    enum { N = 20000 };
    static void *objs[2 * N];
    for (int round = 0; round < 20; round++) {
        /* half allocated here, half by another thread (which then exits) */
        CHECK_EQ(sl_alloc_bulk(200, N, objs), N);
        struct job a = { objs + N, N };
        pthread_t t;
        pthread_create(&t, NULL, alloc_job, &a);
        pthread_join(t, NULL);
        CHECK_EQ(a.n, N);
        unsigned long long seed = (unsigned)round + 1;
        t_shuffle(objs, 2 * N, &seed);
        uint64_t remote = sl_stat("free_remote"), local = sl_stat("free_small");
        /* freed in bulk by a third thread: main's half is remote to it (the
         * other half may be local: a new thread takes over the heap an
         * exited thread left) */
        struct job f = { objs, 2 * N };
        pthread_create(&t, NULL, free_job, &f);
        pthread_join(t, NULL);
        CHECK(sl_stat("free_remote") >= remote + N);
        CHECK(sl_stat("free_remote") + sl_stat("free_small") >= remote + local + 2 * N);
        CHECK(sl_check() == 0);
    }
    /* concurrently: two threads free each other's objects in bulk */
    static void *mine[N], *theirs[N];
    CHECK_EQ(sl_alloc_bulk(64, N, mine), N);
    struct job a = { theirs, N };
    pthread_t t;
    pthread_create(&t, NULL, alloc_job, &a);
    pthread_join(t, NULL);
    struct job f = { mine, N };
    pthread_create(&t, NULL, free_job, &f);
    sl_free_bulk(theirs, N);
    pthread_join(t, NULL);
    sl_purge();
    CHECK(sl_check() == 0);
}

int main(void)
{
    test_roundtrip();
    test_spares();
    test_unlinked();
    test_unlinked_fork();
    test_mixed();
    test_all_or_none();
    test_remote();
    return t_done("bulk");
}
