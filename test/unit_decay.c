/* Unit: the decay policy (src/page/decay.h) as pure functions with a fake
 * clock: where advised memory goes, the tick, the cutoffs, the dirty cap
 * and the burst, the drop and its regret, the growth's hold on resident
 * free pages, advice over the cap going clean (decay_advise_plan), the
 * huge cache's share of the cap, what is due for one cached huge mapping (dirty, lazy,
 * clean, forced), when a heap's owner is idle (decay_owner_idle), and
 * hugepage collapse selection (dense for long enough, sparse again). No threads, no sleeps. */
#include "../src/page/decay.h"
#include "t.h"

int main(void)
{
    CHECK_EQ(decay_target(PURGE_FREE), PS_LAZY);
    CHECK_EQ(decay_target(PURGE_DONTNEED), PS_CLEAN);

    /* the tick: a quarter of the shorter decay, 10 ms to 1 s */
    CHECK_EQ(decay_tick_ms(10000, 40000), 1000);
    CHECK_EQ(decay_tick_ms(400, 2000), 100);
    CHECK_EQ(decay_tick_ms(2000, 400), 100);
    CHECK_EQ(decay_tick_ms(0, 1000), 10);

    /* cutoffs: what began at or before now - decay is due */
    CHECK_EQ(decay_cutoff(5000, 1000), 4000);
    CHECK_EQ(decay_cutoff(500, 1000), 0); /* early in the process: nothing yet */

    /* the dirty cap: an eighth of active pages, at least 2 MiB */
    CHECK_EQ(decay_dirty_cap(0), DECAY_DIRTY_MIN_PAGES);
    CHECK_EQ(decay_dirty_cap(80000), 10000);
    CHECK(!decay_burst(40000, 10000));
    CHECK(decay_burst(40001, 10000));

    /* a drop: the active pages down by an eighth since the last burst purge */
    CHECK(!decay_drop(7001, 8000));
    CHECK(decay_drop(7000, 8000));
    CHECK(decay_drop(0, 8000));
    CHECK(!decay_drop(9000, 8000)); /* grown: no drop */

    /* a drop purge's regret: half of its pages taken back before the next */
    CHECK_EQ(decay_drop_backoff(0, 1000, 499, 250), 0);  /* kept away: no backoff */
    CHECK_EQ(decay_drop_backoff(4000, 1000, 0, 250), 0); /* and it clears one */
    CHECK_EQ(decay_drop_backoff(0, 0, 1000, 250), 0);    /* nothing purged: nothing to regret */
    CHECK_EQ(decay_drop_backoff(0, 1000, 500, 250), 250); /* taken back: one tick */

    /* growth: resident free pages (dirty + lazy) held to the dirty cap, lazy first */
    {
        struct growth_clean c = decay_growth_clean(100, 300, 80000); /* cap 10000: under it */
        CHECK_EQ(c.lazy, 0);
        CHECK_EQ(c.dirty, 0);
        c = decay_growth_clean(4000, 6000, 80000); /* exactly at the cap */
        CHECK_EQ(c.lazy + c.dirty, 0);
        c = decay_growth_clean(4000, 9000, 80000); /* 3000 over: all of it lazy */
        CHECK_EQ(c.lazy, 3000);
        CHECK_EQ(c.dirty, 0);
        c = decay_growth_clean(12000, 5000, 80000); /* 7000 over: the lazy 5000, then 2000 dirty */
        CHECK_EQ(c.lazy, 5000);
        CHECK_EQ(c.dirty, 2000);
        c = decay_growth_clean(0, 600, 0); /* a small heap: 2 MiB are always allowed */
        CHECK_EQ(c.lazy, 600 - DECAY_DIRTY_MIN_PAGES);
        c = decay_growth_clean(20000, 0, 80000); /* nothing lazy (SLUICE_PURGE=dontneed) */
        CHECK_EQ(c.lazy, 0);
        CHECK_EQ(c.dirty, 10000);
    }
    /* advice: what is over the cap goes clean, only what it keeps lazy */
    {
        /* a drop (keep 0), cap 10000, nothing lazy: 10000 lazy, the rest clean */
        struct advise_plan p = decay_advise_plan(30000, 0, 80000, 0, true);
        CHECK_EQ(p.lazy_clean, 0);
        CHECK_EQ(p.dirty_clean, 20000);
        CHECK_EQ(p.dirty_lazy, 10000);
        /* lazy pages already there: they count, the older go clean first */
        p = decay_advise_plan(30000, 4000, 80000, 0, true);
        CHECK_EQ(p.lazy_clean, 4000);
        CHECK_EQ(p.dirty_clean, 20000);
        CHECK_EQ(p.dirty_lazy, 10000);
        /* a small drop under the cap: all of it lazy, cheap to take back */
        p = decay_advise_plan(6000, 1000, 80000, 0, true);
        CHECK_EQ(p.lazy_clean + p.dirty_clean, 0);
        CHECK_EQ(p.dirty_lazy, 6000);
        /* the tick's cap (keep = cap): everything advised is over it, clean */
        p = decay_advise_plan(14000, 0, 80000, 10000, true);
        CHECK_EQ(p.dirty_clean, 4000);
        CHECK_EQ(p.dirty_lazy, 0);
        p = decay_advise_plan(9000, 3000, 80000, 10000, true); /* 2000 over, all lazy */
        CHECK_EQ(p.lazy_clean, 2000);
        CHECK_EQ(p.dirty_clean + p.dirty_lazy, 0);
        /* SLUICE_PURGE=dontneed: all advice goes clean, nothing lazy */
        p = decay_advise_plan(30000, 0, 80000, 0, false);
        CHECK_EQ(p.dirty_clean, 30000);
        CHECK_EQ(p.lazy_clean + p.dirty_lazy, 0);
        /* under the cap with keep: nothing */
        p = decay_advise_plan(500, 0, 80000, 10000, true);
        CHECK_EQ(p.lazy_clean + p.dirty_clean + p.dirty_lazy, 0);
        /* the shortfall of a lazy purge, moved to dirty pages: never wraps
         * (whole spans may overshoot what was asked) */
        CHECK_EQ(decay_clean_shortfall(3000, 1000), 2000);
        CHECK_EQ(decay_clean_shortfall(3000, 3000), 0);
        CHECK_EQ(decay_clean_shortfall(3000, 3500), 0);
    }
    /* the huge cache's share of the cap: what the pageblocks leave */
    CHECK_EQ(decay_huge_room(10000, 4000), (size_t)6000 << SL_PAGE_SHIFT);
    CHECK_EQ(decay_huge_room(10000, 10000), 0);
    CHECK_EQ(decay_huge_room(10000, 25000), 0);
    CHECK_EQ(decay_huge_room(decay_dirty_cap(0), 0), (size_t)2 << 20); /* a small heap: 2 MiB */
    CHECK_EQ(decay_drop_backoff(250, 1000, 900, 250), 500); /* again: doubled */
    uint64_t b = 250;
    for (int i = 0; i < 20; i++)
        b = decay_drop_backoff(b, 1000, 1000, 250);
    CHECK_EQ(b, DECAY_DROP_BACKOFF_MAX_MS); /* bounded */

    /* one cached huge mapping, with a fake clock: dirty 1 s, lazy 10 s */
    uint64_t t0 = 100000;
    CHECK_EQ(decay_of(PS_DIRTY, t0, t0 + 999, false, 1000, 10000), DECAY_KEEP);
    CHECK_EQ(decay_of(PS_DIRTY, t0, t0 + 1000, false, 1000, 10000), DECAY_ADVISE);
    CHECK_EQ(decay_of(PS_LAZY, t0, t0 + 9999, false, 1000, 10000), DECAY_KEEP);
    CHECK_EQ(decay_of(PS_LAZY, t0, t0 + 10000, false, 1000, 10000), DECAY_EXPIRE);
    CHECK_EQ(decay_of(PS_CLEAN, t0, t0 + 10000, false, 1000, 10000), DECAY_EXPIRE);
    CHECK_EQ(decay_of(PS_DIRTY, t0, t0, true, 1000, 10000), DECAY_ADVISE); /* pressure */
    CHECK_EQ(decay_of(PS_LAZY, t0, t0, true, 1000, 10000), DECAY_EXPIRE);
    CHECK_EQ(decay_of(PS_DIRTY, t0, t0, false, 0, 0), DECAY_ADVISE); /* decay 0: at once */

    /* an owner idle for a tick with slabs waiting on its notify stack: the
     * reclaimer looks once a tick (tick 250 ms here) */
    struct owner_watch w = { 0 };
    CHECK(!decay_owner_idle(&w, false, 7, t0, 250));       /* nothing waits */
    CHECK(!decay_owner_idle(&w, true, 7, t0, 250));        /* first seen waiting: watched from now */
    CHECK(!decay_owner_idle(&w, true, 7, t0 + 249, 250));  /* under a tick */
    CHECK(decay_owner_idle(&w, true, 7, t0 + 250, 250));   /* a tick, no take: idle */
    CHECK(decay_owner_idle(&w, true, 7, t0 + 500, 250));   /* still idle, what it left still waits */
    CHECK(!decay_owner_idle(&w, true, 8, t0 + 750, 250));  /* the owner took its stack: watched afresh */
    CHECK(!decay_owner_idle(&w, true, 8, t0 + 999, 250));
    CHECK(decay_owner_idle(&w, true, 8, t0 + 1000, 250));
    CHECK(!decay_owner_idle(&w, false, 8, t0 + 1250, 250)); /* the stack emptied: forgotten */
    CHECK(!decay_owner_idle(&w, true, 8, t0 + 1500, 250));  /* waiting again, same gen: a tick again */
    CHECK(decay_owner_idle(&w, true, 8, t0 + 1750, 250));
    /* a churning owner, taking its stack within every tick, is never idle */
    struct owner_watch c = { 0 };
    for (uint32_t i = 0; i < 100; i++)
        CHECK(!decay_owner_idle(&c, true, i, t0 + 250 * i, 250));
    /* a clock at 0 still counts as watched (since_ms 0 means none) */
    struct owner_watch z = { 0 };
    CHECK(!decay_owner_idle(&z, true, 1, 0, 250));
    CHECK(decay_owner_idle(&z, true, 1, 251, 250));

    /* collapse selection: dense, then dense for DECAY_HUGIFY_AGE_MS */
    CHECK_EQ(hugify_choose(DECAY_DENSE_FREE_MAX + 1, 0, t0), HUGIFY_NOT_DENSE);
    CHECK_EQ(hugify_choose(DECAY_DENSE_FREE_MAX + 1, t0, t0 + 5000), HUGIFY_NOT_DENSE);
    CHECK_EQ(hugify_choose(DECAY_DENSE_FREE_MAX, 0, t0), HUGIFY_DENSE_NOW);
    CHECK_EQ(hugify_choose(10, t0, t0 + DECAY_HUGIFY_AGE_MS - 1), HUGIFY_TOO_YOUNG);
    CHECK_EQ(hugify_choose(10, t0, t0 + DECAY_HUGIFY_AGE_MS), HUGIFY_PICK);
    /* a full hugepage pass on busy CPUs: only while the program is quiet */
    CHECK(hugify_quiet(0, 1000000000));
    CHECK(hugify_quiet(1000000000 / HUGIFY_QUIET_DIV, 1000000000));
    CHECK(!hugify_quiet(1000000000 / HUGIFY_QUIET_DIV + 1, 1000000000));
    CHECK(!hugify_quiet(2000000, 1000000)); /* two threads busy */
    CHECK(!hugify_quiet(0, 0));             /* no window yet */
    CHECK(!hugify_quiet_window((uint64_t)HUGIFY_QUIET_WINDOW_MS * 1000000 - 1)); /* too short to tell */
    CHECK(hugify_quiet_window((uint64_t)HUGIFY_QUIET_WINDOW_MS * 1000000));
    CHECK(!hugify_sparse(DECAY_SPARSE_FREE_MIN));
    CHECK(hugify_sparse(DECAY_SPARSE_FREE_MIN + 1));
    CHECK(DECAY_DENSE_FREE_MAX < DECAY_SPARSE_FREE_MIN); /* a gap: no flapping */
    return t_done("unit_decay");
}
