/* Where a run goes when its type has no buddy chunk of its order (page.h's
 * allocation order), and where a fallback past the heap budget takes its
 * piece:
 *   - stretch: runs of 150-200 pages, which the buddy can place only in a
 *     block's upper half (its one chunk of 256 pages), share blocks: the
 *     second goes into the lower half, across chunks that are not buddies
 *     (place.c: stretch_fit). Without it, one block each.
 *   - steal: past the budget, a slab takes its piece from the RUN block
 *     with the largest free chunk, which is half free and so re-typed
 *     SLAB, and the next slabs come from it with no event (antifrag.h:
 *     af_fallback_list). Taking from the fullest block that fits instead,
 *     the slabs went one event each into the small holes of the others.
 * The budget is set at run time (opt.heap_limit) to the blocks the test
 * has built, so the layout before it is the test's own. Every byte is
 * checked before it is freed, and sl_check runs after each phase (in a
 * debug build it also checks each block's stretch_max). */
#include <stdint.h>
#include <string.h>

#include "sluice.h"
#include "t.h"

#define PAGE 4096

static bool intact(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

static void *fill(size_t n, unsigned char v)
{
    void *p = sl_malloc(n);
    CHECK(p != NULL);
    if (p)
        memset(p, v, n);
    return p;
}

static void stretch(void)
{
    enum { N = 8 };
    unsigned char *r[N];
    uint64_t before = sl_stat("blocks_run");
    for (int i = 0; i < N; i++)
        r[i] = fill((size_t)(150 + 50 * (i % 2)) * PAGE, (unsigned char)(i + 1)); /* 150 or 200 pages */
    uint64_t used = sl_stat("blocks_run") - before;
    printf("stretch: %d runs of 150-200 pages in %llu pageblocks\n", N, (unsigned long long)used);
    CHECK(used <= N / 2 + 1); /* two to a block (the buddy alone: N) */
    CHECK(sl_check() == 0);
    /* the upper halves' runs go back to their blocks (sl_purge flushes
     * the run cache), joining the stretches a failed search measured:
     * sl_check finds none longer than the block says (stretch_max) */
    for (int i = 0; i < N; i += 2) {
        CHECK(intact(r[i], 150 * PAGE, (unsigned char)(i + 1)));
        sl_free(r[i]);
    }
    sl_purge();
    CHECK(sl_check() == 0);
    for (int i = 1; i < N; i += 2) {
        CHECK(intact(r[i], 200 * PAGE, (unsigned char)(i + 1)));
        sl_free(r[i]);
    }
    CHECK(sl_check() == 0);
}

/* A search that found no stretch remembers it (stretch_max) until pages
 * come back to the block: a block of a 256-page run (its upper half)
 * and a 72-page one (in the chunk of 128 below it) has 167 pages free,
 * the longest 111 in a row, so a run of 144 finds none there; the
 * 72-page run freed, 239 are in a row, which sl_check (a debug build's)
 * holds stretch_max to, and the next run of 144 takes them. (Run
 * lengths: heap_run_pages rounds to an eighth.) */
static void stretch_remembered(void)
{
    sl_purge();
    unsigned char *a1 = fill(256 * PAGE, 1), *a2 = fill(72 * PAGE, 2), *b = fill(144 * PAGE, 3);
    uint64_t run0 = sl_stat("blocks_run");
    CHECK(sl_check() == 0);
    CHECK(intact(a2, 72 * PAGE, 2));
    sl_free(a2);
    sl_purge(); /* the run cache's runs back to their blocks */
    CHECK(sl_check() == 0);
    unsigned char *c = fill(144 * PAGE, 4);
    CHECK_EQ(sl_stat("blocks_run"), run0); /* in the first block's lower half */
    CHECK(sl_check() == 0);
    CHECK(intact(a1, 256 * PAGE, 1) && intact(b, 144 * PAGE, 3) && intact(c, 144 * PAGE, 4));
    sl_free(a1);
    sl_free(b);
    sl_free(c);
    CHECK(sl_check() == 0);
}

static void steal(void)
{
    /* two RUN blocks with 47 pages free each, in chunks of 32 pages and
     * less (a run of 256 pages in the upper half, 128 and 64 below it),
     * and one half free (a run of 150 pages: 345 pages free, its largest
     * chunk 128) */
    enum { FULL = 2, RUNS = 3 * FULL + 1 };
    static const unsigned pages[RUNS] = { 256, 128, 64, 256, 128, 64, 150 };
    unsigned char *r[RUNS];
    sl_purge(); /* the stretch's blocks, wholly free, unmapped: the budget is these */
    for (int i = 0; i < RUNS; i++)
        r[i] = fill((size_t)pages[i] * PAGE, (unsigned char)(0x40 + i));
    int64_t limit = (int64_t)sl_stat("blocks") << 21;
    CHECK_EQ(sl_ctl("opt.heap_limit", NULL, NULL, &limit, sizeof limit), 0);
    /* small objects until their slabs find no room of their own: the
     * first event; then 100 pages more of them */
    enum { OBJ = 64, MAX = 200000, MORE = 100 * PAGE / OBJ };
    static void *o[MAX];
    int n = 0;
    uint64_t ev0 = sl_stat("extfrag"), run0 = sl_stat("blocks_run");
    while (n < MAX && sl_stat("extfrag") == ev0)
        o[n++] = fill(OBJ, 0x33);
    CHECK(n < MAX);
    for (int i = 0; i < MORE && n < MAX; i++)
        o[n++] = fill(OBJ, 0x33);
    uint64_t events = sl_stat("extfrag") - ev0;
    printf("steal: %llu events for %d pages of slabs past the budget, RUN blocks %llu -> %llu\n",
           (unsigned long long)events, MORE * OBJ / PAGE, (unsigned long long)run0,
           (unsigned long long)sl_stat("blocks_run"));
    CHECK(events <= 2);                       /* the half-free block, re-typed (the holes first: 94) */
    CHECK(sl_stat("blocks_run") == run0 - 1); /* ... to SLAB */
    CHECK(sl_check() == 0);
    for (int i = 0; i < n; i++) {
        CHECK(intact(o[i], OBJ, 0x33));
        sl_free(o[i]);
    }
    for (int i = 0; i < RUNS; i++) {
        CHECK(intact(r[i], (size_t)pages[i] * PAGE, (unsigned char)(0x40 + i)));
        sl_free(r[i]);
    }
    limit = 0;
    CHECK_EQ(sl_ctl("opt.heap_limit", NULL, NULL, &limit, sizeof limit), 0);
    CHECK(sl_check() == 0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* no stdio buffer: no BUF block for a fallback to take first */
    stretch();
    stretch_remembered();
    steal();
    return t_done("placement");
}
