/* decay.h — the decay policy for free memory, one for pageblocks
 * (page/purge_decay.c applies it) and huge mappings (huge/huge_cache.c) alike: pure functions of
 * the options, the counts and a clock, tested by test/unit_decay.c with a
 * fake clock, no threads and no sleeps. The mechanisms (purge.c's spans,
 * huge_cache.c) carry out what they decide.
 *
 *   free memory is dirty (resident) -> lazy (MADV_FREE: the kernel may take
 *   it) -> clean (MADV_DONTNEED, or unmapped); SLUICE_PURGE=dontneed goes
 *   from dirty to clean at once, SLUICE_PURGE=off never leaves dirty
 *   - dirty memory is advised once it has been dirty for the dirty decay
 *     (SLUICE_DIRTY_DECAY_MS, with no new dirty page in its pageblock);
 *   - lazy memory expires (made clean; a huge mapping is unmapped) once it
 *     has been lazy for the lazy decay (SLUICE_LAZY_DECAY_MS);
 *   - under memory pressure (force) everything is due at once;
 *   - the decay runs once per tick: a quarter of the shorter decay,
 *     10 ms to 1 s;
 *   - dirty pageblock pages are capped at an eighth of the active pages
 *     (at least DECAY_DIRTY_MIN_PAGES), enforced once per tick in blocks
 *     dirtied before the tick; past DECAY_DIRTY_BURST times the cap (a big
 *     free) the reclaimer is woken, or with none the freeing thread
 *     purges down to the cap itself, at most once per tick;
 *   - lazy pages count in the RSS as dirty ones do, so dirty and lazy
 *     together are held to that cap too, and what is advised beyond it
 *     goes clean, not lazy (decay_advise_plan): at every tick (the lazy
 *     pages over it, and the dirty ones past the tick's grace; a drop's
 *     and a burst's pages go lazy: taken back soon as often as not, they
 *     are the tick's); and when the heap maps a new pageblock or huge mapping,
 *     at once, the lazy first, then the dirty past the tick's grace
 *     (decay_growth_clean); MADV_FREE only for what the cap may keep;
 *   - the huge cache's dirty mappings are free memory kept resident as
 *     well: they share the cap with the pageblocks' dirty and lazy pages
 *     (decay_huge_room), the newest always kept, at every tick (with a
 *     reclaimer or without one) and at growth;
 *   - a drop (the active pages down by an eighth since the last burst
 *     purge) purges every dirty page at once, tick or not: the free that
 *     ends it may be the program's last, and with no reclaimer nothing
 *     would run the decay while it idles; unless the last drop purges
 *     were regretted (decay_drop_backoff);
 *   - slabs that other threads' frees emptied whole while their owner
 *     stays away from its slow paths are taken back by the reclaimer once
 *     the owner has let them wait a tick (decay_owner_idle), so they reach
 *     the decay above instead of staying with an idle thread.
 */
#ifndef SL_DECAY_H
#define SL_DECAY_H

#include "../options/options.h"
#include "block.h"

#define DECAY_DIRTY_MIN_PAGES 512 /* 2 MiB of dirty pages are always allowed */
#define DECAY_DIRTY_RATIO     8   /* dirty <= active / DECAY_DIRTY_RATIO */
#define DECAY_DIRTY_BURST     4   /* past this many times the cap, purge at once */
#define DECAY_TICK_MIN_MS     10
#define DECAY_TICK_MAX_MS     1000

/* Where dirty memory goes when advised: lazy with SLUICE_PURGE=free. */
sl_inline enum page_state decay_target(int purge_mode) { return purge_mode == PURGE_FREE ? PS_LAZY : PS_CLEAN; }

/* The decay period: a quarter of the shorter decay, within bounds. */
sl_inline uint64_t decay_tick_ms(long dirty_decay_ms, long lazy_decay_ms)
{
    long t = (dirty_decay_ms < lazy_decay_ms ? dirty_decay_ms : lazy_decay_ms) / 4;
    return t < DECAY_TICK_MIN_MS ? DECAY_TICK_MIN_MS : t > DECAY_TICK_MAX_MS ? DECAY_TICK_MAX_MS : (uint64_t)t;
}

