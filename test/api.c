/* API conformance of the malloc family through the sl_ names (so the same
 * test runs in the override build and under the sanitizers). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "sluice.h"
#include "t.h"

static int aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static void test_sizes(void)
{
    /* every size from 0 to 40 KiB, then powers of two and odd sizes up to 64 MiB:
     * aligned, usable, writable, and distinct */
    for (size_t n = 0; n <= 40000; n += (n < 2048 ? 1 : 61)) {
        unsigned char *p = sl_malloc(n);
        CHECK(p != NULL);
        if (!p)
            return;
        CHECK(aligned(p, n >= 16 || n == 0 ? 16 : 8));
        CHECK(sl_usable_size(p) >= n);
        memset(p, 0xab, n);
        sl_free(p);
    }
    for (size_t n = 1; n <= ((size_t)64 << 20); n *= 2) {
        for (int d = -1; d <= 1; d++) {
            size_t m = n + (size_t)d;
            if (!m)
                continue;
            unsigned char *p = sl_malloc(m);
            CHECK(p != NULL && aligned(p, 16) && sl_usable_size(p) >= m);
            p[0] = 1;
            p[m - 1] = 2;
            sl_free(p);
        }
    }
    void *a = sl_malloc(0), *b = sl_malloc(0);
    CHECK(a && b && a != b); /* glibc: malloc(0) is a unique pointer */
    sl_free(a);
    sl_free(b);
    sl_free(NULL);
}

/* malloc(0) and its kin: unique slots of zones (zero.h). More than one
 * zone's worth (131072 slots) are live at once, every pointer is distinct,
 * a freed slot comes back only after the cursor went round, and each
 * works with realloc, usable_size, free_sized and bulk free. */
static int cmp_ptr(const void *x, const void *y)
{
    uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
    return a < b ? -1 : a > b;
}

static void test_zero_size(void)
{
    enum { N = 300000 };
    void **v = sl_malloc(N * sizeof *v);
    for (size_t i = 0; i < N; i++) {
        v[i] = i % 3 == 0 ? sl_malloc(0) : i % 3 == 1 ? sl_calloc(i, 0) : sl_realloc(NULL, 0);
        CHECK(v[i] != NULL && aligned(v[i], 16));
    }
    CHECK_EQ(sl_usable_size(v[7]), 0);
    void **sorted = sl_malloc(N * sizeof *v);
    memcpy(sorted, v, N * sizeof *v);
    qsort(sorted, N, sizeof *v, cmp_ptr);
    size_t dup = 0;
    for (size_t i = 1; i < N; i++)
        dup += sorted[i] == sorted[i - 1];
    CHECK_EQ(dup, 0);
    sl_free(sorted);
    sl_check();
    void *freed = v[5];
    sl_free(v[5]);
    v[5] = sl_malloc(0);
    CHECK(v[5] != freed); /* next-fit: not handed straight back */
    v[6] = sl_realloc(v[6], 100); /* grows out of the zone */
    CHECK(v[6] != NULL && sl_usable_size(v[6]) >= 100);
    memset(v[6], 1, 100);
    v[6] = sl_realloc(v[6], 0); /* glibc: frees, NULL */
    CHECK(v[6] == NULL);
    sl_free_sized(v[9], 0);
    v[9] = NULL;
    sl_free_bulk(v, N / 2); /* not slab objects: each goes to sl_free */
    for (size_t i = N / 2; i < N; i++)
        sl_free(v[i]);
    sl_free(v);
    void *bulk[8];
    CHECK_EQ(sl_alloc_bulk(0, 8, bulk), 8); /* size 0 in bulk: zero-size slots too */
    CHECK_EQ(sl_usable_size(bulk[3]), 0);
    sl_free_bulk(bulk, 8);
    sl_check();
}

/* Does the mapping holding p carry VM_HUGEPAGE ("hg" in smaps' VmFlags)?
 * -1 if /proc/self/smaps cannot say. */
static int thp_hinted(const void *p)
{
    char line[512];
    return proc_mapping_line(p, "VmFlags:", line, sizeof line) ? strstr(line, " hg") != NULL : -1;
}

/* Bytes of a "Key: N kB" field of the mapping holding p; -1 if unknown. */
static long long smaps_bytes(const void *p, const char *key)
{
    char line[512];
    return proc_mapping_line(p, key, line, sizeof line) ? atoll(line + strlen(key)) * 1024 : -1;
}

