/* Unit: the pagemap answers "ours?" for every address of a region. */
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
    CHECK(pagemap_set(base, 3 * SL_BLOCK, 0));
    CHECK_EQ(pagemap_get(base + SL_BLOCK), 0);
    CHECK_EQ(pagemap_get((uintptr_t)1 << 60), 0); /* beyond 48 bits */
    CHECK(!pagemap_set((uintptr_t)1 << 60, SL_BLOCK, 1));
    return t_done("unit_pagemap");
}
