/* page.c — the shared page heap: pageblocks, their buddy lists and life
 * (the per-thread page caches in front of it: pcache.c).
 *
 * Shared state is guarded by page_heap.lock (a leaf lock). A block is on at
 * most one list: lists[type][o] while the largest free chunk it has is of
 * order o, free_blocks when wholly free, none when full. A request of order
 * o takes the first block of the lowest list >= o: best fit by chunk, which
 * is also the fuller block, so sparse blocks drain and come free whole.
 * Wholly free blocks are kept for reuse up to an eighth of all blocks (at
 * least FREE_BLOCKS_MIN), the 1:8 dirty-to-active ratio of the decay (decay.h);
 * beyond that they are unmapped when they decay (relink). Measured: with a
 * fixed 4, a sweep of 256 KiB-2 MiB requests mapped and unmapped a block
 * every 20 operations.
 */
#include "page_heap.h"

#include <errno.h>
#include <string.h>

#include "../base/lock.h"
#include "../os/os.h"
#include "../options/options.h"
#include "../pagemap/pagemap.h"
#include "../teardown/teardown.h"


struct page_heap page_heap = { .lock = SL_LOCK_INIT(LOCK_PAGE_HEAP) };
sl_section_entry("sl_locks") static sl_lock *const page_heap_lock_in_table = &page_heap.lock; /* lock.h's table */

void list_unlink(struct block *b)
{
    if (b->list == LIST_NONE)
        return;
    struct block **head = b->list == LIST_FREE ? &page_heap.free_blocks : &page_heap.lists[b->type][b->list];
    if (b->prev)
        b->prev->next = b->next;
    else
        *head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    if (b->list == LIST_FREE)
        page_heap.nfree_blocks--;
    b->list = LIST_NONE;
    b->next = b->prev = NULL;
}

static void list_link(struct block *b, uint8_t list)
{
    struct block **head = list == LIST_FREE ? &page_heap.free_blocks : &page_heap.lists[b->type][list];
    b->list = list;
    b->prev = NULL;
    b->next = *head;
    if (*head)
        (*head)->prev = b;
    *head = b;
    if (list == LIST_FREE)
        page_heap.nfree_blocks++;
}

void set_type(struct block *b, enum pb_type type)
{
    page_heap.blocks_by_type[b->type]--;
    __atomic_store_n(&b->type, (uint8_t)type, __ATOMIC_RELAXED); /* page_free reads it unlocked */
    page_heap.blocks_by_type[type]++;
}

void block_unmap(struct block *b)
{
    list_unlink(b);
    purge_forget(b);
    block_set_thp(b, false);
    if (b->aprev)
        b->aprev->anext = b->anext;
    else
        page_heap.all_blocks = b->anext;
    if (b->anext)
        b->anext->aprev = b->aprev;
    page_heap.blocks_by_type[b->type]--;
    __atomic_store_n(&page_heap.nblocks, page_heap.nblocks - 1, __ATOMIC_RELAXED); /* pcache.c reads it unlocked */
    pagemap_set((uintptr_t)b, SL_BLOCK, 0);
    b->next = page_heap.unmapping; /* its header stays mapped until page_heap_unlock */
    page_heap.unmapping = b;
    stat_add(stats_global, STAT_block_unmap, 1);
}

/* Give back the blocks of list l, sorted by address, each run of adjacent
 * ones as one range (reservations made one after another are often
 * neighbours, so a bulk release of many blocks makes few big ranges). No
 * qsort: it may allocate. */
static void blocks_release(struct block *l, bool may_start)
{
    uintptr_t a[256];
    while (l) {
        size_t n = 0;
        for (; l && n < 256; l = l->next)
            a[n++] = (uintptr_t)l;
        for (size_t i = 1; i < n; i++) /* insertion sort: few, and often in order */
            for (size_t j = i; j > 0 && a[j - 1] > a[j]; j--) {
                uintptr_t t = a[j];
                a[j] = a[j - 1];
                a[j - 1] = t;
            }
        for (size_t i = 0, j; i < n; i = j) {
            for (j = i + 1; j < n && a[j] == a[j - 1] + SL_BLOCK;)
                j++;
            teardown_release((void *)a[i], (j - i) * SL_BLOCK, may_start);
        }
    }
}

static __thread unsigned gathering;


/* Blocks this thread mapped under the lock whose setup failed, unmapped
 * by its page_heap_unlock after the lock (a header that may not be
 * writable cannot wait on the unmapping list). */
