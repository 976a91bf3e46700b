/* pcache_budget.h — how many pages one thread's page cache (pcache.c) may
 * park: a policy of the cache's own slow-path events, the heap's dirty cap
 * and a clock, pure functions tested by test/unit_pcache_budget.c with a
 * fake clock, no threads and no sleeps. pcache.c carries out what they
 * decide.
 *
 *   - every cache starts at its least: a 64th of the pages in use
 *     (PCACHE_LEAST_RATIO), a power of two from PCACHE_BUDGET_MIN (256
 *     KiB) to PCACHE_BUDGET_LEAST (2 MiB, a heap of 128 MiB or more). A
 *     run parked per length is kept from every other request, so a
 *     thread that never takes its runs back makes the heap touch fresh
 *     pages while they wait: with 2 MiB for every heap, espresso (a 0.6
 *     MiB heap under glibc) had 1.4 MiB parked in its one page cache and
 *     a peak RSS 0.5 MiB above the same program at 256 KiB, and every
 *     thread of mstress kept its 2 MiB (docs/benchmarks/small-rss.md).
 *     A big heap keeps 2 MiB: at 256 KiB bench_mixed (130 MiB, sparse,
 *     so never grown) drained its cache 14,214 times instead of 1,237,
 *     5% more instructions. The least follows the heap at every
 *     overflow;
 *   - a cache that overflows (a free finds it over its budget: a drain)
 *     after it ran dry PCACHE_GROW_MISSES times or more since its last
 *     overflow (refills; misses before its first overflow, a program
 *     filling its heap, prove nothing) is too small for what the thread
 *     reuses: the runs it drained are the ones it goes on to ask the
 *     shared heap for, under its lock. The budget doubles, up to
 *     PCACHE_BUDGET_MAX (16 MiB) and up to the dirty cap (decay.h: an
 *     eighth of the pages in use): a cache holds no more than the heap
 *     may keep dirty anyway, so a small program's stays at 2 MiB at most;
 *   - an overflow with fewer misses, PCACHE_IDLE_MS or more after the
 *     budget last proved too small, halves it (not below the least): a
 *     thread that frees more than it takes back needs no room to reuse;
 *     so does one that finds its budget above the dirty cap (the heap
 *     shrank);
 *   - it grows only while the heap is dense (its pageblocks' free pages
 *     at most half the pages in use), and an overflow on a sparse heap
 *     halves it: runs parked per length in one thread pin the chunks
 *     they came from, and a fragmented heap then takes fresh memory for
 *     requests of other lengths. bench_mixed, which touches every page
 *     of its runs, runs at about 0.6 free per page in use; a cache grown
 *     there regardless made the heap map 15 more pageblocks, 26 MB of
 *     peak RSS (147 -> 174 MB). bench_sizes' 32-256 KiB band runs at
 *     about 0.35;
 *   - a drop (decay.h: the pages in use down by an eighth, everything
 *     dirty purged) resets it to the minimum: a cache keeps its runs out
 *     of the purge, so that beyond 2 MiB it would hold what the program
 *     just gave up. A live thread's cache is touched only by its thread,
 *     on its slow paths: a thread that stops calling keeps what it has.
 *
 * Measured on 1000 live runs of 32-256 KiB replaced at random
 * (bench_sizes 1 4, SLUICE_STATS=1): with 512 pages 36% of the
 * allocations refilled under the page heap lock (a locked instruction
 * that waits for the program's stores to cold memory) and 6.5% of the
 * frees drained; with a fixed 2048, 7% and 0.4%; with this policy 2.1%
 * and 0.25%, 17,100 page faults instead of 19,400 (runs come back at the
 * addresses they had), and bench_mixed as it was (docs/benchmarks/sizes.md).
 */
#ifndef SL_PCACHE_BUDGET_H
#define SL_PCACHE_BUDGET_H

#include "../base/common.h"

