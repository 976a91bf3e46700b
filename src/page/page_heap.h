/* page_heap.h — internal to the page layer (page.c, purge.c, purge_decay.c, ...): the shared
 * page heap and the helpers both files use. Everything here is guarded by
 * page_heap.lock unless it says otherwise.
 */
#ifndef SL_PAGE_HEAP_H
#define SL_PAGE_HEAP_H

#include "../base/lock.h"
#include "antifrag.h"
#include "page.h"

#define NBUCKETS        (BLOCK_MAX_ORDER + 1)
#define LIST_NONE       0xff
#define LIST_FREE       0xfe
#define FREE_BLOCKS_MIN 4

struct page_heap {
    sl_lock lock;
    struct block *lists[PB_NTYPES][NBUCKETS];
    struct block *free_blocks;
    struct block *unmapping;  /* out of the pagemap, unmapped by page_heap_unlock */
    uint8_t *last_mapped;     /* the last block mapped: the next goes below it */
    size_t nfree_blocks, nblocks; /* nblocks: stored atomically, read without the lock by pcache.c */
    size_t budget;            /* bytes of pageblocks to stay within (page_set_budget); 0: none */
    size_t blocks_by_type[PB_NTYPES];
    /* purge state */
    struct block *purge_list; /* blocks with dirty or lazy pages */
    struct block *all_blocks; /* every mapped block (anext) */
    size_t thp_blocks;        /* blocks with thp set */
    /* boost (page.c; reclaim/boost.c does the work): blocks of headroom
     * wanted beyond the low watermark, raised by extfrag events */
    struct af_boost boost;    /* antifrag.h */
    bool boost_wake;          /* page_heap_unlock wakes the reclaimer */
    /* written under the lock, read without it by purge_maybe */
    _Atomic size_t dirty_pages, lazy_pages, active_pages;
    _Atomic size_t thp_dirty_pages; /* of dirty_pages, those in thp blocks: never purged */
    _Atomic size_t taken_back;      /* lazy pages taken off the free lists, ever (a drop purge's regret) */
    _Atomic uint32_t drops;         /* drop purges, ever: page caches fall back to their least budget */
    /* pages the page caches' budgets have grown past the least, summed
     * (pcache.c; a fall is added as its two's complement): the shared run
     * cache parks that much less */
    _Atomic size_t pcache_extra;
};
extern struct page_heap page_heap;

void relink(struct block *b);
/* Take a wholly free block out of the heap and the pagemap; page_heap_unlock
 * gives its memory back once the lock is dropped. */
void block_unmap(struct block *b);
/* Release the page heap lock, then give back the blocks block_unmap took:
 * adjacent ones coalesced into one range, for the teardown layer (which
 * queues a range of SLUICE_TEARDOWN_MIN or more while workers run). Every
 * release of the lock in page.c and purge.c goes through here. */
void page_heap_unlock(void);
size_t free_blocks_keep(void);
/* Make pages [0, end) of b read-write (lazy commit); false if refused. */
bool block_commit(struct block *b, unsigned end);

/* Give a run back to the buddy lists; its pages are in state st. */
void run_give_locked(void *run, enum page_state st);

/* runcache.c: the shared run cache (lock held but for runcache_pages) */
#define RC_MAX_PAGES 256 /* the longest medium run: 1 MiB */
/* Park a freed run; false if it is not one to park (the caller gives it
 * to the buddy lists). Past the cap the oldest parked runs go there. */
bool runcache_park(void *run);
/* A parked run of n to n + n / PCACHE_FIT_DIV pages, taken out, or NULL. */
void *runcache_take(unsigned n);
/* The oldest parked run back to the buddy lists, dirty; false if none. */
bool runcache_flush_oldest(void);
/* The parked runs among pages [first, end) of b (walked from first, a
 * chunk or run head, up to the first page in use) back to the buddy
 * lists, so that a run ending at first may grow in place; false if none. */
bool runcache_unpark_range(struct block *b, unsigned first, unsigned end);
/* Every parked run back to the buddy lists, dirty; returns how many. */
size_t runcache_flush(void);
/* Take out up to max runs parked at or before cutoff_ms, oldest first,
 * until max_pages pages are taken: the purge layer advises them outside
 * the lock and gives them back (run_give_locked). Returns how many. */
unsigned runcache_take_old(uint64_t cutoff_ms, size_t max_pages, void **out, unsigned max);
size_t runcache_pages(void); /* pages parked (no lock needed) */
/* sl_check: the lists and counts; parked_seen is how many parked heads
 * the walk of the blocks found. */
void runcache_check(size_t parked_seen);

/* hugify.c */
/* b's thp flag; keeps thp_blocks and thp_dirty_pages right. */
void block_set_thp(struct block *b, bool on);
/* A purge is about to take pages of b: false if b is a dense hugepage
 * (a purge would split it); a sparse one loses its flag and may go. */
bool hugify_may_purge(struct block *b);
/* Before a purge of everything (sl_purge, memory pressure): every
 * hugepage block not being collapsed loses its flag, so that the purge
 * makes its free pages clean too (a split each). Takes the page heap lock. */