#define AFTER_LOCK_MAX 4
static __thread struct block *after_lock[AFTER_LOCK_MAX];
static __thread unsigned nafter_lock;

/* Queue b's munmap for page_heap_unlock; false if the queue is full. */
static bool unmap_after_unlock(struct block *b)
{
    if (nafter_lock == AFTER_LOCK_MAX)
        return false;
    after_lock[nafter_lock++] = b;
    return true;
}

/* page_heap_unlock with blocks queued for unmapping after the lock (rare:
 * a setup refused). */
static sl_noinline void page_heap_unlock_calls(void)
{
    struct block *calls[AFTER_LOCK_MAX];
    unsigned ncalls = nafter_lock;
    for (unsigned i = 0; i < ncalls; i++)
        calls[i] = after_lock[i];
    nafter_lock = 0;
    page_heap_unlock(); /* the queue is empty now */
    for (unsigned i = 0; i < ncalls; i++)
        os_unmap(calls[i], SL_BLOCK);
}

void page_heap_unlock(void)
{
    if (unlikely(nafter_lock))
        return page_heap_unlock_calls();
    struct block *l = NULL;
    if (!gathering) {
        l = page_heap.unmapping;
        page_heap.unmapping = NULL;
    }
    bool wake = page_heap.boost_wake;
    page_heap.boost_wake = false;
    lock_release(&page_heap.lock);
    if (l) /* the caller may hold other locks: no thread may be started */
        blocks_release(l, false);
    if (wake)
        boost_wake();
}

void page_gather_begin(void) { gathering++; }

/* Unmap wholly free blocks (not pinned) until at most keep are left. */
static size_t release_free_blocks_locked(size_t keep)
{
    size_t n = 0;
    for (struct block *b = page_heap.free_blocks, *next; b && page_heap.nfree_blocks > keep; b = next) {
        next = b->next;
        if (!b->pinned) {
            block_unmap(b);
            n++;
        }
    }
    return n;
}

size_t page_release_free_blocks(bool all)
{
    lock_acquire(&page_heap.lock); /* beside the mmap that follows, nothing */
    if (all) /* a mapping was refused: parked runs may keep blocks from coming free */
        runcache_flush();
    size_t n = release_free_blocks_locked(all ? 0 : free_blocks_keep());
    page_heap_unlock();
    return n;
}

void page_gather_end(void)
{
    if (--gathering)
        return;
    lock_acquire(&page_heap.lock);
    release_free_blocks_locked(free_blocks_keep()); /* what was released is not wanted soon */
    struct block *l = page_heap.unmapping;
    page_heap.unmapping = NULL;
    lock_release(&page_heap.lock);
    if (l)
        blocks_release(l, true);
}

size_t page_active_pages(void) { return ld_relaxed(&page_heap.active_pages); }

size_t free_blocks_keep(void)
{
    return page_heap.nblocks / 8 > FREE_BLOCKS_MIN ? page_heap.nblocks / 8 : FREE_BLOCKS_MIN;
}

/* Put b on the list its free pages call for. A wholly free block stays
 * mapped, its pages dirty, and decays like any free pages: the purge layer
 * unmaps it when it purges it while more than the number kept (an eighth
 * of all blocks, at least FREE_BLOCKS_MIN) are free; a new huge mapping
 * gives back those beyond that number first, and a refused one all of them
 * (page_release_free_blocks). Unmapping at
 * once made a program that frees a big batch and refills it pay an munmap,
 * an mmap, four mprotects and a fault per page for every 2 MiB (measured:
 * 75-86 cycles per cold 256-byte free against 38-50 kept, bench/bulk_free). */
void relink(struct block *b)
{
    uint8_t want;
    if (b->free_pages == BLOCK_USABLE_PAGES)
        want = LIST_FREE;
    else if (b->free_pages == 0)
        want = LIST_NONE;
    else
        want = (uint8_t)log2_floor(b->order_mask); /* largest free chunk */
    if (want == b->list)
        return;
    list_unlink(b);
    if (want == LIST_FREE)
        set_type(b, PB_FREE);
    if (want != LIST_NONE)
        list_link(b, want);
}

/* Make pages [0, end) of b read-write (lazy commit, block.h), rounded up to
 * a step and at least doubling what is committed; false if the kernel
 * refused (no room for another mapping, or the commit limit). Lock held. */
