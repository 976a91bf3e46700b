/* A thread's page cache (page/pcache.c) grows its budget while the thread
 * reuses what it drains, and falls back to the least on a drop: one
 * thread replaces runs of 32-256 KiB at random (bench_sizes' medium band)
 * and its cache comes to hold more than the least budget's 256 KiB; then it
 * frees everything (a drop, the heap sparse) and its cache holds at most
 * the least budget and one run. The policy (pcache_budget.h) is unit-tested in
 * unit_pcache_budget with a fake clock; this shows the mechanism. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sluice.h"
#include "t.h"

#define KiB         1024u
#define LEAST       (256u * KiB) /* PCACHE_BUDGET_MIN pages */
#define LONGEST_RUN (256u * KiB)
enum { LIVE = 400, REPLACE = 20000 };

static void *live[LIVE];
static unsigned long long seed = 42;

static void replace(unsigned k)
{
    unsigned long long r = t_rand(&seed);
    sl_free(live[k]);
    size_t n = 32 * KiB + (size_t)(r >> 20) % (224 * KiB);
    live[k] = sl_malloc(n);
    CHECK(live[k] != NULL);
    ((char *)live[k])[0] = 1;
}

/* A medium malloc takes a parked run of its length, or one up to a
 * quarter longer (page.h: pcache_fit_run), from the thread's cache
 * without a refill; a run longer than that, or a 256 KiB request (the
 * longest cached), is not handed out. */
static void fit(void)
{
    uint64_t refills = sl_stat("pcache_refill");
    void *p = sl_malloc(40 * KiB); /* 10 pages */
    void *guard = sl_malloc(8 * KiB); /* keeps p from merging back */
    CHECK(p && guard);
    sl_free(p);
    uint64_t before = sl_stat("pcache_refill");
    void *q = sl_malloc(36 * KiB); /* 9 pages: up to 11 fit */
    CHECK(q == p);
    CHECK_EQ(sl_usable_size(q), 40 * KiB);
    CHECK_EQ(sl_stat("pcache_refill"), before);
    sl_free(q);
    void *r = sl_malloc(28 * KiB); /* 7 pages: up to 8 fit, not 10 */
    CHECK(r != p);
    void *s = sl_malloc(40 * KiB); /* the parked run, exactly */
    CHECK(s == p);
    sl_free(s);
    void *l = sl_malloc(LONGEST_RUN); /* 64 pages, the longest cached */
    CHECK(l != NULL);
    sl_free(l);
    void *l2 = sl_malloc(LONGEST_RUN - 48 * KiB); /* 52 pages: up to 65, so 64 fit */
    CHECK(l2 == l);
    void *m = sl_malloc(LONGEST_RUN); /* none of 64 parked, and none longer cached */
    CHECK(m && m != l2);
    CHECK_EQ(sl_usable_size(m), LONGEST_RUN);
    sl_free(m);
    sl_free(l2);
    sl_free(r);
    sl_free(guard);
    printf("fit: %llu refills\n", (unsigned long long)(sl_stat("pcache_refill") - refills));
}

/* Of the runs parked with one length, a malloc takes one that held a
 * request of its own page count before (page.h: run.seen), newest
 * first, even under a newer one that did not: a program that touches
 * its buffers' ends (or fills them) finds those pages resident. Else the
 * newest of its length; else, of the runs up to a quarter longer, one
 * that held such a request, before the newest of the shortest length. */
static void seen(void)
{
    void *a = sl_malloc(68 * KiB); /* 17 pages: a run of 18 */
    void *b = sl_malloc(72 * KiB); /* 18 pages: a run of 18 */
    void *guard = sl_malloc(8 * KiB);
    CHECK(a && b && guard && a != b);
    CHECK_EQ(sl_usable_size(a), 72 * KiB);
    sl_free(a);
    sl_free(b); /* the newest */
    void *c = sl_malloc(66 * KiB); /* 17 pages: a held 17 */
    CHECK(c == a);
    void *d = sl_malloc(70 * KiB); /* 18 pages: b held 18 */
    CHECK(d == b);
    void *e = sl_malloc(80 * KiB); /* 20 pages */
    CHECK(e != NULL);
    sl_free(e);
    void *f = sl_malloc(68 * KiB); /* 17 pages: none of 18 parked, e fits (18..22) */
    CHECK(f == e);
    CHECK_EQ(sl_usable_size(f), 80 * KiB);
    void *x = sl_malloc(80 * KiB); /* another run of 20 */
    CHECK(x && x != e);
    sl_free(f); /* e held 20 and 17 */
    sl_free(x); /* x held 20: the newest of 20 */
    void *g = sl_malloc(68 * KiB); /* none of 18 parked: of the runs of 20, e held 17 */
    CHECK(g == e);
    sl_free(g);
    sl_free(d); /* b: 18 pages, held 18 */
    void *h = sl_malloc(68 * KiB); /* b, of its length, before e (longer, held 17) */
    CHECK(h == b);
    sl_free(h);
    sl_free(c);
    sl_free(guard);
}

int main(void)
{
    fit();
    seen();
    uint64_t most = 0, refills = sl_stat("pcache_refill");
    for (unsigned k = 0; k < LIVE; k++)
        replace(k);
    uint64_t held = 0;
    for (int i = 0; i < REPLACE; i++) {
        replace((unsigned)(t_rand(&seed) % LIVE));
        held = sl_stat("held.page_caches");
        most = held > most ? held : most;
    }
    /* go on until the cache holds more than the least (it grows and
     * shrinks as the heap turns sparse and dense), then free it all */
    for (int i = 0; i < REPLACE && held <= LEAST + LONGEST_RUN; i++) {
        replace((unsigned)(t_rand(&seed) % LIVE));
        held = sl_stat("held.page_caches");
    }
    printf("reuse: the cache held at most %llu KiB; %llu refills in %d replacements; grown %llu times\n",
           (unsigned long long)(most / KiB), (unsigned long long)(sl_stat("pcache_refill") - refills), REPLACE,
           (unsigned long long)sl_stat("pcache_grow"));
    CHECK(sl_stat("pcache_grow") > 0);
    CHECK(most > LEAST + LONGEST_RUN);
    CHECK(held > LEAST + LONGEST_RUN);

    uint64_t shrunk = sl_stat("pcache_shrink"), drops = sl_stat("drop_purge");
    for (unsigned k = 0; k < LIVE; k++) {
        sl_free(live[k]);
        live[k] = NULL;
    }
    held = sl_stat("held.page_caches");
    printf("drop: %llu drop purges, the cache holds %llu KiB after the last free\n",
           (unsigned long long)(sl_stat("drop_purge") - drops), (unsigned long long)(held / KiB));
    CHECK(sl_stat("drop_purge") > drops);
    CHECK(sl_stat("pcache_shrink") > shrunk);
    CHECK(held <= LEAST + LONGEST_RUN);
    CHECK_EQ(sl_check(), 0);
    return t_done("pcache");
}