/* The hugepage coverage gauges agree with the kernel's smaps: with one
 * huge mapping alive (the cache emptied, the teardown queue flushed), the
 * huge_* gauges are its Rss and AnonHugePages. */
static void test_thp_coverage(void)
{
    sl_purge();
    sl_flush();
    size_t n = 64u << 20;
    char *big = sl_malloc(n);
    CHECK(big != NULL);
    memset(big, 1, n);
    void *small = sl_malloc(100);
    long long rss0 = smaps_bytes(big, "Rss:"), thp0 = smaps_bytes(big, "AnonHugePages:");
    long long rss = (long long)sl_stat("huge_rss_bytes"), thp = (long long)sl_stat("huge_thp_bytes");
    long long rss1 = smaps_bytes(big, "Rss:"), thp1 = smaps_bytes(big, "AnonHugePages:");
    CHECK(rss0 >= (long long)n && (rss == rss0 || rss == rss1)); /* khugepaged may act between reads */
    CHECK(thp == thp0 || thp == thp1);
    CHECK(sl_stat("block_rss_bytes") > 0);
    CHECK(sl_stat("block_thp_bytes") <= sl_stat("block_rss_bytes"));
    sl_free(small);
    sl_free(big);
}

/* Transparent hugepages are asked for (MADV_HUGEPAGE) on huge mappings of
 * 64 MiB and more only: a few-MiB buffer touched sparsely would fault in
 * whole 2 MiB pages. */
static void test_thp_hint(void)
{
    FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!thp) {
        printf("api: no transparent hugepages in this kernel: THP hint not tested\n");
        return;
    }
    fclose(thp);
    char *small = sl_malloc(8u << 20), *big = sl_malloc(64u << 20);
    CHECK(small && big);
    small[0] = big[0] = 1;
    CHECK_EQ(thp_hinted(small), 0);
    CHECK_EQ(thp_hinted(big), 1);
    sl_free(small);
    sl_free(big);
}