/* Memory whose state began at or before this time is due after decay_ms. */
sl_inline uint64_t decay_cutoff(uint64_t now, uint64_t decay_ms) { return now >= decay_ms ? now - decay_ms : 0; }

/* The dirty cap, in pages, for this many active pages. */
sl_inline size_t decay_dirty_cap(size_t active_pages)
{
    size_t cap = active_pages / DECAY_DIRTY_RATIO;
    return cap < DECAY_DIRTY_MIN_PAGES ? DECAY_DIRTY_MIN_PAGES : cap;
}
/* A free that leaves this much dirty cannot wait for the next tick. */
sl_inline bool decay_burst(size_t dirty_pages, size_t cap) { return dirty_pages > DECAY_DIRTY_BURST * cap; }

/* Growth: the heap maps a new pageblock (or the huge layer a mapping)
 * while it keeps free memory resident. Lazily freed pages (MADV_FREE) are
 * resident until the kernel runs short of memory, and the RSS, VmHWM and
 * ru_maxrss count them as they count dirty pages; a heap that grows faults
 * fresh pages in beside them, and that is what raises its peak (gcc -O2
 * sqlite3.c: cc1 kept 22 MiB lazy at its peak, docs/benchmarks/gcc-rss.md).
 * So at growth the free memory kept resident, dirty and lazy together, is
 * held to the dirty cap: the pages over it are made clean (MADV_DONTNEED),
 * the lazy ones first (they are the older, and nothing reuses them sooner
 * than the dirty), then the dirty ones past the tick's grace. A steady
 * heap (no new pageblock) keeps its cheap MADV_FREE reuse and the decay.
 * Returns the (lazy, dirty) pages to make clean. */
struct growth_clean {
    size_t lazy, dirty;
};
sl_inline struct growth_clean decay_growth_clean(size_t dirty_pages, size_t lazy_pages, size_t active_pages)
{
    size_t cap = decay_dirty_cap(active_pages), resident = dirty_pages + lazy_pages;
    struct growth_clean c = { 0, 0 };
    if (resident <= cap)
        return c;
    size_t over = resident - cap;
    c.lazy = over < lazy_pages ? over : lazy_pages;
    c.dirty = over - c.lazy;
    return c;
}

/* What the purge does with the pageblocks' dirty pages it advises down
 * to keep (the cap, at the tick): the resident free memory over the cap
 * (decay_growth_clean: lazy first) goes clean, since the kernel counts
 * lazy pages in the RSS as long as it has memory to spare, and only the
 * part the cap may keep goes lazy, cheap to take back. gcc -O2
 * sqlite3.c: dirty pages over the cap went lazy at one tick and clean at
 * the next, resident meanwhile while cc1's garbage collector grew
 * (docs/benchmarks/gcc-rss.md). lazy_mode: SLUICE_PURGE=free (otherwise
 * everything advised goes clean). keep 0 (advise everything) is the
 * general case. Pages, not bytes. */
struct advise_plan {
    size_t lazy_clean;  /* lazy pages to make clean */
    size_t dirty_clean; /* dirty pages to make clean */
    size_t dirty_lazy;  /* dirty pages to advise MADV_FREE */
};
sl_inline struct advise_plan decay_advise_plan(size_t dirty_pages, size_t lazy_pages, size_t active_pages,
                                               size_t keep, bool lazy_mode)
{
    size_t advise = dirty_pages > keep ? dirty_pages - keep : 0;
    struct advise_plan p = { 0, 0, 0 };
    if (!lazy_mode) {
        p.dirty_clean = advise;
        return p;
    }
    struct growth_clean c = decay_growth_clean(dirty_pages, lazy_pages, active_pages);
    p.lazy_clean = c.lazy;
    p.dirty_clean = c.dirty < advise ? c.dirty : advise;
    p.dirty_lazy = advise - p.dirty_clean;
    return p;
}
/* The lazy pages a purge asked to make clean were want, it made done
 * (whole spans: maybe more; another purger had some: maybe fewer): the
 * dirty pages it makes clean instead of the missing ones, on top of
 * dirty_clean. Never wraps. */
