/* Unit: the pagemap answers "ours?" for every address of a region, and its
 * flat bitmap "a pageblock?" for the free fast path, kept in step. */
#include "../src/pagemap/pagemap.h"
#include "t.h"

int main(void)
{
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