static void test_errno(void)
{
    errno = 1234;
    void *p = sl_malloc(100);
    CHECK_EQ(errno, 1234); /* success leaves errno alone */
    sl_free(p);
    p = sl_malloc(5 << 20);
    CHECK_EQ(errno, 1234);
    sl_free(p);
    CHECK_EQ(errno, 1234);

    errno = 0;
    CHECK(sl_malloc(SIZE_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(sl_malloc(PTRDIFF_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(sl_calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM); /* overflow */
    errno = 0;
    CHECK(sl_calloc((size_t)1 << 33, (size_t)1 << 33) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(sl_reallocarray(NULL, SIZE_MAX / 4, 8) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(sl_aligned_alloc(3, 64) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(sl_aligned_alloc(0, 64) == NULL && errno == EINVAL);
    void *q = (void *)1;
    CHECK_EQ(sl_posix_memalign(&q, 24, 64), EINVAL);
    CHECK_EQ(sl_posix_memalign(&q, 4, 64), EINVAL); /* not a multiple of sizeof(void *) */
    CHECK(q == (void *)1);
    errno = 0;
    CHECK_EQ(sl_posix_memalign(&q, 64, SIZE_MAX), ENOMEM);
    errno = 0;
    CHECK(sl_memalign(SIZE_MAX, 8) == NULL && errno == EINVAL);
    /* glibc: an alignment up to SIZE_MAX / 2 + 1 is valid, and one that
     * cannot be met is ENOMEM (tst-malloc-too-large) */
    errno = 0;
    CHECK(sl_memalign((size_t)1 << 63, 8) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(sl_memalign((size_t)1 << 62, 1) == NULL && errno == ENOMEM);
    /* posix_memalign returns ENOMEM and sets errno too, as glibc
     * (tst-malloc-thread-fail); EINVAL leaves errno alone */
    errno = 0;
    CHECK_EQ(sl_posix_memalign(&q, (size_t)1 << 62, 64), ENOMEM);
    CHECK_EQ(errno, ENOMEM);
    errno = 1234;
    CHECK_EQ(sl_posix_memalign(&q, 24, 64), EINVAL);
    CHECK_EQ(errno, 1234);

    /* realloc failure leaves the block intact */
    unsigned char *r = sl_malloc(100);
    memset(r, 7, 100);
    errno = 0;
    CHECK(sl_realloc(r, SIZE_MAX - 4096) == NULL && errno == ENOMEM);
    CHECK(r[99] == 7);
    sl_free(r);
}

static void test_calloc(void)
{
    for (size_t n = 1; n < (4u << 20); n = n * 3 + 1) {
        /* dirty the memory first so reuse must be zeroed */
        unsigned char *d = sl_malloc(n);
        memset(d, 0xff, n);
        sl_free(d);
        unsigned char *p = sl_calloc(1, n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += p[i] != 0;
        CHECK_EQ(bad, 0);
        sl_free(p);
    }
    CHECK(sl_calloc(0, 10) != NULL);
}

/* A medium request takes a parked run up to a quarter longer than it needs
 * (the page cache's best fit) instead of going to the shared page heap,
 * and calloc still clears all of what it asked for; a run more than a
 * quarter longer is not handed out. */
static void test_medium_fit(void)
{
    sl_purge(); /* the thread's page cache starts empty */
    unsigned char *a = sl_malloc(200 << 10); /* 50 pages, a run of 52 */
    memset(a, 0xff, 200 << 10);
    sl_free(a);
    unsigned char *b = sl_calloc(1, 180 << 10); /* a run of 48: takes the 52 */
    CHECK(b == a);
    CHECK_EQ(sl_usable_size(b), 52 << 12);
    size_t bad = 0;
    for (size_t i = 0; i < (180 << 10); i++)
        bad += b[i] != 0;
    CHECK_EQ(bad, 0);
    sl_free(b);
    sl_purge();
    unsigned char *c = sl_malloc(256 << 10); /* 64 pages */
    sl_free(c);
    unsigned char *d = sl_malloc(176 << 10); /* 44 pages: 64 is over a quarter more */
    CHECK(d != c);
    CHECK_EQ(sl_usable_size(d), 44 << 12);
    sl_free(d);
}

static void test_realloc(void)
{
    /* grow byte by byte through every regime, content preserved */
    size_t n = 1;
    unsigned char *p = sl_malloc(n);
    p[0] = 0;
    while (n < (6u << 20)) {
        size_t m = n + n / 3 + 1;
        p = sl_realloc(p, m);
        CHECK(p != NULL);
        if (!p)
            return;
        int ok = 1;
        for (size_t i = 0; i < n; i += 997)
            ok &= p[i] == (unsigned char)(i * 31);
        CHECK(ok);
        for (size_t i = 0; i < m; i++)
            p[i] = (unsigned char)(i * 31);
        n = m;
    }
    /* and back down */
    while (n > 1) {
        n /= 3;
        if (!n)
            n = 1;
        p = sl_realloc(p, n);
        CHECK(p[n - 1] == (unsigned char)((n - 1) * 31));
    }
    sl_free(p);

    CHECK(sl_realloc(sl_malloc(10), 0) == NULL); /* glibc: frees, NULL */
    p = sl_realloc(NULL, 50);
    CHECK(p != NULL);
    sl_free(p);

    /* a medium run grows in place when the next pages are free */
    uint64_t before = sl_stat("realloc_inplace");
    p = sl_malloc(40000);
    p = sl_realloc(p, 48000);
    p = sl_realloc(p, 44000);
    CHECK(sl_stat("realloc_inplace") >= before + 1);
    sl_free(p);

    /* an object that realloc grows past 16 KiB becomes a run (slab
     * objects up to 32 KiB would move at every class): 17000 and 20000
     * bytes are one run of 5 pages, but two classes */
    p = sl_malloc(16000);
    memset(p, 0x33, 16000);
    p = sl_realloc(p, 17000);
    memset(p + 16000, 0x44, 1000);
    unsigned char *q = sl_realloc(p, 20000);
    CHECK(q == p);
    CHECK(q[0] == 0x33 && q[15999] == 0x33 && q[16000] == 0x44 && q[16999] == 0x44);
    CHECK(sl_usable_size(q) == 20480);
    q = sl_realloc(q, 100); /* and back into a slab object */
    CHECK(q[0] == 0x33 && q[99] == 0x33 && sl_usable_size(q) == 112);
    sl_free(q);

    /* huge realloc moves pages, not bytes, and keeps them */
    p = sl_malloc(3u << 20);
    memset(p, 0x5a, 3u << 20);
    p = sl_realloc(p, 300u << 20);
    CHECK(p[0] == 0x5a && p[(3u << 20) - 1] == 0x5a);
    p[(300u << 20) - 1] = 1;
    p = sl_realloc(p, 5u << 20);
    CHECK(p[(3u << 20) - 1] == 0x5a);
    sl_free(p);
}

static void test_aligned(void)
{
    for (size_t a = 1; a <= ((size_t)64 << 20); a *= 2) {
        size_t sizes[] = { 1, 8, 100, a, a + 1, 3 * a / 2, 70000 };
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            if (sizes[i] > (256u << 20))
                continue;
            void *p = sl_aligned_alloc(a, sizes[i]);
            CHECK(p && aligned(p, a) && sl_usable_size(p) >= sizes[i]);
            memset(p, 1, sizes[i]);
            void *q = NULL;
            CHECK(sl_posix_memalign(&q, a < sizeof(void *) ? sizeof(void *) : a, sizes[i]) == 0 &&
                  aligned(q, a));
            void *m = sl_memalign(a, sizes[i]);
            CHECK(m && aligned(m, a));
            sl_free_aligned_sized(p, a, sizes[i]);
            sl_free(q);
            sl_free(m);
        }
    }
    void *m = sl_memalign(48, 10); /* glibc rounds to 64 */
    CHECK(m && aligned(m, 64));
    sl_free(m);
    void *v = sl_valloc(10);
    CHECK(v && aligned(v, 4096));
    sl_free(v);
    v = sl_pvalloc(10);
    CHECK(v && aligned(v, 4096) && sl_usable_size(v) >= 4096);
    sl_free(v);
    v = sl_pvalloc(0);
    CHECK(v && sl_usable_size(v) >= 4096);
    sl_free(v);
}

static void test_sized(void)
{
    size_t sizes[] = { 1, 16, 17, 100, 4000, 16384, 16385, 32768, 32769, 100000, 1u << 20, (1u << 20) + 1, 9u << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = sl_malloc(sizes[i]);
        sl_free_sized(p, sizes[i]);
        p = sl_calloc(1, sizes[i]);
        sl_free_sized(p, sizes[i]);
        p = sl_aligned_alloc(8192, sizes[i]);
        sl_free_aligned_sized(p, 8192, sizes[i]);
    }
    /* a run resized in place records its new size */
    void *r = sl_malloc(40000);
    r = sl_realloc(r, 45000);
    sl_free_sized(r, 45000);
    sl_free_sized(NULL, 5);
    CHECK(1);
}

static void test_giant(void)
{
    /* 64 GiB: reserved, touched sparsely, freed; the machine has 24 GiB */
    size_t n = (size_t)64 << 30;
    unsigned char *p = sl_malloc(n);
    CHECK(p != NULL);
    if (p) {
        for (size_t off = 0; off < n; off += (size_t)1 << 30)
            p[off] = 1;
        p[n - 1] = 2;
        CHECK(sl_usable_size(p) >= n);
        sl_free(p);
    }
}

#if SL_OVERRIDE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

static void *alloc_free_keep(void *arg)
{
    (void)arg;
    free(malloc(32));
    return malloc(32);
}
/* glibc's extensions, as sluice answers them */
static void test_mallopt(void)
{
    /* mallopt: the parameters that mean something here, 0 for the rest */
    int64_t o;
    CHECK_EQ(mallopt(M_ARENA_MAX, 4), 1);
    CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1);
    CHECK_EQ(mallopt(M_TRIM_THRESHOLD, 128 << 10), 1);
    CHECK_EQ(sl_ctl("opt.dirty_decay_ms", &o, &(size_t){ sizeof o }, NULL, 0), 0);
    CHECK(o != 0); /* a size: nothing changed */
    CHECK_EQ(mallopt(M_TRIM_THRESHOLD, 0), 1);
    CHECK_EQ(sl_ctl("opt.dirty_decay_ms", &o, &(size_t){ sizeof o }, NULL, 0), 0);
    CHECK_EQ(o, 0); /* 0: free memory goes back at once */
    CHECK_EQ(mallopt(M_TRIM_THRESHOLD, -1), 1);
    CHECK_EQ(sl_ctl("opt.purge", &o, &(size_t){ sizeof o }, NULL, 0), 0);
    CHECK_EQ(o, 2); /* -1: never (SLUICE_PURGE=off) */
    CHECK_EQ(mallopt(M_PERTURB, 1), 0); /* a knob sluice does not have */
    int64_t back = 1000;
    CHECK_EQ(sl_ctl("opt.dirty_decay_ms", NULL, NULL, &back, sizeof back), 0);
    back = 0; /* free */
    CHECK_EQ(sl_ctl("opt.purge", NULL, NULL, &back, sizeof back), 0);
}

static void test_glibc_extensions(void)
{

    void *volatile big = malloc(12u << 20); /* volatile: the pair is not elided */
    free(big); /* into the huge cache */
    CHECK_EQ(malloc_trim(0), 1); /* released something */
    CHECK_EQ(malloc_trim(0), 0); /* nothing left to release */
    void *volatile p = malloc(1000);
    struct mallinfo2 m = mallinfo2();
    CHECK(m.arena > 0 && m.uordblks > 0 && m.uordblks <= m.arena);
    free(p);
    /* uordblks counts bytes in use, by size class: it follows the program
     * (threads that come and go leave nothing behind: tst-malloc-tcache-leak) */
    size_t before = mallinfo2().uordblks;
    void *v[100];
    for (int i = 0; i < 100; i++)
        v[i] = malloc(1000); /* size class 1024 */
    size_t during = mallinfo2().uordblks;
    for (int i = 0; i < 100; i++)
        free(v[i]);
    CHECK_EQ(during - before, 100 * 1024);
    CHECK_EQ(mallinfo2().uordblks, before);
    void *volatile run = malloc(100000);
    CHECK_EQ(mallinfo2().uordblks - before, 26 * 4096); /* a run: 25 pages rounded to an eighth of 16 */
    free(run);
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        pthread_create(&t, NULL, alloc_free_keep, NULL);
        void *kept;
        pthread_join(t, &kept);
        free(kept);
    }
    CHECK(mallinfo2().uordblks <= before + 4096);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo old = mallinfo();
#pragma GCC diagnostic pop
    CHECK(old.uordblks > 0 && (size_t)old.uordblks <= (size_t)old.arena);
}

/* malloc_stats prints glibc's lines first, and a thread cancelled while it
 * writes leaves no lock behind (tst-malloc-stats-cancellation) */
static void *stats_forever(void *arg)
{
    (void)arg;
    for (;;) {
        malloc_stats(); /* cancellation is held off inside */
        pthread_testcancel();
    }
    return NULL;
}

static void test_malloc_stats(void)
{
    int fds[2], saved = dup(2);
    CHECK(pipe(fds) == 0);
    dup2(fds[1], 2);
    malloc_stats();
    dup2(saved, 2);
    close(fds[1]);
    char buf[8192];
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    buf[n > 0 ? n : 0] = 0;
    CHECK(strstr(buf, "Arena 0:\nsystem bytes     = ") != NULL);
    CHECK(strstr(buf, "Total (incl. mmap):") != NULL);
    CHECK(strstr(buf, "max mmap bytes   = ") != NULL);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    for (int i = 0; i < 20; i++) {
        pthread_t t;
        pthread_create(&t, NULL, stats_forever, NULL);
        usleep(2000);
        pthread_cancel(t);
        pthread_join(t, NULL);
        free(malloc(100000)); /* no lock was left held */
        malloc_stats();
    }
    dup2(saved, 2);
    close(devnull);
    close(saved);
    CHECK(1);
}
#endif

/* sl_stats_json: one object on one line, every counter and gauge under its
 * sl_stat name, the values of this moment (between two sl_stat reads). */
static void test_stats_json(void)
{
    void *keep = sl_malloc(100);
    uint64_t before = sl_stat("alloc_small");
    int fds[2];
    CHECK(pipe(fds) == 0);
    sl_stats_json(fds[1]);
    close(fds[1]);
    uint64_t after = sl_stat("alloc_small");
    static char text[65536];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof text - 1 && (r = read(fds[0], text + n, sizeof text - 1 - n)) > 0)
        n += (size_t)r;
    close(fds[0]);
    text[n] = 0;
    const char *head = "{\"version\":1,\"counters\":{";
    CHECK(!strncmp(text, head, strlen(head)));
    CHECK(n > 2 && !strcmp(text + n - 2, "}\n"));
    CHECK(strchr(text, '\n') == text + n - 1);
    size_t missing = 0;
    for (size_t i = 0; sl_stat_name(i); i++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\":", sl_stat_name(i));
        missing += !strstr(text, key);
    }
    CHECK_EQ(missing, 0);
    const char *v = strstr(text, "\"alloc_small\":");
    uint64_t got = v ? strtoull(v + 14, NULL, 10) : 0;
    CHECK(got >= before && got <= after);
    CHECK(strstr(text, "\"reconciliation\":{\"in_use_bytes\":") != NULL);
    sl_free(keep);
}

static void test_stats_and_purge(void)
{
    void *ps[1000];
    uint64_t a0 = sl_stat("alloc_small");
    for (int i = 0; i < 1000; i++)
        ps[i] = sl_malloc(48);
    CHECK(sl_stat("alloc_small") >= a0 + 1000);
    for (int i = 0; i < 1000; i++)
        sl_free(ps[i]);
    void *h = sl_malloc(10u << 20);
    sl_free(h);
    CHECK(sl_stat("huge_cached_bytes") >= (10u << 20));
    sl_purge();
    CHECK_EQ(sl_stat("huge_cached_bytes"), 0);
    CHECK(sl_stat("mapped_bytes") > 0);
    CHECK(sl_stat_name(0) != NULL);
    size_t i = 0;
    while (sl_stat_name(i))
        i++;
    CHECK(i > 20);
    CHECK_EQ(sl_stat("no_such_counter"), 0);
}

/* The huge cache: best fit, an exact fit taken over a bigger one, and at
 * most 64 mappings kept (huge.c's HUGE_CACHE_ENTRIES; their bytes, 160
 * MiB here, are under its byte cap). */
static void test_huge_cache(void)
{
    sl_purge();
    char *big = sl_malloc(6u << 20), *two = sl_malloc(2u << 20);
    sl_free(big);
    sl_free(two);
    char *again = sl_malloc((2u << 20) - 4096); /* one 2 MiB granule: the exact fit */
    CHECK(again == two);
    char *b2 = sl_malloc(5u << 20);
    CHECK(b2 == big);
    sl_free(again);
    sl_free(b2);
    sl_purge();
    enum { N = 80 };
    void *v[N];
    uint64_t unmaps = sl_stat("huge_unmap");
    for (int i = 0; i < N; i++)
        CHECK((v[i] = sl_malloc(2u << 20)) != NULL);
    for (int i = 0; i < N; i++)
        sl_free(v[i]);
    CHECK_EQ(sl_stat("huge_cached_bytes"), (uint64_t)64 << 21);
    CHECK(sl_stat("huge_unmap") >= unmaps + N - 64);
    sl_purge();
    CHECK_EQ(sl_stat("huge_cached_bytes"), 0);
}

static void test_many_objects(void)
{
    /* 200k objects of mixed sizes, all content checked, freed in a shuffled order */
    enum { N = 200000 };
    static unsigned char *ps[N];
    static size_t ns[N];
    unsigned long long seed = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        ns[i] = (t_rand(&seed) % 8 == 0) ? t_rand(&seed) % 70000 : t_rand(&seed) % 300;
        ps[i] = sl_malloc(ns[i]);
        memset(ps[i], (int)(i & 0xff), ns[i]);
    }
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(t_rand(&seed) % (unsigned long long)(i + 1));
        unsigned char *tp = ps[i];
        size_t tn = ns[i];
        ps[i] = ps[j], ns[i] = ns[j];
        ps[j] = tp, ns[j] = tn;
    }
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (ns[i] && ps[i][ns[i] - 1] != ps[i][0])
            bad++;
        sl_free(ps[i]);
    }
    CHECK_EQ(bad, 0);
}

/* A thread frees the objects of one size it allocated, and exits. */
static void *churn_size(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    void *ps[500];
    for (int i = 0; i < 500; i++)
        ps[i] = sl_malloc(n);
    for (int i = 0; i < 500; i++)
        sl_free(ps[i]);
    return NULL;
}

/* Frees every pointer of a NULL-terminated array: another thread's objects. */
static void *free_all(void *arg)
{
    for (void **p = arg; *p; p++)
        sl_free(*p);
    return NULL;
}

static long long live_slabs(void) { return (long long)(sl_stat("slab_new") - sl_stat("slab_release")); }

/* The magazines (slab/heap.h): a small free by the owner goes to the
 * heap's magazine of its class, and the next malloc of that class gets it
 * back, whichever slab it is of; the magazine's objects are free to
 * sl_check and to mallinfo; a thread that exits leaves none behind. */
static void test_magazine(void)
{
    enum { N = 300 }; /* 64-byte objects: 1-page slabs of 64, so several slabs */
    void *ps[N];
    for (int i = 0; i < N; i++)
        ps[i] = sl_malloc(64);
    /* an object of the first, full slab comes straight back, not one of the
     * current slab's free objects */
    void *x = ps[3];
    sl_free(x);
    void *y = sl_malloc(64);
    CHECK(y == x);
    /* LIFO across slabs */
    sl_free(ps[10]);
    sl_free(ps[200]);
    CHECK(sl_malloc(64) == ps[200]);
    CHECK(sl_malloc(64) == ps[10]);
    for (int i = 0; i < 20; i++)
        sl_free(ps[i * 7]);
    CHECK(sl_check() == 0);
    for (int i = 0; i < 20; i++)
        ps[i * 7] = sl_malloc(64);
    for (int i = 0; i < N; i++)
        sl_free(ps[i]);
    CHECK(sl_check() == 0);
    /* a freed object carries the cookie in its second word (slab/heap.h)
     * and malloc clears it, from the magazine or from a slab */
    void *c1 = sl_malloc(64);
    ((volatile uint64_t *)c1)[1] = 7;
    sl_free(c1);
    uint64_t cookie = ((volatile uint64_t *)c1)[1]; /* a peek at a freed object */
    CHECK(cookie != 0 && cookie != 7);
    void *c2 = sl_malloc(64);
    CHECK(c2 == c1);
    CHECK(((volatile uint64_t *)c2)[1] == 0);
    CHECK(sl_realloc(c2, 60) == c2); /* in place */
    sl_free(c2);
    CHECK(sl_check() == 0);
    /* remote frees find their slab's remote list through the page tags,
     * which give each page's place in its slab: 480-byte objects live in
     * 8-page slabs, so most of them are not on a slab's first page */
    static void *rs[401];
    uint64_t remote0 = sl_stat("free_remote");
    for (int i = 0; i < 400; i++)
        rs[i] = sl_malloc(480);
    pthread_t ft;
    pthread_create(&ft, NULL, free_all, rs);
    pthread_join(ft, NULL);
    CHECK_EQ(sl_stat("free_remote") - remote0, 400);
    CHECK(sl_check() == 0); /* each object on its own slab's remote list */
    for (int i = 0; i < 400; i++)
        rs[i] = sl_malloc(480); /* collects them */
    CHECK(sl_check() == 0);
    for (int i = 0; i < 400; i++)
        sl_free(rs[i]);
    /* sl_purge empties the caller's magazines into their slabs, so the
     * slabs that only magazine objects kept come free and are released.
     * 12000 bytes: 2 objects a slab, 5 in a magazine (64 KiB); the first
     * five freed stay in it, keeping three slabs. */
    void *hold[32]; /* live: the magazine of the class starts empty */
    for (int i = 0; i < 32; i++)
        hold[i] = sl_malloc(12000);
    sl_purge();
    long long slabs0 = live_slabs();
    void *big[64];
    for (int i = 0; i < 64; i++)
        big[i] = sl_malloc(12000);
    for (int i = 0; i < 64; i++)
        sl_free(big[i]);
    sl_purge();
    CHECK(live_slabs() <= slabs0 + 1); /* a new current slab at most */
    for (int i = 0; i < 32; i++)
        sl_free(hold[i]);
    /* an exiting thread's magazines go back to their slabs, so its slabs
     * come free and are released */
    pthread_t t;
    pthread_create(&t, NULL, churn_size, (void *)(uintptr_t)208); /* the first thread's setup keeps a slab */
    pthread_join(t, NULL);
    sl_purge();
    long long before = live_slabs();
    /* its heap is taken over by the next thread, which uses another class:
     * a magazine of that class left behind would keep a slab */
    pthread_create(&t, NULL, churn_size, (void *)(uintptr_t)1100);
    pthread_join(t, NULL);
    sl_purge();
    CHECK_EQ(live_slabs(), before);
    CHECK(sl_check() == 0);
}

/* A burst of frees larger than a magazine (slab/heap.c: mag_grow): the
 * magazine grows, so the next burst of as many stays in it, and the
 * mallocs after it get the objects back in the reverse order of their
 * frees, with no slab made or released; emptied (sl_purge), it starts
 * again at its depth, 256 objects of 32 bytes. */
static void test_magazine_burst(void)
{
    enum { N = 1500, DEPTH = 256 };
    static void *ps[N];
    sl_purge();
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            ps[i] = sl_malloc(32);
        uint64_t made = sl_stat("slab_new"), released = sl_stat("slab_release");
        for (int i = 0; i < N; i++)
            sl_free(ps[i]);
        CHECK(sl_check() == 0);
        if (round == 0)
            continue;
        int lifo = 0;
        for (int i = N - 1; i >= 0; i--) {
            void *q = sl_malloc(32);
            lifo += q == ps[i];
            ps[i] = q;
        }
        CHECK_EQ(lifo, N); /* all of them from the magazine */
        CHECK_EQ(sl_stat("slab_new"), made);
        CHECK_EQ(sl_stat("slab_release"), released);
        for (int i = 0; i < N; i++)
            sl_free(ps[i]);
    }
    sl_purge(); /* the magazine empty, at its depth again */
    for (int i = 0; i < DEPTH + 40; i++) /* fewer past it than a burst */
        ps[i] = sl_malloc(32);
    for (int i = 0; i < DEPTH + 40; i++)
        sl_free(ps[i]);
    CHECK(sl_malloc(32) == ps[DEPTH - 1]); /* the last that fitted */
    CHECK(sl_check() == 0);
    sl_purge();
}

