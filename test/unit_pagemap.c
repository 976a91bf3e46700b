/* Unit: the pagemap answers "ours?" for every address of a region, and its
 * flat bitmap "a pageblock?" for the free fast path, kept in step; a walk
 * visits every entry set, in address order, and none cleared. */
#include "../src/pagemap/pagemap.h"
#include "t.h"

struct seen {
    uintptr_t g[16], e[16];
    unsigned n;
};
static void visit(uintptr_t granule, uintptr_t entry, void *arg)
{
    struct seen *s = arg;
    if (s->n < 16) {
        s->g[s->n] = granule;
        s->e[s->n] = entry;
    }
    s->n++;
}

/* Granules at the ends of 64-entry groups and of a leaf (the walk visits
 * only the groups its summary marks), in two leaves. */
static void walk(void)
{
    uintptr_t leaf = (uintptr_t)SL_BLOCK << PM_LEAF_BITS; /* 128 GiB */
    uintptr_t at[] = { 0x300000000000ull, 0x300000000000ull + 63 * SL_BLOCK, 0x300000000000ull + 64 * SL_BLOCK,
                       0x300000000000ull + 4095 * SL_BLOCK, 0x300000000000ull + 4096 * SL_BLOCK,
                       0x300000000000ull + leaf - SL_BLOCK, 0x300000000000ull + leaf };
    unsigned n = sizeof at / sizeof at[0];
    for (unsigned i = 0; i < n; i++)
        CHECK(pagemap_set(at[i], SL_BLOCK, at[i] | PM_HUGE));
    CHECK(pagemap_set(at[2], SL_BLOCK, 0)); /* cleared: its group stays marked, and is skipped */
    struct seen s = { .n = 0 };
    pagemap_walk(visit, &s);
    CHECK_EQ(s.n, n - 1);
    for (unsigned i = 0, j = 0; i < n && j < 16; i++) {
        if (i == 2)
            continue;
        CHECK_EQ(s.g[j], at[i]);
        CHECK_EQ(s.e[j], at[i] | PM_HUGE);
        j++;
    }
    for (unsigned i = 0; i < n; i++)
        CHECK(pagemap_set(at[i], SL_BLOCK, 0));
    s.n = 0;
    pagemap_walk(visit, &s);
    CHECK_EQ(s.n, 0);
}

int main(void)
{
    walk();
    uintptr_t base = (uintptr_t)0x7e1200000000ull;
    CHECK_EQ(pagemap_get(base), 0);
    CHECK(pagemap_set(base, 3 * SL_BLOCK, base | PM_BLOCK));
    CHECK_EQ(pagemap_get(base), base | PM_BLOCK);
    CHECK_EQ(pagemap_get(base + 3 * SL_BLOCK - 1), base | PM_BLOCK);
    CHECK_EQ(pagemap_get(base + 3 * SL_BLOCK), 0);
    CHECK_EQ(pagemap_get(base - 1), 0);
    CHECK(pagemap_is_block(base) && pagemap_is_block(base + 3 * SL_BLOCK - 1));
    CHECK(!pagemap_is_block(base - 1) && !pagemap_is_block(base + 3 * SL_BLOCK));
    CHECK(pagemap_set(base, 3 * SL_BLOCK, 0));
    CHECK_EQ(pagemap_get(base + SL_BLOCK), 0);
    CHECK(!pagemap_is_block(base) && !pagemap_is_block(base + SL_BLOCK));
    /* a huge mapping's granules are not blocks; no block may be at or past
     * 2^47, where the flat bitmap ends (the tree goes on to 2^48) */
    CHECK(pagemap_set(base, SL_BLOCK, base | PM_HUGE));
    CHECK(!pagemap_is_block(base));
    CHECK(pagemap_set(base, SL_BLOCK, base | PM_BLOCK));
    CHECK(pagemap_is_block(base));
    CHECK(pagemap_set(base, SL_BLOCK, base | PM_HUGE)); /* a block's granule reused */
    CHECK(!pagemap_is_block(base));
    CHECK(pagemap_set(base, SL_BLOCK, 0));
    uintptr_t high = (uintptr_t)1 << 47;
    CHECK(!pagemap_set(high, SL_BLOCK, high | PM_BLOCK)); /* refused: sl_free would miss it */
    CHECK(!pagemap_set(high - SL_BLOCK, 2 * SL_BLOCK, high | PM_BLOCK));
    CHECK_EQ(pagemap_get(high), 0);
    CHECK(!pagemap_is_block(high));
    CHECK(pagemap_set(high, SL_BLOCK, high | PM_HUGE)); /* other regions may be there */
    CHECK_EQ(pagemap_get(high), high | PM_HUGE);
    CHECK(!pagemap_is_block(high));
    CHECK(pagemap_set(high, SL_BLOCK, 0));
    CHECK_EQ(pagemap_get((uintptr_t)1 << 60), 0); /* beyond 48 bits */
    CHECK(!pagemap_set((uintptr_t)1 << 60, SL_BLOCK, 1));
    return t_done("unit_pagemap");
}
