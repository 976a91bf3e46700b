/* page_check.c — the page layer's part of sl_check, and its walk over
 * allocated runs for the statistics.
 *
 * page_check walks every pageblock through the pagemap and checks, with
 * purge_lock and the page heap lock held (so no span is in flight):
 *   - the buddy state: every page from the first usable one is covered by
 *     exactly one free chunk (head PG_FREE, naturally aligned, no free head
 *     inside it, its equal buddy not free) or one allocated run (head
 *     PG_SLAB or PG_RUN with its length; a slab's other pages PG_TAIL
 *     pointing at it); free_pages, order_mask and the per-order lists agree;
 *     no more free pages in a row than stretch_max says (block_find_free);
 *   - the free-page state maps: bits only on free pages, never both, the
 *     per-block counts and the global dirty, lazy and active page counts;
 *   - lazy commit: every run lies in the committed part, every page past
 *     it is clean;
 *   - the block lists: each block on exactly the list its free pages call
 *     for (relink), of its type; the purge list; the global block counts;
 *   - the shared run cache (runcache_check): every run the walk finds
 *     parked is on its lists, and only those.
 * Each allocated run is handed to `run` for the layer above to check.
 */
#include "../base/fatal.h"
#include "../pagemap/pagemap.h"
#include "page_heap.h"

#define FAIL(what, p, detail, num) sl_fatal("sl_check: " what, (p), (detail), (num))

struct walk {
    void (*run)(struct page *head, void *arg);
    void *arg;
    size_t blocks, free_blocks, by_type[PB_NTYPES], on_list[PB_NTYPES][NBUCKETS], purge, dirty, lazy, active;
    size_t parked, parked_pages; /* runs in the shared run cache (runcache.c) */
};

static unsigned popcount_map(const uint64_t *m)
{
    unsigned n = 0;
    for (unsigned w = 0; w < SL_BLOCK_PAGES / 64; w++)
        n += popcount64(m[w]);
    return n;
}

static bool state_bit(const uint64_t *m, unsigned i) { return (m[i / 64] >> (i % 64)) & 1; }