sl_inline size_t decay_clean_shortfall(size_t want, size_t done) { return done < want ? want - done : 0; }

/* The huge cache's share of the dirty cap (cap_pages: decay_dirty_cap of
 * the pageblocks' active pages and the live huge mappings' pages), after
 * the pageblocks' resident free pages (dirty, not in a hugepage block, and
 * lazy): the bytes of cached mappings that may stay dirty, beside the
 * newest, which the cache always keeps (a program that frees and takes
 * back one buffer in a loop reuses it resident). */
sl_inline size_t decay_huge_room(size_t cap_pages, size_t block_resident_pages)
{
    return (cap_pages > block_resident_pages ? cap_pages - block_resident_pages : 0) << SL_PAGE_SHIFT;
}

/* A drop: the active pages fell by an eighth or more from their high
 * since the last burst purge. A program that frees 9/10 of its heap in
 * less than a tick purges about 17 times (log base 8/7 of 10) on the way
 * down, each time all its dirty pages (MADV_FREE: taking them back costs
 * no fault), and keeps at most what it freed since the last step, a
 * seventh of what it still uses. */
sl_inline bool decay_drop(size_t active_pages, size_t active_high) { return active_pages * 8 <= active_high * 7; }

/* A drop purge is regretted when the program takes back, before its next
 * drop, at least half of the pages it advised: it was churning (a phase
 * that frees everything, then allocates as much again), not leaving. Each
 * regret doubles the time the next drops go unpurged (from one tick up to
 * DECAY_DROP_BACKOFF_MAX_MS); a drop purge not regretted clears it. The
 * new backoff, given the last one and the last drop's pages. */
#define DECAY_DROP_BACKOFF_MAX_MS 8000
sl_inline uint64_t decay_drop_backoff(uint64_t backoff_ms, size_t purged, size_t taken_back, uint64_t tick_ms)
{
    if (!purged || taken_back * 2 < purged)
        return 0;
    backoff_ms = backoff_ms ? 2 * backoff_ms : tick_ms;
    return backoff_ms > DECAY_DROP_BACKOFF_MAX_MS ? DECAY_DROP_BACKOFF_MAX_MS : backoff_ms;
}

/* The owner of a thread heap takes the slabs of a class that remote frees
 * woke (its notify stack for the class, slab/heap.c) on its next refill
 * of that class; a thread that allocates only from its magazines, or none
 * of that class (redis's main thread after its lazy-free thread freed a
 * whole database), never does, and those slabs stay resident however
 * empty they are. So the reclaimer looks at each stack once a tick: an
 * owner that has taken nothing from it (gen, its count of takes,
 * unchanged) while slabs waited for at least tick_ms is idle for that
 * class, and the slabs that remote frees emptied whole are taken from it.
 * An owner that refills the class within a tick of the wake-ups (a
 * churning program: larson, mstress) is never judged idle, so it keeps
 * reusing its own slabs. w is the reclaimer's record for the stack: the
 * gen it last saw, and since when slabs have waited with that gen (0: none
 * wait). */
struct owner_watch {
    uint32_t gen;
    uint64_t since_ms;
};
sl_inline bool decay_owner_idle(struct owner_watch *w, bool waiting, uint32_t gen, uint64_t now, uint64_t tick_ms)
{
    if (!waiting) {
        w->since_ms = 0;
        return false;
    }
    if (!w->since_ms || w->gen != gen) { /* new wake-ups, or the owner took some: watch afresh */
        w->gen = gen;
        w->since_ms = now ? now : 1;
        return false;
    }
    return now - w->since_ms >= tick_ms;
}

/* What is due for one piece of free memory (a cached huge mapping) in
 * state st since state_ms. */