#define PCACHE_BUDGET_MIN   64   /* pages: 256 KiB, a small heap's least */
#define PCACHE_BUDGET_LEAST 512  /* pages: 2 MiB, a big heap's least */
#define PCACHE_LEAST_RATIO  64   /* the least: this fraction of the pages in use */
#define PCACHE_BUDGET_MAX   4096 /* pages: 16 MiB, a thread that reuses runs */
#define PCACHE_GROW_MISSES  4    /* refills between two overflows that prove it too small */
#define PCACHE_IDLE_MS      1000 /* without such proof this long, an overflow halves it */

/* One cache's policy state; its owner's thread only. */
struct pcache_budget {
    uint32_t pages;   /* the budget now: its least .. PCACHE_BUDGET_MAX */
    uint32_t misses;  /* refills since the last overflow (saturates) */
    uint32_t drops;   /* the page heap's drops when last looked at */
    bool armed;       /* it overflowed since it was set up or reset */
    uint64_t busy_ms; /* when the budget last proved too small, or changed */
};

/* What the policy reads of the page heap. */
struct pcache_heap_view {
    uint32_t drops; /* drop purges, ever */
    size_t cap;     /* the dirty cap, pages */
    size_t active;  /* pages in use (handed out, page caches' included) */
    size_t free;    /* free pages of the mapped pageblocks */
};

/* Is the heap sparse: more pages free in its pageblocks than half of
 * those in use? Then runs parked per thread pin chunks it needs. */
sl_inline bool pcache_heap_sparse(struct pcache_heap_view v) { return v.free * 2 > v.active; }

/* The least budget for a heap of v.active pages in use. */
sl_inline uint32_t pcache_budget_least(struct pcache_heap_view v)
{
    size_t l = v.active / PCACHE_LEAST_RATIO;
    if (l <= PCACHE_BUDGET_MIN)
        return PCACHE_BUDGET_MIN;
    if (l >= PCACHE_BUDGET_LEAST)
        return PCACHE_BUDGET_LEAST;
    return (uint32_t)1 << (63 - __builtin_clzll((unsigned long long)l)); /* a power of two, rounded down */
}

sl_inline void pcache_budget_init(struct pcache_budget *b, struct pcache_heap_view v, uint64_t now)
{
    *b = (struct pcache_budget){ .pages = pcache_budget_least(v), .drops = v.drops, .busy_ms = now };
}

/* A refill: the cache had no run for a request. */
sl_inline void pcache_budget_miss(struct pcache_budget *b)
{
    if (b->misses < UINT32_MAX)
        b->misses++;
}

/* An overflow at time now, the page heap as v says: the budget to drain
 * towards. */
sl_inline uint32_t pcache_budget_overflow(struct pcache_budget *b, struct pcache_heap_view v, uint64_t now)
{
    uint32_t misses = b->misses, least = pcache_budget_least(v);
    bool armed = b->armed;
    size_t cap = v.cap;
    b->misses = 0;
    b->armed = true;
    if (v.drops != b->drops) { /* the program just gave memory up: hold the least */
        b->drops = v.drops;
        b->pages = least;
        b->busy_ms = now;
        b->armed = false;
    } else if ((b->pages > cap || pcache_heap_sparse(v)) && b->pages > least) {
        /* the heap shrank, or is sparse */
        b->pages /= 2;
        b->busy_ms = now;
    } else if (armed && misses >= PCACHE_GROW_MISSES) {
        if (b->pages * 2 <= PCACHE_BUDGET_MAX && b->pages * 2 <= cap && !pcache_heap_sparse(v))
            b->pages *= 2;
        b->busy_ms = now;
    } else if (now - b->busy_ms >= PCACHE_IDLE_MS && b->pages > least) {
        b->pages /= 2;
        b->busy_ms = now;
    }
    if (b->pages < least) /* halved past it, or the heap grew */
        b->pages = least;
    return b->pages;
}

#endif