static void check_block(struct block *b, struct walk *w)
{
    struct page *pg = block_pages(b);
    unsigned free = 0, chunks[BLOCK_NORDERS] = { 0 }, stretch = 0, longest = 0;
    for (unsigned i = 0; i < BLOCK_HEADER_PAGES; i++)
        if (state_bit(b->dirty, i) || state_bit(b->lazy, i))
            FAIL("free-page state on a header page of block", b, "page", i);
    if (b->committed < BLOCK_COMMIT_STEP || b->committed > SL_BLOCK_PAGES ||
        (b->committed % BLOCK_COMMIT_STEP && b->committed != SL_BLOCK_PAGES))
        FAIL("block committed up to a bad page", b, "committed", b->committed);
    for (unsigned i = b->committed; i < SL_BLOCK_PAGES; i++)
        if (state_bit(b->dirty, i) || state_bit(b->lazy, i))
            FAIL("page past a block's committed part not clean", b, "page", i);
    for (unsigned i = BLOCK_HEADER_PAGES; i < SL_BLOCK_PAGES;) {
        struct page_hdr *h = &pg[i].h;
        if (state_bit(b->dirty, i) && state_bit(b->lazy, i))
            FAIL("page both dirty and lazy in block", b, "page", i);
        if (h->kind == PG_FREE) {
            unsigned o = h->order, n = 1u << o;
            if (o > BLOCK_MAX_ORDER || (i & (n - 1)) || i + n > SL_BLOCK_PAGES)
                FAIL("free chunk of a bad order or alignment in block", b, "page", i);
            for (unsigned j = i + 1; j < i + n; j++)
                if (pg[j].h.kind == PG_FREE)
                    FAIL("free chunk head inside another free chunk in block", b, "page", j);
            unsigned buddy = i ^ n;
            if (o < BLOCK_MAX_ORDER && buddy >= BLOCK_HEADER_PAGES && pg[buddy].h.kind == PG_FREE &&
                pg[buddy].h.order == o)
                FAIL("free buddies left unmerged in block", b, "page", i);
            free += n;
            chunks[o]++;
            stretch += n; /* free pages in a row, across chunks */
            longest = stretch > longest ? stretch : longest;
            i += n;
        } else if (h->kind == PG_SLAB || h->kind == PG_RUN) {
            unsigned n = h->npages;
            if (h->head != i || !n || i + n > SL_BLOCK_PAGES)
                FAIL("allocated run with a bad head or length in block", b, "page", i);
            if (i + n > b->committed)
                FAIL("allocated run past the committed part of block", b, "page", i);
            for (unsigned j = i; j < i + n; j++) {
                if (state_bit(b->dirty, j) || state_bit(b->lazy, j))
                    FAIL("free-page state on an allocated page of block", b, "page", j);
                if (h->kind == PG_SLAB && j > i && (pg[j].h.kind != PG_TAIL || pg[j].h.head != i))
                    FAIL("slab page not marked as its tail in block", b, "page", j);
            }
            if (h->kind == PG_RUN && pg[i].run.parked) {
                w->parked++;
                w->parked_pages += n;
            } else {
                w->active += n;
            }
            w->run(&pg[i], w->arg);
            stretch = 0;
            i += n;
        } else {
            FAIL("page in neither a free chunk nor a run, in block", b, "page", i);
        }
    }
    if (free != b->free_pages)
        FAIL("free page count wrong in block", b, "counted", free);
    if (longest > b->stretch_max)
        FAIL("free pages in a row past the block's stretch_max in block", b, "longest", longest);
    for (unsigned o = 0; o < BLOCK_NORDERS; o++) {
        unsigned n = 0, prev = 0;
        for (unsigned i = b->free_head[o]; i; i = pg[i].free.next) {
            if (i < BLOCK_HEADER_PAGES || i >= SL_BLOCK_PAGES || pg[i].h.kind != PG_FREE || pg[i].h.order != o ||
                pg[i].free.prev != prev || ++n > chunks[o])
                FAIL("free list of order broken in block", b, "order", o);
            prev = i;
        }
        if (n != chunks[o] || !!(b->order_mask & (1u << o)) != !!n)
            FAIL("free list of order misses chunks in block", b, "order", o);
    }
    if (popcount_map(b->dirty) != b->ndirty || popcount_map(b->lazy) != b->nlazy)
        FAIL("dirty or lazy count wrong in block", b, "dirty", b->ndirty);
    uint8_t want = b->free_pages == BLOCK_USABLE_PAGES ? LIST_FREE
                   : b->free_pages == 0               ? LIST_NONE
                                                      : (uint8_t)log2_floor(b->order_mask);
    if (b->list != want)
        FAIL("block on the wrong list", b, "list", b->list);
    if (want == LIST_FREE && b->type != PB_FREE)
        FAIL("wholly free block not typed FREE", b, "type", b->type);
    if (want != LIST_FREE && b->type == PB_FREE)
        FAIL("block typed FREE with pages in use", b, "free pages", b->free_pages);
    if (b->type >= PB_NTYPES)
        FAIL("block of no type", b, "type", b->type);
    if (b->on_purge_list != (b->ndirty || b->nlazy))
        FAIL("block's purge-list flag disagrees with its dirty and lazy pages", b, "dirty", b->ndirty);
    w->blocks++;
    w->by_type[b->type]++;
    if (want == LIST_FREE)
        w->free_blocks++;
    else if (want != LIST_NONE)
        w->on_list[b->type][want]++;
    w->purge += b->on_purge_list;
    w->dirty += b->ndirty;
    w->lazy += b->nlazy;
}

static void visit(uintptr_t granule, uintptr_t e, void *arg)
{
    if (!(e & PM_BLOCK))
        return;
    if ((uintptr_t)pagemap_region(e) != granule)
        FAIL("pagemap entry of a pageblock points elsewhere: granule", (void *)granule, NULL, 0);
    check_block((struct block *)granule, arg);
}

