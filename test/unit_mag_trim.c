/* Unit: the magazine trim (src/slab/mag_trim.h, heap_free.c heap_mag_trim).
 *   - the policy with made-up counts: a magazine no malloc reached since
 *     the last pass gives back three quarters of its objects (rounded up),
 *     one that malloc emptied or popped past its count keeps them, the
 *     objects out counted mod 2^64;
 *   - on this thread's heap, passes at made-up times: the objects given
 *     back are the bottom ones (the last freed stays on top, malloc pops
 *     it next), the counts add up (allocations - frees of the class is
 *     what the test holds), sl_check passes, a fully trimmed magazine
 *     goes idle and its slabs come free, a used magazine keeps its objects;
 *   - a second free of an object given back is reported (a child);
 *   - with no call from the test, the allocation slow paths run the pass
 *     once per tick (SLUICE_DIRTY_DECAY_MS=40: a 10 ms tick; a child).
 * Without the trim the second and the last fail (nothing leaves the
 * magazine); without its clear of the live bit the third. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "../include/sluice.h"
#include "../src/slab/heap_mag.h"
#include "t.h"

#define SZ 48
#define N  200

static unsigned cls_of(size_t n) { return size_class_small(n); }

static void policy(void)
{
    struct mag_trim_seen w = { 0, 0, 0 }; /* a fresh heap's */
    CHECK_EQ(mag_trim_take(&w, 50, 0), 0); /* a first look: nothing held a tick yet */
    CHECK(w.count == 50 && w.out == 0 && w.low == 50);
    CHECK_EQ(mag_trim_take(&w, 50, 0), 38); /* untouched a tick: 3/4 of 50, rounded up */
    CHECK(w.count == 12 && w.out == 38 && w.low == 12);
    CHECK_EQ(mag_trim_take(&w, 12, 38), 9);
    CHECK_EQ(mag_trim_take(&w, 3, 47), 3); /* 3 - 3/4 */
    CHECK(w.count == 0 && w.out == 50 && w.low == 0);
    CHECK_EQ(mag_trim_take(&w, 0, 50), 0);
    w = (struct mag_trim_seen){ .count = 1, .out = 7, .low = 1 };
    CHECK_EQ(mag_trim_take(&w, 1, 7), 1); /* the last one too */

    /* used: 30 out (and 30 pushed back) of 40: at least 10 stayed all through */
    w = (struct mag_trim_seen){ .count = 40, .out = 100, .low = 40 };
    CHECK_EQ(mag_trim_take(&w, 40, 130), 8);
    CHECK(w.count == 32 && w.out == 138 && w.low == 32);
    /* the same 30 out, looked at twice on the way: the bound is closer */
    w = (struct mag_trim_seen){ .count = 40, .out = 100, .low = 40 };
    mag_trim_look(&w, 36, 104);
    CHECK_EQ(w.low, 36);
    mag_trim_look(&w, 40, 108); /* 36 - 4 */
    CHECK_EQ(w.low, 32);
    CHECK_EQ(mag_trim_take(&w, 40, 130), 14); /* 40 - 22 = 18 */
    /* a look never raises the bound, and the count now caps it */
    w = (struct mag_trim_seen){ .count = 40, .out = 100, .low = 20 };
    mag_trim_look(&w, 40, 100);
    CHECK_EQ(w.low, 20);
    mag_trim_look(&w, 5, 100);
    CHECK_EQ(w.low, 5);
    /* popped past its count: emptied within the tick, keeps all */
    w = (struct mag_trim_seen){ .count = 40, .out = 100, .low = 40 };
    CHECK_EQ(mag_trim_take(&w, 60, 140), 0);
    CHECK(w.count == 60 && w.out == 140 && w.low == 60);
    /* malloc found it empty (heap_alloc_small_slow makes low 0) */
    w = (struct mag_trim_seen){ .count = 60, .out = 100, .low = 0 };
    CHECK_EQ(mag_trim_take(&w, 60, 100), 0);
    /* out wraps */
    w = (struct mag_trim_seen){ .count = 10, .out = UINT64_MAX - 2, .low = 10 };
    CHECK_EQ(mag_trim_take(&w, 10, 2), 4); /* 5 out: low 5, 5 - 5/4 */
    CHECK(w.out == 6);
}

/* h's allocations less its frees of class cls: what the program holds */
static uint64_t held(struct heap *h, unsigned cls) { return heap_count_alloc(h, cls) - heap_count_free(h, cls); }

