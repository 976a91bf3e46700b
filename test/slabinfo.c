/* slabinfo.c — the per-cache statistics (sl_cache_stats, sl_ctl's cache.*
 * and caches.*, the table in sl_stats_print and sl_stats_json): every
 * figure adds up. The counts (allocations, frees, remote and bulk frees)
 * are exact for what the test does, through every way an object comes
 * and goes (one by one, bulk, remote frees at once for a cache, batched
 * for malloc, magazines); objects_active, read from the slabs, equals
 * allocations - frees for every row while the program is quiet, with a
 * remote batch and magazines still holding freed objects; the slabs agree
 * with the room; a destroyed cache's id starts again at 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

static struct sl_cache_stats row_of(sl_cache_t *c)
{
    struct sl_cache_stats r = { .size = sizeof r };
    CHECK_EQ(sl_cache_stats(c, &r), 0);
    return r;
}

static uint64_t ctl_u64(const char *name)
{
    uint64_t v = 0;
    size_t len = sizeof v;
    int err = sl_ctl(name, &v, &len, NULL, 0);
    if (err)
        fprintf(stderr, "sl_ctl(%s): %d\n", name, err);
    CHECK_EQ(err, 0);
    return v;
}

/* Every row: active == allocations - frees, and the slabs hold it. */
static int check_every_row(const char *when)
{
    int rows = 0, bad = 0;
    for (;; rows++) {
        char name[32];
        struct sl_cache_stats r;
        size_t len = sizeof r;
        snprintf(name, sizeof name, "caches.%d", rows);
        int err = sl_ctl(name, &r, &len, NULL, 0);
        if (err == ENOENT)
            break;
        CHECK_EQ(err, 0);
        if (r.objects_active != r.allocations - r.frees || r.objects_active > r.objects_total ||
            r.slabs_active > r.slabs_total || r.remote_frees > r.frees || r.bulk_frees > r.frees ||
            (r.slabs_total && r.objects_total % r.slabs_total) ||
            r.objects_total * r.object_size > r.slabs_total * r.pages_per_slab * 4096) {
            fprintf(stderr, "%s: %s: active %llu, allocations %llu, frees %llu, objects %llu, slabs %llu/%llu\n",
                    when, r.name, (unsigned long long)r.objects_active, (unsigned long long)r.allocations,
                    (unsigned long long)r.frees, (unsigned long long)r.objects_total,
                    (unsigned long long)r.slabs_active, (unsigned long long)r.slabs_total);
            bad++;
        }
    }
    CHECK_EQ(bad, 0);
    return rows;
}

/* A thread that frees what it is given and stays alive, its remote batch
 * (malloc objects) unflushed, until told to go. */
static struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int stage; /* 1: objects handed over; 2: freed; 3: go */
    sl_cache_t *cache;
    void **objs;
    size_t n;
} ch = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, NULL, 0 };

static void set_stage(int s)
{
    pthread_mutex_lock(&ch.m);
    ch.stage = s;
    pthread_cond_broadcast(&ch.cv);
    pthread_mutex_unlock(&ch.m);
}
static void wait_stage(int s)
{
    pthread_mutex_lock(&ch.m);
    while (ch.stage < s)
        pthread_cond_wait(&ch.cv, &ch.m);
    pthread_mutex_unlock(&ch.m);
}

static void *freer(void *arg)
{
    (void)arg;
    wait_stage(1);
    for (size_t i = 0; i < ch.n; i++)
        ch.cache ? sl_cache_free(ch.cache, ch.objs[i]) : sl_free(ch.objs[i]);
    set_stage(2);
    wait_stage(3);
    return NULL;
}

/* objs[0, n) freed by another thread that stays alive meanwhile; the
 * check runs while it waits. */
static void remote_free(sl_cache_t *c, void **objs, size_t n, const char *when)
{
    pthread_t t;
    ch.stage = 0;
    ch.cache = c;
    ch.objs = objs;
    ch.n = n;
    CHECK_EQ(pthread_create(&t, NULL, freer, NULL), 0);
    set_stage(1);
    wait_stage(2);
    check_every_row(when);
    set_stage(3);
    pthread_join(t, NULL);
}

