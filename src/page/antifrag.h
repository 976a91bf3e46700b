/* antifrag.h — the anti-fragmentation policy (docs/DESIGN.md): pure
 * functions of the page heap's counts and a clock, which page.c's
 * mechanism (buddy lists, block lifecycle) carries out, and which
 * test/unit_antifrag.c tests with a fake clock, no threads, no sleeps.
 *
 * The kernel's version is mm/page_alloc.c: the fallbacks[] table,
 * can_steal_fallback/steal_suitable_fallback and boost_watermark. In user
 * space the memory is the heap budget (SLUICE_HEAP_LIMIT, or the cgroup's
 * limit): within it a type short of room maps a new pageblock; past it,
 * it takes a piece of another type's block, an external fragmentation
 * event, which raises the watermark boost.
 *
 *   headroom  wholly free blocks plus the blocks the budget still allows:
 *             what a type short of room can take without an event
 *   low       budget / 32 (at least 1): under low + boost, wake reclaim
 *   high      3 x low + boost: reclaim works until the headroom is there
 *   boost     +1 block per event, at most budget / 8 (the kernel's
 *             watermark_boost_factor is of that order), gone
 *             AF_BOOST_DECAY_MS after the last event
 *   steal     the piece comes from the victim type's block with the
 *             largest free chunk (__rmqueue_fallback), and a block at
 *             least half free is re-typed (steal_suitable_fallback): the
 *             taker fills it, and its next pieces are no events
 *   serious   a SLAB or RECLAIM piece in a RUN or BUF block: long-lived
 *             objects pin a block of transient buffers
 *   placement a malloc class's slabs go in SLAB blocks when a slab holds
 *             many objects (small ones: 512 B and less), in BUF blocks
 *             when it holds few (af_slab_type)
 * With no budget, or SLUICE_BOOST=0, there is no boost and no wake.
 */
#ifndef SL_ANTIFRAG_H
#define SL_ANTIFRAG_H

#include "block.h"

#define AF_BOOST_DECAY_MS 1000
#define AF_BOOST_MAX_DIV  8
#define AF_WMARK_LOW_DIV  32
#define AF_WMARK_HIGH_X   3

/* Fallback order when a type has no room: which other types it may take a
 * piece from, best first (the kernel's fallbacks[] table): the long-lived
 * (SLAB, RECLAIM) from each other first, the transient (RUN, BUF) from
 * each other first; slabs from slabs before runs. */
#define AF_NFALLBACKS 3
static const uint8_t af_fallbacks[PB_NTYPES][AF_NFALLBACKS] = {
    [PB_SLAB] = { PB_RECLAIM, PB_BUF, PB_RUN },
    [PB_RECLAIM] = { PB_SLAB, PB_BUF, PB_RUN },
    [PB_RUN] = { PB_BUF, PB_RECLAIM, PB_SLAB },
    [PB_BUF] = { PB_RUN, PB_SLAB, PB_RECLAIM },
};

/* The boost: blocks it adds to both watermarks, and its last event. */
struct af_boost {
    size_t blocks;
    uint64_t ms;
};

sl_inline size_t af_headroom(size_t budget_blocks, size_t nblocks, size_t nfree_blocks)
{
    return (budget_blocks > nblocks ? budget_blocks - nblocks : 0) + nfree_blocks;
}
sl_inline size_t af_wmark_low(size_t budget_blocks)
{
    return budget_blocks / AF_WMARK_LOW_DIV ? budget_blocks / AF_WMARK_LOW_DIV : 1;
}
/* The boost at now: it lapses AF_BOOST_DECAY_MS after its last event. */
sl_inline size_t af_boost_level(struct af_boost *b, uint64_t now)
{
    if (b->blocks && now - b->ms > AF_BOOST_DECAY_MS)
        b->blocks = 0;
    return b->blocks;
}
/* An external fragmentation event at now: one block more, up to the cap. */
sl_inline void af_boost_raise(struct af_boost *b, size_t budget_blocks, uint64_t now)
{
    size_t max = budget_blocks / AF_BOOST_MAX_DIV ? budget_blocks / AF_BOOST_MAX_DIV : 1;
    if (af_boost_level(b, now) < max)
        b->blocks++;
    b->ms = now;
}
/* After a block was taken: is the headroom under the low watermark? */
sl_inline bool af_below_low(size_t headroom, size_t budget_blocks, size_t boost)
{
    return headroom < af_wmark_low(budget_blocks) + boost;
}
/* Blocks of headroom reclaim should win back: up to the high watermark.
 * *urgent: the headroom is under the low one itself. */
sl_inline size_t af_deficit(size_t headroom, size_t budget_blocks, size_t boost, bool *urgent)
{
    size_t high = AF_WMARK_HIGH_X * af_wmark_low(budget_blocks) + boost;
    size_t want = headroom < high ? high - headroom : 0;
    if (urgent)
        *urgent = want && headroom < af_wmark_low(budget_blocks);
    return want;
}
/* Which pageblock type a malloc size class's slabs belong in, by the
 * objects one slab holds. Lifetime is not known at malloc; size is the
 * best guess there is: small objects (many to a slab) are a program's
 * records, which tend to live long, and objects of a few to a slab (above
 * 512 B: size_class.h gives 64 or more objects up to there) are its
 * buffers, which tend to come and go (TCMalloc's hugepage filler keeps
 * few-object spans apart from many-object ones for the same reason).
 * Slabs of buffers interleaved with records leave the records' blocks a
 * third free once the buffers go (bench/mixed_lifetime: 7% of the idle
 * heap on hugepages); apart, the records' blocks stay dense and are
 * collapsed. Not in RUN blocks: slabs of 5-16 pages scattered among the
 * medium runs broke the runs' buddy chunks (bench/mixed: 96 pageblocks
 * mapped instead of 75, peak RSS 180 MiB instead of 141). Object caches
 * keep the type their creator chose. */
#define AF_SLAB_DENSE_OBJECTS 64
sl_inline enum pb_type af_slab_type(unsigned objects_per_slab)
{
    return objects_per_slab >= AF_SLAB_DENSE_OBJECTS ? PB_SLAB : PB_BUF;
}
/* Which list of the victim type a fallback of `order` takes from, given
 * the mask of its non-empty lists (bit o: a block whose largest free
 * chunk is of order o), or -1 if none fits: the highest, the kernel's
 * choice for unmovable pages. Its block is roughly the one with the most
 * free pages, the one a steal can re-type whole, after which the taker's
 * next pieces come from its own type. The fullest block that fits (the
 * list a type takes its own chunks from) scattered the pieces instead,
 * one event each in block after block: the mixed-lifetime shape's records
 * and buffers under a 384 MiB budget, all live, made 2,829 events that
 * way and re-typed 109 blocks; 1,628 and 183 this way
 * (docs/benchmarks/extfrag.md). */
sl_inline int af_fallback_list(unsigned lists_mask, unsigned order)
{
    unsigned m = lists_mask >> order;
    return m ? (int)(order + log2_floor(m)) : -1;
}
/* Does a piece taken from a block with free_pages free re-type it? */
sl_inline bool af_steal_whole(size_t free_pages) { return free_pages >= BLOCK_USABLE_PAGES / 2; }
/* Is a piece of victim's block taken by taker a serious event? */
sl_inline bool af_serious(enum pb_type taker, enum pb_type victim)
{
    return (victim == PB_RUN || victim == PB_BUF) && (taker == PB_SLAB || taker == PB_RECLAIM);
}

#endif