static void on_heap(void)
{
    void *p[N];
    unsigned cls = cls_of(SZ);
    for (int i = 0; i < N; i++)
        CHECK((p[i] = sl_malloc(SZ)) != NULL);
    struct heap *h = tls_heap;
    uint64_t base = held(h, cls) - N; /* anything this thread held before */
    for (int i = 0; i < N; i++)
        sl_free(p[i]);
    unsigned c0 = mag_count(h, cls);
    CHECK(c0 >= 64); /* the magazine took frees (and sent the rest to the slabs) */
    CHECK_EQ(held(h, cls), base);

    uint64_t t = 1000000, trimmed0 = sl_stat("mag_trim_objects");
    heap_mag_trim(h, t); /* the first look */
    unsigned c1 = mag_count(h, cls);
    heap_mag_trim(h, t += 250); /* nothing reached it meanwhile */
    unsigned c2 = mag_count(h, cls);
    CHECK_EQ(c2, c1 / 4);
    CHECK(c2 > 0);
    CHECK(sl_stat("mag_trim_objects") - trimmed0 >= c1 - c2); /* counted (this heap's stats) */
    CHECK_EQ(held(h, cls), base); /* the counts add up (mag_adj) */
    CHECK_EQ(sl_check(), 0);
    CHECK(h->mag_first[cls] == p[N - 1]); /* the last freed stays on top */
    void *q = sl_malloc(SZ);
    CHECK(q == p[N - 1]);
    CHECK_EQ(held(h, cls), base + 1);
    sl_free(q);

    /* used within the tick: mallocs past its count keep everything */
    heap_mag_trim(h, t += 250);
    unsigned c3 = mag_count(h, cls);
    void *r[N];
    for (int i = 0; i < N; i++)
        r[i] = sl_malloc(SZ);
    for (int i = 0; i < N; i++)
        sl_free(r[i]);
    unsigned c4 = mag_count(h, cls);
    heap_mag_trim(h, t += 250);
    CHECK_EQ(mag_count(h, cls), c4);
    (void)c3;

    /* idle: trimmed to nothing, it goes idle, and its slabs come free */
    static struct heap_usage u0, u1; /* big: off the stack */
    heap_usage(&u0);
    for (int i = 0; i < 8 && mag_count(h, cls); i++)
        heap_mag_trim(h, t += 250);
    CHECK_EQ(mag_count(h, cls), 0);
    CHECK(h->mag_top[cls] == MAG_IDLE);
    CHECK(!(h->mags_held[cls / 64] >> (cls % 64) & 1));
    CHECK_EQ(held(h, cls), base);
    CHECK_EQ(sl_check(), 0);
    heap_usage(&u1);
    CHECK_MSG(u1.class_slabs[cls] < u0.class_slabs[cls], "slabs %zu -> %zu", u0.class_slabs[cls], u1.class_slabs[cls]);
}

/* A child: an object the trim gave back is freed again. */
static void double_free_child(void)
{
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = sl_malloc(SZ);
    for (int i = 0; i < N; i++)
        sl_free(p[i]);
    struct heap *h = tls_heap;
    unsigned cls = cls_of(SZ);
    heap_mag_trim(h, 1000000);
    heap_mag_trim(h, 1000250);
    CHECK(mag_count(h, cls) < 64);
    sl_free(p[0]); /* the first freed: at the bottom, given back */
    exit(0);
}

/* A child with a 10 ms tick: the slow paths of another class's mallocs
 * trim the idle magazine. */
static void tick_child(void)
{
    void *p[N];
    unsigned cls = cls_of(SZ);
    for (int i = 0; i < N; i++)
        p[i] = sl_malloc(SZ);
    for (int i = 0; i < N; i++)
        sl_free(p[i]);
    struct heap *h = tls_heap;
    unsigned c0 = mag_count(h, cls);
    void *b[64];
    /* each round empties a slab or two of 2 KiB objects: refills, slow paths */
    bool trimmed = T_WAIT((({
                               for (int i = 0; i < 64; i++)
                                   b[i] = sl_malloc(2000);
                               sl_free_bulk(b, 64);
                           }),
                           mag_count(h, cls) < c0 / 2),
                          20000);
    CHECK(trimmed);
    CHECK_EQ(sl_check(), 0);
    exit(t_done("unit_mag_trim tick"));
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "double_free"))
        double_free_child();
    if (argc > 1 && !strcmp(argv[1], "tick"))
        tick_child();
    policy();
    on_heap();

    char out[4096];
    size_t len;
    int st = t_run_self(argv[0], "double_free", "", out, sizeof out, &len);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK_MSG(strstr(out, "sluice: double free of 0x") != NULL, "child said: %s", out);
    st = t_run_self(argv[0], "tick", "SLUICE_DIRTY_DECAY_MS=40", out, sizeof out, &len);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child said: %s", out);
    return t_done("unit_mag_trim");
}