void hugify_split_all(void);
/* Called from the decay pass outside every lock; background: the
 * reclaimer (MADV_COLLAPSE), else a program's own slow path
 * (MADV_HUGEPAGE, khugepaged does the copy). */
void hugify(uint64_t now_ms, bool background, unsigned max, bool (*go_on)(void));
void hugify_fork_child(void);

/* page.c, for fallback.c: a block leaves its list; it changes type; the
 * first block of type with a free chunk of order at least order. */
void list_unlink(struct block *b);
void set_type(struct block *b, enum pb_type type);
/* fallback.c, for page.c (lock held, but boost_wake: after it): an extfrag
 * event raises the boost; after a block was taken, wake reclaim under the
 * low watermark; wake it (or the owners). */
void boost_event(void);
void wmark_check(void);
/* page.c, for place.c (lock held): map a new block of `type` with a free
 * chunk of `order` (NULL if refused); would one more block pass the budget? */
struct block *block_new(enum pb_type type, unsigned order);
bool over_budget(void);
void boost_wake(void);

/* The first block of type with a free chunk of order at least order. */
sl_inline struct block *find_in_type(enum pb_type type, unsigned order)
{
    for (unsigned o = order; o < NBUCKETS; o++)
        if (page_heap.lists[type][o])
            return page_heap.lists[type][o];
    return NULL;
}

/* fallback.c's steal, inline here so that the fallback costs no calls
 * (find_room, place.c). */
/* A piece of another type's block with a free chunk of `order`, in the
 * fallback table's order (antifrag.h), from the victim type's block with
 * the largest free chunk (af_fallback_list): an external fragmentation
 * event, counted, serious or not; the boost rises; a block at least half
 * free is re-typed to the taker (its runs keep their own kind: a run's
 * head says what it is, and cache_stack keeps it out of the wrong cache).
 * Lock held; NULL if no other type has room. */
sl_inline struct block *block_fallback(enum pb_type type, unsigned order)
{
    for (unsigned i = 0; i < AF_NFALLBACKS; i++) {
        enum pb_type victim = af_fallbacks[type][i];
        unsigned mask = 0;
        for (unsigned o = order; o < NBUCKETS; o++)
            mask |= (unsigned)!!page_heap.lists[victim][o] << o;
        int list = af_fallback_list(mask, order);
        if (list < 0)
            continue;
        struct block *b = page_heap.lists[victim][list];
        stat_add(stats_global, STAT_extfrag, 1);
        if (af_serious(type, victim))
            stat_add(stats_global, STAT_extfrag_serious, 1);
        boost_event();
        if (af_steal_whole(b->free_pages)) {
            list_unlink(b);
            set_type(b, type);
        }
        return b;
    }
    return NULL;
}


/* page.c, for pcache.c: take a run of n pages aligned to 2^align_order
 * pages (*clean: every page reads as zero), and give one back (parked whole
 * in the shared run cache, or to the buddy lists, dirty). Lock held. */
void *take_locked(enum pb_type type, unsigned n, unsigned align_order, enum page_kind kind, bool *clean);
void release_locked(void *run);

/* purge.c */
void purge_forget(struct block *b); /* b is being unmapped */
/* Pages [first, first + n) of b became free in state st / were taken. */
void pages_put(struct block *b, unsigned first, unsigned n, enum page_state st);
bool pages_take(struct block *b, unsigned first, unsigned n);
/* Every free page of b is now dirty (a collapse made them resident). */
void pages_all_dirty(struct block *b);
/* Dirty pages a purge may take: those outside dense hugepages, and the
 * parked runs of the shared run cache. */
size_t purgeable_dirty(void);
/* Purge a range now (outside the lock); the state its pages are left in. */
enum page_state purge_range(void *p, size_t bytes);
/* Move up to max_pages free pages from state `from` to `to`, largest
 * spans first, in blocks whose pages entered `from` at or before
 * cutoff_ms; and the same for the shared run cache's runs parked at or
 * before cutoff_ms, oldest first. Each returns the pages moved; wait:
 * false gives up if another thread purges. Outside the lock. */
size_t purge_spans(enum page_state from, enum page_state to, uint64_t cutoff_ms, size_t max_pages, bool wait);
size_t purge_parked(enum page_state to, uint64_t cutoff_ms, size_t max_pages, bool wait);

/* purge_decay.c */
/* The most dirty pages kept: an eighth of the active pages, at least 2 MiB. */
size_t purge_dirty_cap(void);
/* Wake the reclaimer; false if there is none. */
bool purge_kick_reclaimer(void);
/* Outside the lock: enforce the dirty cap and run a due decay pass. */
void purge_maybe(void);
/* After a take that may have mapped a pageblock, no lock held: hold the
 * resident free pages to the dirty cap (purge.c, decay_growth_clean). */
void purge_growth(void);
/* A page cache's budget shrank (pcache.c): the pages it drains beyond its
 * new budget leave the pages in use, but the program freed nothing; the
 * drop policy's high is lowered by as much, so that a cache that shrinks
 * is no drop (a false one purged what the program took back at once: a
 * regret, and the backoff then kept its real last frees from purging). */
void purge_cache_shrank(size_t pages);

#endif