static void test_cache(void)
{
    sl_cache_t *c = sl_cache_create("slabinfo.test", 100, 0, 0, NULL);
    CHECK(c != NULL);
    struct sl_cache_stats r = row_of(c);
    CHECK(!strcmp(r.name, "slabinfo.test"));
    CHECK_EQ(r.size, sizeof r);
    CHECK_EQ(r.object_size, 112); /* 100 rounded to the 16-byte grain */
    CHECK_EQ(r.allocations, 0);
    CHECK_EQ(r.slabs_total, 0);
    CHECK_EQ(r.pageblock_type, SL_PAGEBLOCK_SLAB);

    enum { N = 1000, BULK = 200 };
    static void *o[N + BULK];
    for (int i = 0; i < N; i++)
        CHECK((o[i] = sl_cache_alloc(c)) != NULL);
    for (int i = 0; i < 300; i++) /* by the owner, one by one */
        sl_cache_free(c, o[i]);
    CHECK_EQ(sl_cache_alloc_bulk(c, BULK, o + N), BULK);
    sl_cache_free_bulk(c, 100, o + N); /* by the owner, in bulk */
    remote_free(c, o + 300, 50, "cache, remote frees"); /* by another thread, at once */
    r = row_of(c);
    CHECK_EQ(r.allocations, N + BULK);
    CHECK_EQ(r.frees, 300 + 100 + 50);
    CHECK_EQ(r.remote_frees, 50);
    CHECK_EQ(r.bulk_frees, 100);
    CHECK_EQ(r.objects_active, N + BULK - 450);
    CHECK(r.slabs_total > 0 && r.slabs_active > 0 && r.slabs_active <= r.slabs_total);
    CHECK_EQ(r.objects_total % r.slabs_total, 0);
    CHECK(r.objects_total >= r.objects_active);
    CHECK_EQ(r.objects_total / r.slabs_total, r.pages_per_slab * 4096 / 112);

    /* the same figures by name through sl_ctl (a name with dots in it) */
    CHECK_EQ(ctl_u64("cache.slabinfo.test.allocations"), N + BULK);
    CHECK_EQ(ctl_u64("cache.slabinfo.test.objects_active"), r.objects_active);
    CHECK_EQ(ctl_u64("cache.slabinfo.test.remote_frees"), 50);
    CHECK_EQ(ctl_u64("cache.slabinfo.test.slabs_total"), r.slabs_total);
    uint64_t v = 1;
    size_t len = sizeof v;
    CHECK_EQ(sl_ctl("cache.slabinfo.test.frees", NULL, NULL, &v, sizeof v), EPERM);
    CHECK_EQ(sl_ctl("cache.slabinfo.test.nofield", &v, &len, NULL, 0), ENOENT);
    CHECK_EQ(sl_ctl("cache.no-such-cache.frees", &v, &len, NULL, 0), ENOENT);
    CHECK_EQ(sl_ctl("cache.malloc-65.frees", &v, &len, NULL, 0), ENOENT);
    CHECK_EQ(sl_ctl("caches.999999", &v, &len, NULL, 0), ENOENT);
    CHECK_EQ(sl_ctl("caches.x", &v, &len, NULL, 0), ENOENT);
    len = 8; /* too small for a row */
    CHECK_EQ(sl_ctl("caches.0", &v, &len, NULL, 0), EINVAL);
    struct sl_cache_stats small = { .size = 8 };
    CHECK_EQ(sl_cache_stats(c, &small), EINVAL);
    CHECK_EQ(sl_cache_stats(NULL, &r), EINVAL);
    CHECK_EQ(sl_cache_stats(c, NULL), EINVAL);

    /* everything freed: nothing active, the counts stay */
    for (int i = 350; i < N; i++)
        sl_cache_free(c, o[i]);
    sl_cache_free_bulk(c, BULK - 100, o + N + 100);
    r = row_of(c);
    CHECK_EQ(r.objects_active, 0);
    CHECK_EQ(r.frees, N + BULK);
    CHECK_EQ(r.slabs_active, 0);
    CHECK_EQ(sl_cache_shrink(c) > 0, 1);
    r = row_of(c);
    CHECK_EQ(r.slabs_total, 0);
    CHECK_EQ(r.objects_total, 0);

    /* destroyed: its id's next cache starts from nothing, and the total
     * of small allocations keeps what the destroyed one counted */
    uint64_t total = sl_stat("alloc_small");
    sl_cache_destroy(c);
    CHECK(sl_stat("alloc_small") >= total);
    sl_cache_t *d = sl_cache_create("slabinfo.reclaimable", 4000, 0, SL_CACHE_RECLAIMABLE, NULL);
    r = row_of(d);
    CHECK_EQ(r.allocations, 0);
    CHECK_EQ(r.frees, 0);
    CHECK_EQ(r.pageblock_type, SL_PAGEBLOCK_RECLAIM);
    void *p = sl_cache_alloc(d);
    r = row_of(d);
    CHECK_EQ(r.allocations, 1);
    CHECK_EQ(r.objects_active, 1);
    CHECK_EQ(r.slabs_total, 1);
    CHECK_EQ(r.slabs_active, 1);
    sl_cache_free(d, p);
    sl_cache_destroy(d);
}

