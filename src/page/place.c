/* place.c — where a run goes in the page heap (page.c's lists): the
 * shared run cache's parked runs first, then the resident free pages a
 * block of its type already has (resident first), then the buddy's chunk
 * of the lowest order that fits in a block of its type, a wholly free
 * block, free pages in a row across its type's chunks (a stretch), a new
 * block, and last a piece of another type's block (the fallback,
 * antifrag.h). Every function here runs under the page heap lock.
 */
#include "page_heap.h"

/* A block of `type` with a free chunk of `order`, the shared run cache's
 * parked runs flushed back to the buddy lists (oldest first) until one
 * merges into a chunk that fits; NULL if none. Lock held. */
static struct block *find_in_own(enum pb_type type, unsigned order)
{
    struct block *b = find_in_type(type, order);
    while (!b && runcache_flush_oldest())
        b = find_in_type(type, order);
    return b;
}

/* A wholly free block, re-typed to `type` (its pages are dirty, if it
 * was used before: resident), or NULL. Lock held. */
static struct block *take_free_block(enum pb_type type)
{
    struct block *b = page_heap.free_blocks;
    if (!b)
        return NULL;
    list_unlink(b);
    set_type(b, type);
    stat_add(stats_global, STAT_block_steal, 1);
    wmark_check();
    return b;
}

/* A type with no room of its own and no free block: a new block within
 * the budget, a piece of another type's block (the fallback), or past the
 * budget with no piece to take a new block all the same. Lock held. */
static struct block *find_room(enum pb_type type, unsigned order)
{
    struct block *b;
    bool over = over_budget();
    if (!over && (b = block_new(type, order))) {
        wmark_check();
        return b;
    }
    if ((b = block_fallback(type, order)))
        return b;
    return over ? block_new(type, order) : NULL;
}

/* n free pages in a row at any alignment in a block of `type`, across
 * chunks that are not buddies (block_find_free), when the buddy has no
 * chunk of order log2_ceil(n) there and no block is wholly free (a kept
 * free block's pages are resident; a stretch's may never have been
 * touched). A chunk of 2^order pages exists only at a multiple of
 * 2^order, so a block holds one chunk of 256 pages (the upper half: the
 * header takes the lower's first pages), and every run of 129-256 pages
 * took a block of its own: the mixed-lifetime shape, its buffers all
 * live, mapped 441 pageblocks for 339 blocks' worth of pages (381 with
 * stretches) and so reached a 768 MiB budget, every take past it an
 * extfrag event (docs/benchmarks/extfrag.md). Such a stretch holds an
 * aligned free chunk of a quarter of 2^order at least, so only blocks
 * whose largest chunk is of order - 2 or order - 1 are looked at, the
 * fullest first, at most STRETCH_FIT_SCAN of them (the alternative is a
 * whole block: a new mapping and its faults). The stretch is made
 * read-write and taken (NULL if that is refused: then a whole block, as
 * if there were none). Lock held; *idx: the first page. */
#define STRETCH_FIT_SCAN 32
/* Runs of more pages than this, or any run past the budget (where the
 * next step is another type's piece: 52 of the 1,701 events of the
 * mixed-lifetime shape under 384 MiB were slabs of 6-8 pages whose type
 * had such a stretch). A shorter run's chunk (64 pages at most) has seven
 * aligned places in a block, and taking stretches for them too with no
 * budget in sight cost bench_mixed (4-64 page runs) 2 more pageblocks and
 * 5 MiB of peak RSS (137.2 against 131.6 MiB). */
#define STRETCH_FIT_MIN PCACHE_MAX_PAGES
static struct block *stretch_fit(enum pb_type type, unsigned n, unsigned order, unsigned *idx)
{
    unsigned seen = 0;
    for (unsigned o = order < 2 ? 0 : order - 2; o < order; o++)
        for (struct block *b = page_heap.lists[type][o]; b && seen < STRETCH_FIT_SCAN; b = b->next) {
            if (b->free_pages < n)
                continue;
            seen++;
            if ((*idx = block_find_free(b, n)))
                return block_commit(b, *idx + n) && block_take_range(b, *idx, n) ? b : (*idx = 0, NULL);
        }
    return NULL;
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
    bool stretch = false;
    if (!b && !(b = find_in_own(type, order)) && !(b = take_free_block(type)) && !align_order &&
        (n > STRETCH_FIT_MIN || over_budget()))
        stretch = (b = stretch_fit(type, n, order, &idx)) != NULL;
    if (idx) { /* exactly n pages (resident, or a stretch): nothing to give back */
        if (!stretch)
            block_take_range(b, idx, n);
    } else {
        if (!b && !(b = find_room(type, order)))
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

