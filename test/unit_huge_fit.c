/* Unit: which cached huge mappings serve a request (src/huge/huge_fit.h),
 * on made-up caches (newest first): the smallest resident fit, split;
 * resident mappings gathered, newest first, the last one's head only, at
 * most HUGE_GATHER_MAX of them, clean ones never; a clean fit only when
 * nothing resident is cached; alignment; an empty cache. */
#include "../src/huge/huge_fit.h"
#include "t.h"

#define MB ((size_t)1 << 20)
#define D(mb) { (mb) * MB, true, true }   /* dirty (resident), aligned */
#define C(mb) { (mb) * MB, false, true }  /* clean, aligned */

int main(void)
{
    struct huge_fit f;

    /* empty: map afresh */
    f = huge_fit_choose(NULL, 0, 4 * MB);
    CHECK_EQ(f.single, -1);
    CHECK_EQ(f.npieces, 0);

    /* the smallest resident fit, not the first, not a clean smaller one */
    struct huge_fit_in a[] = { D(24), C(8), D(10), D(12), D(10) };
    f = huge_fit_choose(a, 5, 8 * MB);
    CHECK_EQ(f.single, 2); /* 10, the first of the two */
    f = huge_fit_choose(a, 5, 12 * MB);
    CHECK_EQ(f.single, 3); /* an exact fit */
    f = huge_fit_choose(a, 5, 20 * MB);
    CHECK_EQ(f.single, 0); /* 24 MiB for 20: split, not handed out whole (huge_cache.c) */

    /* a fit that is not aligned is passed over */
    a[2].aligned = a[4].aligned = false;
    f = huge_fit_choose(a, 5, 8 * MB);
    CHECK_EQ(f.single, 3);
    a[2].aligned = a[4].aligned = true;

    /* no single resident fit: gather the resident ones, newest first,
     * the last contributing only what is still needed; clean ones skipped
     * even where one would fit alone */
    struct huge_fit_in b[] = { D(6), C(30), D(4), D(8), D(2) };
    f = huge_fit_choose(b, 5, 14 * MB);
    CHECK_EQ(f.single, -1);
    CHECK_EQ(f.npieces, 3);
    CHECK_EQ(f.piece[0], 0);
    CHECK_EQ(f.piece[1], 2);
    CHECK_EQ(f.piece[2], 3);
    CHECK_EQ(f.gathered, 14 * MB); /* 6 + 4 + 4 of the 8 */

    /* not enough resident: all of it, the rest fresh */
    f = huge_fit_choose(b, 5, 26 * MB);
    CHECK_EQ(f.npieces, 4);
    CHECK_EQ(f.gathered, 20 * MB);

    /* nothing resident: the smallest clean fit */
    struct huge_fit_in c[] = { C(30), C(12), C(4) };
    f = huge_fit_choose(c, 3, 10 * MB);
    CHECK_EQ(f.single, 1);
    CHECK_EQ(f.npieces, 0);
    f = huge_fit_choose(c, 3, 32 * MB);
    CHECK_EQ(f.single, -1);
    CHECK_EQ(f.npieces, 0);

    /* unaligned resident pieces are gathered all the same: they move */
    struct huge_fit_in d[] = { { 4 * MB, true, false }, { 4 * MB, true, false } };
    f = huge_fit_choose(d, 2, 6 * MB);
    CHECK_EQ(f.npieces, 2);
    CHECK_EQ(f.gathered, 6 * MB);

    /* at most HUGE_GATHER_MAX pieces */
    struct huge_fit_in e[40];
    for (int i = 0; i < 40; i++)
        e[i] = (struct huge_fit_in)D(2);
    f = huge_fit_choose(e, 40, 64 * MB);
    CHECK_EQ(f.npieces, HUGE_GATHER_MAX);
    CHECK_EQ(f.gathered, HUGE_GATHER_MAX * 2 * MB);
    for (unsigned k = 0; k < f.npieces; k++)
        CHECK_EQ(f.piece[k], k);
    return t_done("unit_huge_fit");
}