enum decay_action { DECAY_KEEP, DECAY_ADVISE, DECAY_EXPIRE };
sl_inline enum decay_action decay_of(enum page_state st, uint64_t state_ms, uint64_t now, bool force,
                                     uint64_t dirty_decay_ms, uint64_t lazy_decay_ms)
{
    uint64_t age = now - state_ms;
    if (st == PS_DIRTY)
        return force || age >= dirty_decay_ms ? DECAY_ADVISE : DECAY_KEEP;
    return force || age >= lazy_decay_ms ? DECAY_EXPIRE : DECAY_KEEP;
}

/* Hugepage collapse selection (hugify.c), the same kind of policy: a
 * pageblock is collapsed once it has been dense (at most
 * DECAY_DENSE_FREE_MAX pages free) for DECAY_HUGIFY_AGE_MS, long-lived
 * enough to pay for 2 MiB of resident memory; one that turns sparse (more
 * than half free) loses the hugepage and may be purged. dense_ms is when
 * it was first seen dense (0: not dense). */
#define DECAY_DENSE_FREE_MAX  (BLOCK_USABLE_PAGES * 5 / 16)
#define DECAY_SPARSE_FREE_MIN (BLOCK_USABLE_PAGES / 2)
#define DECAY_HUGIFY_AGE_MS   1000
enum hugify_pick { HUGIFY_NOT_DENSE, HUGIFY_DENSE_NOW, HUGIFY_TOO_YOUNG, HUGIFY_PICK };
sl_inline enum hugify_pick hugify_choose(size_t free_pages, uint64_t dense_ms, uint64_t now)
{
    if (free_pages > DECAY_DENSE_FREE_MAX)
        return HUGIFY_NOT_DENSE;
    if (!dense_ms)
        return HUGIFY_DENSE_NOW;
    return now - dense_ms < DECAY_HUGIFY_AGE_MS ? HUGIFY_TOO_YOUNG : HUGIFY_PICK;
}
/* Dense in the kernel's eyes too? A collapse makes every page of the
 * block resident, and pages in use need not be: runs handed out and
 * parked whole, slabs begun and never filled. A small program's one
 * dense block was collapsed from some 200 resident pages to 512 (espresso:
 * 1.2 MiB of its 4.4 MiB peak RSS, khugepaged's copy landing in some runs
 * and not others). So a picked block is collapsed only if at most as many
 * of its pages are not resident (mincore, absent_pages) as a dense block
 * may have free: the collapse then costs no more RSS than the block's
 * free pages would. */
sl_inline bool hugify_resident_enough(size_t absent_pages) { return absent_pages <= DECAY_DENSE_FREE_MAX; }
/* Is the program quiet: its threads (all but the one asking) used at most
 * 1/HUGIFY_QUIET_DIV of a CPU over wall_ns? A background hugepage pass
 * (reclaim/reclaimer.c) is throttled to one collapse a second when no CPU
 * is idle, since a collapse copies 2 MiB and would take that time from a
 * busy program; a quiet program loses nothing to it (the time comes from
 * its neighbours, as khugepaged's does), and it is when a long-running
 * program idles that its long-lived blocks are worth collapsing. Measured
 * on bench/mixed_lifetime on 2 busy cores (load 5): 9 of 48 dense blocks
 * collapsed in a 12 s idle at one a second. No window: not quiet.
 * A window shorter than HUGIFY_QUIET_WINDOW_MS tells nothing (the caller
 * keeps its last verdict and lets the window grow): on 2 overloaded cores
 * two spinning threads of test/hugify.c got no CPU at all for some 30 ms
 * windows, which read as quiet. */
#define HUGIFY_QUIET_DIV       16
#define HUGIFY_QUIET_WINDOW_MS 200
sl_inline bool hugify_quiet(uint64_t program_cpu_ns, uint64_t wall_ns)
{
    return wall_ns && program_cpu_ns <= wall_ns / HUGIFY_QUIET_DIV;
}
sl_inline bool hugify_quiet_window(uint64_t wall_ns) { return wall_ns >= (uint64_t)HUGIFY_QUIET_WINDOW_MS * 1000000u; }
/* May a hugepage block's free pages be purged? Only once it is sparse. */
sl_inline bool hugify_sparse(size_t free_pages) { return free_pages > DECAY_SPARSE_FREE_MIN; }

#endif