bool block_commit(struct block *b, unsigned end)
{
    unsigned from = b->committed;
    if (end <= from)
        return true;
    unsigned to = (unsigned)align_up(end, BLOCK_COMMIT_STEP);
    if (to < 2 * from)
        to = 2 * from; /* doubling: a block in use commits in a few calls */
    if (to > SL_BLOCK_PAGES)
        to = SL_BLOCK_PAGES;
    if (os_protect((uint8_t *)b + ((size_t)from << SL_PAGE_SHIFT), (size_t)(to - from) << SL_PAGE_SHIFT, true))
        return false;
    b->committed = (uint16_t)to;
    return true;
}

/* A new block for a chunk of `order` (its first take). */
struct block *block_new(enum pb_type type, unsigned order)
{
    /* right below the last block mapped, where the kernel's top-down
     * search puts the next mapping anyway: neighbouring blocks make one
     * range when they are given back together (page_heap_unlock), and fewer
     * mappings for the kernel */
    struct block *b = os_reserve_aligned(SL_BLOCK, SL_BLOCK, page_heap.last_mapped ? page_heap.last_mapped - SL_BLOCK : NULL);
    if (!b)
        return NULL;
    /* the first step holds the header (the memory is zero: nothing
     * committed), and the chunk the caller takes next: in a fresh block
     * the free chunk of order o >= 5 is pages [2^o, 2^(o+1)) (smaller ones
     * are split from [32, 64)), so one call commits both (a 1 MiB run: one
     * mprotect instead of two). SLUICE_THP=madvise commits the whole block
     * at once and asks for a hugepage, which needs the 2 MiB read-write,
     * before anything touches it: the header's first write is the fault
     * that populates the block, and it takes a hugepage only if the
     * advice is already there (advised after it, the block faulted 4 KiB
     * at a time and kept small pages until khugepaged came: mstress took
     * 5,500 faults where mimalloc 3, which advises its arenas at map
     * time, takes 140). One madvise beside the mprotect under the lock,
     * both changes of the mapping's flags only; a refusal leaves 4 KiB
     * pages: nothing lost. */
    unsigned first = sl_opt.thp == THP_MADVISE ? SL_BLOCK_PAGES : BLOCK_COMMIT_STEP;
    if (first < (2u << order))
        first = 2u << order < SL_BLOCK_PAGES ? 2u << order : SL_BLOCK_PAGES;
    if (sl_opt.thp == THP_MADVISE)
        os_huge(b, SL_BLOCK);
    bool ok = !os_protect(b, (size_t)first << SL_PAGE_SHIFT, true);
    if (ok)
        b->committed = (uint16_t)first;
    if (!ok || !pagemap_set((uintptr_t)b, SL_BLOCK, (uintptr_t)b | PM_BLOCK)) {
        if (ok)
            pagemap_set((uintptr_t)b, SL_BLOCK, 0); /* what of it was set */
        if (!unmap_after_unlock(b))
            os_unmap(b, SL_BLOCK);
        errno = ENOMEM;
        return NULL;
    }
    page_heap.last_mapped = (uint8_t *)b;
    b->aprev = NULL;
    b->anext = page_heap.all_blocks;
    if (b->anext)
        b->anext->aprev = b;
    page_heap.all_blocks = b;
    b->list = LIST_NONE;
    b->type = (uint8_t)type;
    block_init(b, type);
    __atomic_store_n(&page_heap.nblocks, page_heap.nblocks + 1, __ATOMIC_RELAXED); /* pcache.c reads it unlocked */
    page_heap.blocks_by_type[type]++;
    stat_add(stats_global, STAT_block_map, 1);
    return b;
}


void page_set_budget(size_t bytes)
{
    lock_acquire(&page_heap.lock);
    page_heap.budget = bytes;
    page_heap_unlock();
}

/* Would one more pageblock take the heap past its budget? (lock held) */
bool over_budget(void) { return page_heap.budget && (page_heap.nblocks + 1) * SL_BLOCK > page_heap.budget; }

/* Give a run back to the buddy lists; its pages are in state st (dirty
 * unless just purged). */
void run_give_locked(void *run, enum page_state st)
{
    struct page *pg = page_of(run);
    struct block *b = block_of(run);
    unsigned first = (unsigned)(pg - block_pages(b)), n = pg->h.npages;
    block_give(b, first, n);
    pages_put(b, first, n, st);
    relink(b);
}

/* A freed run leaves the thread: parked whole in the shared run cache, or
 * back to the buddy lists, dirty. Lock held. */
void release_locked(void *run)
{
    if (!runcache_park(run))
        run_give_locked(run, PS_DIRTY);
}