/* A thread with no heap that frees a medium run (a consumer of runs
 * another thread made) gets a heap, as it does for a small object, so
 * that its frees park runs in its own page cache instead of taking the
 * page heap lock each (slab/heap_free.c: free_block_other). */
static void *free_one(void *p)
{
    sl_free(p);
    return NULL;
}
static void test_consumer_run(void)
{
    void *p = sl_malloc(100000);
    uint64_t heaps = sl_stat("heap_new") + sl_stat("heap_reuse");
    pthread_t t;
    pthread_create(&t, NULL, free_one, p);
    pthread_join(t, NULL);
    CHECK_EQ(sl_stat("heap_new") + sl_stat("heap_reuse"), heaps + 1);
    CHECK(sl_check() == 0);
}

/* A magazine of a class above 4 KiB holds 32 objects (size_class.h:
 * MAG_MIN_OBJECTS): 32 objects of 16 KiB (two a slab) freed and asked for
 * again stay in it, no slab given back or made; with 16, half of them
 * went back to their slabs, which emptied and were given back. */
static void test_magazine_large(void)
{
    enum { N = 32 };
    static void *ps[N];
    sl_purge();
    for (int i = 0; i < N; i++)
        ps[i] = sl_malloc(16384);
    uint64_t made = sl_stat("slab_new"), released = sl_stat("slab_release");
    for (int i = 0; i < N; i++)
        sl_free(ps[i]);
    int lifo = 0;
    for (int i = N - 1; i >= 0; i--) {
        void *q = sl_malloc(16384);
        lifo += q == ps[i];
        ps[i] = q;
    }
    CHECK_EQ(lifo, N); /* all of them from the magazine */
    CHECK_EQ(sl_stat("slab_release"), released);
    CHECK_EQ(sl_stat("slab_new"), made);
    for (int i = 0; i < N; i++)
        sl_free(ps[i]);
    CHECK(sl_check() == 0);
    sl_purge();
}