static void test_malloc_class(void)
{
    enum { N = 2000 };
    static void *o[N];
    uint64_t a0 = ctl_u64("cache.malloc-64.allocations"), f0 = ctl_u64("cache.malloc-64.frees"),
             r0 = ctl_u64("cache.malloc-64.remote_frees"), b0 = ctl_u64("cache.malloc-64.bulk_frees");
    for (int i = 0; i < N; i++)
        o[i] = sl_malloc(64);
    for (int i = 0; i < 100; i++) /* into the magazine */
        sl_free(o[i]);
    sl_free_bulk(o + 100, 400);                                    /* by the owner, in bulk */
    CHECK_EQ(sl_alloc_bulk(64, 300, o + 100), 300);                 /* bulk allocations */
    remote_free(NULL, o + 500, 150, "malloc, a remote batch held"); /* batched by a live thread */
    CHECK_EQ(ctl_u64("cache.malloc-64.allocations") - a0, N + 300);
    CHECK_EQ(ctl_u64("cache.malloc-64.frees") - f0, 100 + 400 + 150);
    CHECK_EQ(ctl_u64("cache.malloc-64.remote_frees") - r0, 150);
    CHECK_EQ(ctl_u64("cache.malloc-64.bulk_frees") - b0, 400);
    CHECK_EQ(ctl_u64("cache.malloc-64.object_size"), 64);
    CHECK_EQ(ctl_u64("cache.malloc-64.pages_per_slab"), 1);
    /* the other thread is gone (its batch flushed): still adds up */
    check_every_row("malloc, after the remote thread's exit");
    for (int i = 100; i < 400; i++)
        sl_free(o[i]);
    for (int i = 650; i < N; i++)
        sl_free(o[i]);
    check_every_row("malloc, all freed");
    sl_purge();
    check_every_row("after sl_purge");
}

static void *free_all(void *arg)
{
    void **o = arg;
    for (int i = 0; i < 1000; i++)
        sl_free(o[i]);
    return NULL; /* its exit flushes its batch: the bits are set */
}

/* Remote frees that the owner's malloc collects into its magazine (a
 * collect with fill, heap.c): no free of the owner's put them there, yet
 * they leave it by malloc like any it pushed. The magazine's frees are
 * counted by its top's moves (heap.h, heap_count_free). */
static void test_malloc_collected(void)
{
    enum { N = 1000 };
    static void *o[N];
    uint64_t a0 = ctl_u64("cache.malloc-96.allocations"), f0 = ctl_u64("cache.malloc-96.frees");
    for (int i = 0; i < N; i++)
        o[i] = sl_malloc(96);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, free_all, o), 0);
    pthread_join(t, NULL);
    for (int i = 0; i < N; i++) /* the current slab is exhausted: the next collect fills the magazine */
        o[i] = sl_malloc(96);
    CHECK_EQ(ctl_u64("cache.malloc-96.allocations") - a0, 2 * N);
    CHECK_EQ(ctl_u64("cache.malloc-96.frees") - f0, N);
    check_every_row("malloc, remote frees collected into the magazine");
    for (int i = 0; i < N; i++)
        sl_free(o[i]);
    CHECK_EQ(ctl_u64("cache.malloc-96.frees") - f0, 2 * N);
    check_every_row("malloc, collected and freed again");
    sl_purge();
    CHECK_EQ(ctl_u64("cache.malloc-96.frees") - f0, 2 * N);
    check_every_row("malloc, collected, after sl_purge");
}

/* Placement (page/antifrag.h: af_slab_type): malloc's classes of 512 B and
 * less in SLAB pageblocks, the classes above in BUF pageblocks of their
 * own, so that buffers do not leave holes among long-lived records. */
static void test_malloc_placement(void)
{
    CHECK_EQ(ctl_u64("cache.malloc-512.pageblock_type"), SL_PAGEBLOCK_SLAB);
    CHECK_EQ(ctl_u64("cache.malloc-576.pageblock_type"), SL_PAGEBLOCK_BUF);
    CHECK_EQ(ctl_u64("cache.malloc-32768.pageblock_type"), SL_PAGEBLOCK_BUF);
    void *record = sl_malloc(64), *buffer = sl_malloc(2048);
    CHECK(record && buffer && (uintptr_t)record >> 21 != (uintptr_t)buffer >> 21);
    CHECK(sl_stat("blocks_buf") >= 1 && sl_stat("blocks_slab") >= 1);
    sl_free(record);
    sl_free(buffer);
}

/* The table in both outputs. */
static void test_outputs(void)
{
    sl_cache_t *c = sl_cache_create("slabinfo \"quoted\\name\"", 48, 0, 0, NULL);
    void *p = sl_cache_alloc(c);
    int fd = memfd_create("stats", 0);
    CHECK(fd >= 0);
    sl_stats_print(fd);
    sl_stats_json(fd);
    static char buf[1 << 20];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    CHECK(n > 0);
    buf[n > 0 ? n : 0] = 0;
    CHECK(strstr(buf, "object caches (slabinfo") != NULL);
    CHECK(strstr(buf, "\n  slabinfo \"quoted\\name\"") != NULL); /* the text row */
    CHECK(strstr(buf, "\n  malloc-64 ") != NULL);
    CHECK(strstr(buf, "\"caches\":[{\"name\":\"malloc-") != NULL);
    CHECK(strstr(buf, "{\"name\":\"slabinfo \\\"quoted\\\\name\\\"\",\"object_size\":48,\"objects_active\":1,") != NULL);
    CHECK(strstr(buf, "\"pageblock_type\":\"SLAB\"") != NULL);
    close(fd);
    sl_cache_free(c, p);
    sl_cache_destroy(c);
}

int main(void)
{
    test_cache();
    test_malloc_class();
    test_malloc_collected();
    test_malloc_placement();
    test_outputs();
    CHECK(check_every_row("at the end") > 0);
    return t_done("slabinfo");
}
