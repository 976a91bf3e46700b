/* The page layer's fallback path (run under `ulimit -v`, see
 * CMakeLists.txt): when no new pageblock can be mapped, a type takes a
 * piece of another type's block and may re-type it while it still holds
 * runs. A run freed after that must come back as what it was, never as the
 * other kind (a slab handed out as a medium run, or a medium run as a
 * slab): data was lost that way (issue 8's reproducer, both directions).
 * sl_check runs after each step. Uses the malloc names (the override). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "sluice.h"
#include "t.h"

static void *(*volatile M)(size_t) = malloc;
static void (*volatile F)(void *) = free;

/* Map runs of `size` until the address space is gone; a chain through them. */
static void *exhaust(size_t size)
{
    void *head = NULL, **b;
    while ((b = M(size)))
        *b = head, head = b;
    CHECK_EQ(errno, ENOMEM);
    return head;
}

static void release(void *head)
{
    void **b;
    while ((b = head))
        head = *b, F(b);
}

static bool all_equal(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) {
            fprintf(stderr, "fallback: byte %zu is %#x, not %#x\n", i, p[i], v);
            return false;
        }
    return true;
}

/* Slab pages freed into a block re-typed RUN must not come back as a run
 * (slabs of SLAB blocks: classes of 512 B and less, antifrag.h). */
static void slab_then_run(void)
{
    enum { S = 3 * 64 }; /* three slabs of 512 B objects */
    void *s[S];
    for (int i = 0; i < S; i++)
        s[i] = M(512);
    void *runs = exhaust(256 << 10);
    for (int i = 0; i < S; i++)
        F(s[i]);
    release(runs);
    CHECK(sl_check() == 0);
    unsigned char *p = M(32768);
    CHECK(p != NULL);
    memset(p, 0x5a, 32768);
    unsigned char *q = realloc(p, 65536);
    CHECK(q != NULL);
    CHECK(all_equal(q, 32768, 0x5a));
    CHECK(sl_check() == 0);
    F(q);
}

/* A medium run freed into a block re-typed SLAB must not become a slab. */
static void run_then_slab(void)
{
    enum { N = 400 };
    static unsigned char *r[N];
    int n = 0;
    for (; n < N; n++)
        if (!(r[n] = M(16384)))
            break;
    void *rest = exhaust(16384);
    for (int i = 0; i < n; i++) /* all but every 8th run: blocks mostly free, none whole */
        if (i % 8)
            F(r[i]);
    /* small objects of new classes (SLAB blocks' classes, 512 B and
     * less): no SLAB room and nothing to map */
    static unsigned char *o[4000];
    int k = 0;
    for (; k < 4000; k++) {
        if (!(o[k] = M(200 + (size_t)(k % 7) * 40)))
            break;
        memset(o[k], (unsigned char)k, 200);
    }
    CHECK(k > 0);
    CHECK(sl_check() == 0);
    for (int i = 0; i < n; i += 8) /* the surviving runs come back */
        F(r[i]);
    release(rest);
    CHECK(sl_check() == 0);
    for (int i = 0; i < k; i++) { /* objects keep their bytes through realloc */
        unsigned char *q = realloc(o[i], 200 + (size_t)(i % 7) * 40 + 5000);
        CHECK(q != NULL);
        if (!q)
            break;
        if (!all_equal(q, 200, (unsigned char)i))
            t_fail++;
        o[i] = q;
    }
    CHECK(sl_check() == 0);
    for (int i = 0; i < k; i++)
        F(o[i]);
    CHECK(sl_check() == 0);
}

int main(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1ull << 30)) {
        fprintf(stderr, "fallback: run under ulimit -v (at most 1 GiB)\n");
        return 1;
    }
    slab_then_run();
    run_then_slab();
    printf("extfrag events %llu, whole blocks taken %llu\n", (unsigned long long)sl_stat("extfrag"),
           (unsigned long long)sl_stat("block_steal"));
    CHECK(sl_stat("extfrag") > 0); /* the fallback really ran */
    return t_done("fallback");
}
