/* Unit: the anti-fragmentation policy (src/page/antifrag.h) as pure
 * functions with a fake clock: the fallback table, headroom and
 * watermarks, the boost's rise, cap and lapse, the deficit reclaim works
 * off, which block a fallback takes from, when a steal re-types a block, which events are serious, and which
 * type a malloc class's slabs go in. No
 * threads, no sleeps. */
#include "../src/page/antifrag.h"
#include "t.h"

int main(void)
{
    /* the fallback table: never itself, never FREE, every other type once */
    for (int t = 0; t < PB_NTYPES; t++) {
        if (t == PB_FREE)
            continue;
        unsigned seen = 1u << t;
        for (int i = 0; i < AF_NFALLBACKS; i++) {
            CHECK(af_fallbacks[t][i] != PB_FREE && af_fallbacks[t][i] < PB_NTYPES);
            CHECK(!(seen & 1u << af_fallbacks[t][i]));
            seen |= 1u << af_fallbacks[t][i];
        }
        CHECK_EQ(seen, ((1u << PB_NTYPES) - 1) & ~(1u << PB_FREE));
    }
    CHECK_EQ(af_fallbacks[PB_SLAB][0], PB_RECLAIM); /* long-lived with long-lived first */
    CHECK_EQ(af_fallbacks[PB_RUN][0], PB_BUF);      /* transient with transient first */
    CHECK_EQ(af_fallbacks[PB_BUF][0], PB_RUN);
    CHECK_EQ(af_fallbacks[PB_RUN][2], PB_SLAB);

    /* headroom: what the budget still allows plus wholly free blocks */
    CHECK_EQ(af_headroom(64, 60, 3), 7);
    CHECK_EQ(af_headroom(64, 70, 3), 3); /* past the budget: the free blocks only */
    CHECK_EQ(af_wmark_low(64), 2);
    CHECK_EQ(af_wmark_low(8), 1); /* at least one block */

    /* the boost: +1 an event, capped at budget/8, lapses after the decay */
    struct af_boost b = { 0, 0 };
    uint64_t now = 1000;
    for (int i = 0; i < 20; i++)
        af_boost_raise(&b, 64, now + (uint64_t)i);
    CHECK_EQ(af_boost_level(&b, now + 19), 8); /* 64 / 8 */
    CHECK_EQ(af_boost_level(&b, now + 19 + AF_BOOST_DECAY_MS), 8); /* not yet */
    CHECK_EQ(af_boost_level(&b, now + 20 + AF_BOOST_DECAY_MS), 0); /* lapsed */
    af_boost_raise(&b, 4, now + 5000);
    af_boost_raise(&b, 4, now + 5001);
    CHECK_EQ(b.blocks, 1); /* a small budget: the cap is one block */

    /* watermarks: wake under low + boost; work up to 3 x low + boost */
    CHECK(af_below_low(1, 64, 0));
    CHECK(!af_below_low(2, 64, 0));
    CHECK(af_below_low(5, 64, 4));
    bool urgent = true;
    CHECK_EQ(af_deficit(10, 64, 0, &urgent), 0);
    CHECK(!urgent);
    CHECK_EQ(af_deficit(4, 64, 0, &urgent), 2); /* high = 6 */
    CHECK(!urgent);
    CHECK_EQ(af_deficit(1, 64, 3, &urgent), 8); /* high = 9, under low: urgent */
    CHECK(urgent);
    CHECK_EQ(af_deficit(1, 64, 3, NULL), 8);

    /* a fallback takes from the victim type's list of the largest free
     * chunk that fits, not the fullest block's */
    CHECK_EQ(af_fallback_list(0, 0), -1);
    CHECK_EQ(af_fallback_list(1u << 3 | 1u << 5 | 1u << 7, 0), 7);
    CHECK_EQ(af_fallback_list(1u << 3 | 1u << 5, 4), 5);
    CHECK_EQ(af_fallback_list(1u << 3 | 1u << 5, 6), -1); /* nothing of order 6 or more */
    CHECK_EQ(af_fallback_list(1u << 8, 8), 8);

    /* a steal re-types a block at least half free */
    CHECK(af_steal_whole(BLOCK_USABLE_PAGES / 2));
    CHECK(!af_steal_whole(BLOCK_USABLE_PAGES / 2 - 1));
    /* serious: a long-lived piece in a block of transient runs */
    CHECK(af_serious(PB_SLAB, PB_RUN) && af_serious(PB_RECLAIM, PB_RUN));
    CHECK(af_serious(PB_SLAB, PB_BUF) && af_serious(PB_RECLAIM, PB_BUF));
    CHECK(!af_serious(PB_RUN, PB_SLAB) && !af_serious(PB_SLAB, PB_RECLAIM));
    CHECK(!af_serious(PB_BUF, PB_SLAB) && !af_serious(PB_BUF, PB_RUN) && !af_serious(PB_RUN, PB_BUF));

    /* placement: many objects to a slab (records) in SLAB blocks, few
     * (buffers) in BUF blocks */
    CHECK_EQ(af_slab_type(AF_SLAB_DENSE_OBJECTS), PB_SLAB);
    CHECK_EQ(af_slab_type(4096), PB_SLAB);
    CHECK_EQ(af_slab_type(AF_SLAB_DENSE_OBJECTS - 1), PB_BUF);
    CHECK_EQ(af_slab_type(2), PB_BUF);
    return t_done("unit_antifrag");
}
