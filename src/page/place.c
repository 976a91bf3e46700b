/* place.c — where a run goes in the page heap (page.c's lists): the
 * shared run cache's parked runs first, then the resident free pages a
 * block of its type already has (resident first), then the buddy's chunk
 * of the lowest order that fits in a block of its type, a wholly free
 * block, a new block, and last a piece of another type's block (the
 * fallback, antifrag.h). Every function here runs under the page heap
 * lock.
 */
#include "page_heap.h"

/* Find a block of `type` with a free chunk of `order`, in the order of
 * page.h, the shared run cache flushed before anything past step 1. Lock
 * held. */
static struct block *find_block(enum pb_type type, unsigned order)
{
    struct block *b = find_in_type(type, order);
    if (b)
        return b;
    /* parked runs go back to the buddy lists, oldest first, until one
     * merges into a chunk that fits (runcache.c) */
    while (runcache_flush_oldest())
        if ((b = find_in_type(type, order)))
            return b;
    if (page_heap.free_blocks) {
        b = page_heap.free_blocks;
        list_unlink(b);
        set_type(b, type);
        stat_add(stats_global, STAT_block_steal, 1);
        wmark_check();
        return b;
    }
    bool over = over_budget();
    if (!over && (b = block_new(type, order))) {
        wmark_check();
        return b;
    }
    if ((b = block_fallback(type, order)))
        return b;
    return over ? block_new(type, order) : NULL;
}

/* Resident pages first: a run that needs no alignment, for which the
 * buddy has no chunk whose first n pages are resident (buddy_resident:
 * its chunk is clean, never touched or advised, or it has none and a
 * block would be taken or mapped), takes n free pages in a row that are
 * dirty or lazy (block_find_resident), in a block of its type on the
 * purge list. A run placed on clean pages faults them in while the freed
 * ones elsewhere stay resident: over a program that replaces buffers of
 * varied sizes, the heap's whole mapped footprint turns resident
 * (bench_mixed: 78 pageblocks, 54 MiB of free pages dirty at the peak,
 * and with SLUICE_PURGE=off the same peak). Reusing the resident ones
 * first keeps the untouched pages untouched, and costs no fault. At most
 * RESIDENT_FIT_SCAN blocks are looked at, the purge list's newest first;
 * runs of at most RESIDENT_FIT_MAX pages only (a page cache's longest):
 * longer ones are few, rarely find such a stretch, and each search cost
 * them more than it saved (bench_sizes' 256 KiB-2 MiB band: 3.0 -> 3.6
 * us an operation over 112 pageblocks). Lock held; *idx: the first page. */
#define RESIDENT_FIT_SCAN 32
#define RESIDENT_FIT_MAX  PCACHE_MAX_PAGES
/* The buddy's choice is kept when its pages are resident: it leaves a run
 * the rest of its chunk to grow into in place, which a run packed into a
 * stretch lacks (bench_realloc_grow moved 5% more reallocs, 11% slower,
 * when every run took the lowest resident stretch). */
static bool buddy_resident(enum pb_type type, unsigned order, unsigned n)
{
    struct block *b = find_in_type(type, order);
    if (!b)
        return false;
    unsigned o = order + (unsigned)__builtin_ctz(b->order_mask >> order);
    return block_is_resident(b, b->free_head[o], n);
}
static struct block *resident_fit(enum pb_type type, unsigned n, unsigned *idx)
{
    unsigned seen = 0;
    for (struct block *b = page_heap.purge_list; b && seen < RESIDENT_FIT_SCAN; b = b->pnext) {
        if (b->type != type || (unsigned)b->ndirty + b->nlazy < n)
            continue;
        seen++;
        if ((*idx = block_find_resident(b, n)))
            return b;
    }
    return NULL;
}

/* Take a run of n pages aligned to 2^align_order pages; *clean says
 * whether every page of it is known to read as zero. Lock held. */
void *take_locked(enum pb_type type, unsigned n, unsigned align_order, enum page_kind kind, bool *clean)
{
    void *r;
    if (kind == PG_RUN && !align_order && (r = runcache_take(n)))
        return r; /* dirty: *clean stays false */
    unsigned order = log2_ceil(n), idx = 0;
    if (order < align_order)
        order = align_order;
    struct block *b = NULL;
    if (!align_order && n <= RESIDENT_FIT_MAX && !buddy_resident(type, order, n))
        b = resident_fit(type, n, &idx);
    if (b) { /* exactly n resident pages: committed already, nothing to give back */
        block_take_range(b, idx, n);
    } else {
        if (!(b = find_block(type, order)))
            return NULL;
        idx = block_take(b, order);
        if (!block_commit(b, idx + n)) {
            block_give(b, idx, 1u << order); /* as it was; a fresh block may go */
            relink(b);
            return NULL;
        }
        if ((1u << order) > n)
            block_give(b, idx + n, (1u << order) - n);
    }
    block_mark_run(b, idx, n, kind);
    *clean = pages_take(b, idx, n);
    relink(b);
    return (uint8_t *)b + ((size_t)idx << SL_PAGE_SHIFT);
}

