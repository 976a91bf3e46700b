/* Unit: the page cache's budget (src/page/pcache_budget.h) as pure
 * functions with a fake clock: it starts at the least, doubles on an
 * overflow that follows enough misses since the one before (up to the
 * most and the dirty cap; misses before a first overflow do not count),
 * halves when the heap's dirty cap falls under it or the heap is sparse
 * (and does not grow then), holds while
 * overflows keep coming with misses, halves on an idle overflow (not
 * below the least), and falls to the least on a drop. No threads, no
 * sleeps. */
#include "../src/page/pcache_budget.h"
#include "t.h"

#define BIG ((size_t)1 << 40) /* a dirty cap that bounds nothing */
#define VS(d, c, a, f) ((struct pcache_heap_view){ .drops = (d), .cap = (c), .active = (a), .free = (f) })
#define V(d, c)        VS(d, c, 0, 0) /* a dense heap */

int main(void)
{
    struct pcache_budget b;
    uint64_t t = 50000;
    pcache_budget_init(&b, V(7, BIG), t);
    CHECK_EQ(b.pages, PCACHE_BUDGET_MIN);

    /* misses before the first overflow (a heap filling up) prove nothing */
    for (int i = 0; i < 100; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), t), PCACHE_BUDGET_MIN);

    /* overflows with no misses: a thread that only frees stays at the least */
    for (int i = 0; i < 10; i++)
        CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), t + 10 * i), PCACHE_BUDGET_MIN);

    /* one miss short of the proof: no growth */
    for (int i = 0; i < PCACHE_GROW_MISSES - 1; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), t + 200), PCACHE_BUDGET_MIN);
    CHECK_EQ(b.misses, 0); /* an overflow starts the count afresh */

    /* misses then an overflow: the drained runs were wanted, it doubles */
    for (int i = 0; i < PCACHE_GROW_MISSES; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), t + 300), 2 * PCACHE_BUDGET_MIN);

    /* and again, up to the most and no further */
    uint64_t now = t + 300;
    for (int r = 0; r < 10; r++) {
        for (int i = 0; i < PCACHE_GROW_MISSES; i++)
            pcache_budget_miss(&b);
        now += 10;
        CHECK(pcache_budget_overflow(&b, V(7, BIG), now) <= PCACHE_BUDGET_MAX);
    }
    CHECK_EQ(b.pages, PCACHE_BUDGET_MAX);

    /* overflows without misses within the idle time keep it */
    CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), now + PCACHE_IDLE_MS - 1), PCACHE_BUDGET_MAX);
    /* one at the idle time halves it, and the next halving waits as long */
    now += PCACHE_IDLE_MS;
    CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), now), PCACHE_BUDGET_MAX / 2);
    CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), now + PCACHE_IDLE_MS - 1), PCACHE_BUDGET_MAX / 2);
    now += PCACHE_IDLE_MS;
    CHECK_EQ(pcache_budget_overflow(&b, V(7, BIG), now), PCACHE_BUDGET_MAX / 4);
    /* never below the least */
    for (int i = 0; i < 10; i++) {
        now += PCACHE_IDLE_MS;
        pcache_budget_overflow(&b, V(7, BIG), now);
    }
    CHECK_EQ(b.pages, PCACHE_BUDGET_MIN);

    /* a drop resets a grown budget, whatever the misses; the drop is seen once */
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < PCACHE_GROW_MISSES; i++)
            pcache_budget_miss(&b);
        pcache_budget_overflow(&b, V(7, BIG), ++now);
    }
    CHECK_EQ(b.pages, 4 * PCACHE_BUDGET_MIN);
    for (int i = 0; i < PCACHE_GROW_MISSES; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, V(8, BIG), ++now), PCACHE_BUDGET_MIN);
    for (int i = 0; i < PCACHE_GROW_MISSES; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, V(8, BIG), ++now), PCACHE_BUDGET_MIN); /* the first overflow since */
    for (int i = 0; i < PCACHE_GROW_MISSES; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, V(8, BIG), ++now), 2 * PCACHE_BUDGET_MIN); /* reuse grows it again */

    /* the dirty cap bounds growth: a small heap's cache stays at the least */
    pcache_budget_init(&b, V(0, BIG), now);
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < PCACHE_GROW_MISSES; i++)
            pcache_budget_miss(&b);
        CHECK_EQ(pcache_budget_overflow(&b, V(0, PCACHE_BUDGET_MIN), ++now), PCACHE_BUDGET_MIN);
    }
    /* and stops it where doubling would pass the cap */
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < PCACHE_GROW_MISSES; i++)
            pcache_budget_miss(&b);
        pcache_budget_overflow(&b, V(0, 3 * PCACHE_BUDGET_MIN), ++now);
    }
    CHECK_EQ(b.pages, 2 * PCACHE_BUDGET_MIN);
    /* a heap that shrank under the budget halves it at each overflow, misses or not */
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < PCACHE_GROW_MISSES; i++)
            pcache_budget_miss(&b);
        pcache_budget_overflow(&b, V(0, BIG), ++now);
    }
    CHECK_EQ(b.pages, PCACHE_BUDGET_MAX);
    CHECK_EQ(pcache_budget_overflow(&b, V(0, PCACHE_BUDGET_MAX / 4), ++now), PCACHE_BUDGET_MAX / 2);
    CHECK_EQ(pcache_budget_overflow(&b, V(0, PCACHE_BUDGET_MAX / 4), ++now), PCACHE_BUDGET_MAX / 4);
    for (int i = 0; i < PCACHE_GROW_MISSES; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, V(0, PCACHE_BUDGET_MAX / 4), ++now), PCACHE_BUDGET_MAX / 4); /* held */
    CHECK_EQ(pcache_budget_overflow(&b, V(0, 0), ++now), PCACHE_BUDGET_MAX / 8);

    /* a sparse heap (free pages more than half those in use) stops growth
     * and halves a grown budget at each overflow; a dense one lets it grow */
    pcache_budget_init(&b, V(0, BIG), now);
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < PCACHE_GROW_MISSES; i++)
            pcache_budget_miss(&b);
        pcache_budget_overflow(&b, VS(0, BIG, 1000, 500), ++now); /* dense: exactly half free */
    }
    CHECK_EQ(b.pages, 4 * PCACHE_BUDGET_MIN);
    for (int i = 0; i < PCACHE_GROW_MISSES; i++)
        pcache_budget_miss(&b);
    CHECK_EQ(pcache_budget_overflow(&b, VS(0, BIG, 1000, 501), ++now), 2 * PCACHE_BUDGET_MIN);
    CHECK_EQ(pcache_budget_overflow(&b, VS(0, BIG, 1000, 501), ++now), PCACHE_BUDGET_MIN);
    CHECK_EQ(pcache_budget_overflow(&b, VS(0, BIG, 1000, 501), ++now), PCACHE_BUDGET_MIN); /* the least */
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < PCACHE_GROW_MISSES; i++)
            pcache_budget_miss(&b);
        CHECK_EQ(pcache_budget_overflow(&b, VS(0, BIG, 1000, 900), ++now), PCACHE_BUDGET_MIN); /* no growth */
    }
    CHECK(!pcache_heap_sparse(VS(0, BIG, 0, 0)));
    CHECK(pcache_heap_sparse(VS(0, BIG, 0, 1)));

    /* the miss count saturates instead of wrapping to zero */
    b.misses = UINT32_MAX;
    pcache_budget_miss(&b);
    CHECK_EQ(b.misses, UINT32_MAX);

    /* the least follows the heap: a 64th of the pages in use, a power of
     * two from 256 KiB to 2 MiB */
    CHECK_EQ(pcache_budget_least(VS(0, BIG, 0, 0)), PCACHE_BUDGET_MIN);
    CHECK_EQ(pcache_budget_least(VS(0, BIG, 64 * PCACHE_BUDGET_MIN, 0)), PCACHE_BUDGET_MIN);
    CHECK_EQ(pcache_budget_least(VS(0, BIG, 64 * 200, 0)), 128);
    CHECK_EQ(pcache_budget_least(VS(0, BIG, 64 * PCACHE_BUDGET_LEAST, 0)), PCACHE_BUDGET_LEAST);
    CHECK_EQ(pcache_budget_least(VS(0, BIG, BIG, 0)), PCACHE_BUDGET_LEAST);
    {
        size_t big = 64 * PCACHE_BUDGET_LEAST; /* a 128 MiB heap, dense */
        pcache_budget_init(&b, VS(3, BIG, big, 0), now);
        CHECK_EQ(b.pages, PCACHE_BUDGET_LEAST); /* a new thread of a big heap */
        pcache_budget_init(&b, V(3, BIG), now);
        CHECK_EQ(b.pages, PCACHE_BUDGET_MIN);   /* of a small one */
        /* the heap grew: the next overflow raises the budget to its least */
        CHECK_EQ(pcache_budget_overflow(&b, VS(3, BIG, big, 0), now), PCACHE_BUDGET_LEAST);
        /* sparse, or a drop: halved, reset, never below it */
        CHECK_EQ(pcache_budget_overflow(&b, VS(3, BIG, big, big), now + 1), PCACHE_BUDGET_LEAST);
        CHECK_EQ(pcache_budget_overflow(&b, VS(4, BIG, big, 0), now + 2), PCACHE_BUDGET_LEAST);
        /* the heap shrank: the least with it */
        CHECK_EQ(pcache_budget_overflow(&b, VS(5, BIG, 64, 0), now + 3), PCACHE_BUDGET_MIN);
    }

    /* the bounds make sense: powers of two apart, the least 256 KiB to 2 MiB */
    CHECK_EQ(PCACHE_BUDGET_MIN * 4096, 256 << 10);
    CHECK_EQ(PCACHE_BUDGET_LEAST * 4096, 2 << 20);
    CHECK_EQ(PCACHE_BUDGET_LEAST % PCACHE_BUDGET_MIN, 0);
    CHECK_EQ(PCACHE_BUDGET_MAX % PCACHE_BUDGET_MIN, 0);
    return t_done("unit_pcache_budget");
}