/* A burst far past a magazine at its room (1 KiB objects: 64, its depth
 * and its room): each time it fills, half of it goes back to the slabs
 * (slab/heap_free.c: mag_spill), so the last objects freed are the ones
 * in it and the next malloc gets the very last (without the spill, the
 * 64th, the last that fitted); every object is free once, on its slab or
 * in the magazine, and the class's counts add up. */
static void test_magazine_spill(void)
{
    enum { N = 600, ROOM = 64 };
    static void *ps[N];
    sl_purge();
    for (int i = 0; i < N; i++)
        ps[i] = sl_malloc(1024);
    uint64_t v = 0;
    size_t len = sizeof v;
    CHECK_EQ(sl_ctl("cache.malloc-1024.objects_active", &v, &len, NULL, 0), 0);
    uint64_t active = v;
    for (int i = 0; i < N; i++)
        sl_free(ps[i]);
    CHECK(sl_check() == 0);
    CHECK_EQ(sl_ctl("cache.malloc-1024.objects_active", &v, &len, NULL, 0), 0);
    CHECK_EQ(v, active - N);
    void *q = sl_malloc(1024);
    CHECK(q == ps[N - 1]);
    CHECK(q != ps[ROOM - 1]);
    sl_free(q);
    CHECK(sl_check() == 0);
    sl_purge();
}

int main(void)
{
    test_sizes();
    test_zero_size();
    test_thp_hint();
    test_thp_coverage();
    test_errno();
    test_calloc();
    test_realloc();
    test_medium_fit();
    test_aligned();
    test_sized();
    test_giant();
    test_many_objects();
    test_magazine();
    test_magazine_burst();
    test_magazine_large();
    test_consumer_run();
    test_magazine_spill();
    test_stats_and_purge();
    test_huge_cache();
    test_stats_json();
#if SL_OVERRIDE
    test_mallopt();
    test_glibc_extensions();
    test_malloc_stats();
#endif
    CHECK(sl_check() == 0);
    return t_done("api");
}