bool page_resize(void *run, size_t new_npages)
{
    struct page *pg = page_of(run);
    struct block *b = block_of(run);
    unsigned first = (unsigned)(pg - block_pages(b)), n = pg->h.npages;
    if (new_npages == n)
        return true;
    if (new_npages == 0 || first + new_npages > SL_BLOCK_PAGES)
        return false;
    bool ok = true;
    lock_acquire(&page_heap.lock);
    if (new_npages < n) {
        block_give(b, first + (unsigned)new_npages, n - (unsigned)new_npages);
        pages_put(b, first + (unsigned)new_npages, n - (unsigned)new_npages, PS_DIRTY);
    } else {
        unsigned end = first + (unsigned)new_npages;
        ok = block_commit(b, end) && (block_take_range(b, first + n, end - first - n) ||
                                      (runcache_unpark_range(b, first + n, end) &&
                                       block_take_range(b, first + n, end - first - n)));
        if (ok)
            pages_take(b, first + n, (unsigned)new_npages - n);
    }
    if (ok) {
        block_mark_run(b, first, (unsigned)new_npages, (enum page_kind)pg->h.kind);
        relink(b);
    }
    page_heap_unlock();
    return ok;
}

void page_gauges(struct page_gauges *g)
{
    lock_acquire(&page_heap.lock);
    g->blocks = page_heap.nblocks;
    g->free_blocks = page_heap.nfree_blocks;
    g->free_pages = 0;
    for (int t = 0; t < PB_NTYPES; t++) {
        g->blocks_by_type[t] = page_heap.blocks_by_type[t];
        for (unsigned k = 0; k < NBUCKETS; k++)
            for (struct block *b = page_heap.lists[t][k]; b; b = b->next)
                g->free_pages += b->free_pages;
    }
    g->free_pages += page_heap.nfree_blocks * BLOCK_USABLE_PAGES;
    g->parked_pages = runcache_pages(); /* free and dirty, though not the buddy's */
    g->free_pages += g->parked_pages;
    g->dirty_pages = page_heap.dirty_pages + g->parked_pages;
    g->lazy_pages = page_heap.lazy_pages;
    g->budget = page_heap.budget;
    g->thp_blocks = page_heap.thp_blocks;
    g->thp_dirty_pages = page_heap.thp_dirty_pages;
    page_heap_unlock();
}

void page_runcache_flush(void)
{
    lock_acquire(&page_heap.lock);
    runcache_flush();
    page_heap_unlock();
}

sl_lock *page_fork_lock(void) { return &page_heap.lock; }

/* The page layer's report to the statistics (stats.h). */
static void page_report(uint64_t c[STAT_COUNT], uint64_t g[GAUGE_COUNT])
{
    (void)c;
    struct page_gauges pg;
    page_gauges(&pg);
    g[GAUGE_blocks] = pg.blocks;
    g[GAUGE_blocks_slab] = pg.blocks_by_type[PB_SLAB];
    g[GAUGE_blocks_reclaim] = pg.blocks_by_type[PB_RECLAIM];
    g[GAUGE_blocks_run] = pg.blocks_by_type[PB_RUN];
    g[GAUGE_blocks_buf] = pg.blocks_by_type[PB_BUF];
    g[GAUGE_blocks_free] = pg.blocks_by_type[PB_FREE];
    g[GAUGE_budget_bytes] = pg.budget;
    g[GAUGE_thp_blocks] = pg.thp_blocks;
    g[GAUGE_free_page_bytes] = (uint64_t)pg.free_pages << SL_PAGE_SHIFT;
    g[GAUGE_active_bytes] = ((uint64_t)pg.blocks * BLOCK_USABLE_PAGES - pg.free_pages) << SL_PAGE_SHIFT;
    g[GAUGE_dirty_bytes] += (uint64_t)pg.dirty_pages << SL_PAGE_SHIFT;
    g[GAUGE_dirty_thp_bytes] = (uint64_t)pg.thp_dirty_pages << SL_PAGE_SHIFT;
    g[GAUGE_parked_bytes] = (uint64_t)pg.parked_pages << SL_PAGE_SHIFT;
    g[GAUGE_lazy_bytes] += (uint64_t)pg.lazy_pages << SL_PAGE_SHIFT;
    g[GAUGE_clean_bytes] += (uint64_t)(pg.free_pages - pg.dirty_pages - pg.lazy_pages) << SL_PAGE_SHIFT;
    g[GAUGE_block_header_bytes] = (uint64_t)pg.blocks * BLOCK_HEADER_PAGES * SL_PAGE;
    g[GAUGE_mapped_bytes] += (uint64_t)pg.blocks * SL_BLOCK;
}
STAT_SOURCE(page_source, page_report);