/* Walk a doubly linked block list; every block must say it is on it. */
static size_t check_list(struct block *head, enum pb_type type, uint8_t list, size_t bound)
{
    size_t n = 0;
    struct block *prev = NULL;
    for (struct block *b = head; b; prev = b, b = b->next) {
        if (pagemap_get((uintptr_t)b) != ((uintptr_t)b | PM_BLOCK) || b->prev != prev || b->list != list ||
            (list != LIST_FREE && b->type != type) || ++n > bound)
            FAIL("page heap list broken at block", b, "list", list);
    }
    return n;
}

void page_check(void (*run)(struct page *head, void *arg), void *arg)
{
    struct walk w = { .run = run, .arg = arg };
    lock_acquire(purge_fork_lock()); /* no span in flight */
    lock_acquire(&page_heap.lock);
    pagemap_walk(visit, &w);
    if (w.blocks != page_heap.nblocks)
        FAIL("pageblock count wrong: counted", NULL, "blocks", w.blocks);
    for (int t = 0; t < PB_NTYPES; t++) {
        if (w.by_type[t] != page_heap.blocks_by_type[t])
            FAIL("pageblock count of a type wrong: type", NULL, "counted", w.by_type[t]);
        for (unsigned k = 0; k < NBUCKETS; k++)
            if (check_list(page_heap.lists[t][k], (enum pb_type)t, (uint8_t)k, w.blocks) != w.on_list[t][k])
                FAIL("page heap list misses blocks: bucket", NULL, "order", k);
    }
    if (check_list(page_heap.free_blocks, PB_FREE, LIST_FREE, w.blocks) != w.free_blocks ||
        w.free_blocks != page_heap.nfree_blocks)
        FAIL("free pageblock list wrong: counted", NULL, "blocks", w.free_blocks);
    size_t n = 0;
    struct block *prev = NULL;
    for (struct block *b = page_heap.purge_list; b; prev = b, b = b->pnext)
        if (!b->on_purge_list || b->pprev != prev || ++n > w.blocks)
            FAIL("purge list broken at block", b, NULL, 0);
    if (n != w.purge)
        FAIL("purge list misses blocks: counted", NULL, "blocks", n);
    if (w.dirty != ld_relaxed(&page_heap.dirty_pages) || w.lazy != ld_relaxed(&page_heap.lazy_pages))
        FAIL("global dirty or lazy page count wrong: counted", NULL, "dirty pages", w.dirty);
    if (w.active != ld_relaxed(&page_heap.active_pages))
        FAIL("global active page count wrong: counted", NULL, "active pages", w.active);
    if (w.parked_pages != runcache_pages())
        FAIL("shared run cache's page count wrong: the blocks hold", NULL, "parked pages", w.parked_pages);
    runcache_check(w.parked);
    lock_release(&page_heap.lock);
    lock_release(purge_fork_lock());
}

/* ---- the statistics' walk ---------------------------------------------- */

struct runs {
    void (*fn)(struct page *head, void *arg);
    void *arg;
};

static void visit_runs(uintptr_t granule, uintptr_t e, void *arg)
{
    struct runs *r = arg;
    if (!(e & PM_BLOCK))
        return;
    struct page *pg = block_pages((struct block *)granule);
    for (unsigned i = BLOCK_HEADER_PAGES; i < SL_BLOCK_PAGES;) {
        struct page_hdr *h = &pg[i].h;
        if (h->kind == PG_FREE) {
            i += 1u << h->order;
        } else {
            if (h->kind == PG_SLAB || h->kind == PG_RUN)
                r->fn(&pg[i], r->arg);
            i += h->npages ? h->npages : 1;
        }
    }
}

void page_walk_runs(void (*fn)(struct page *head, void *arg), void *arg)
{
    struct runs r = { fn, arg };
    lock_acquire(&page_heap.lock);
    pagemap_walk(visit_runs, &r);
    lock_release(&page_heap.lock);
}
