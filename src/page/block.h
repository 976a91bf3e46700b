/* block.h — one 2 MiB pageblock: its header, page descriptors, live-object
 * bitmap and the buddy allocator inside it (the kernel's struct page + buddy).
 *
 * Layout of a block (2 MiB aligned):
 *   [0, 32 KiB)   512 page descriptors of 64 bytes (struct page). The slots of
 *                 the header pages themselves hold struct block instead.
 *   [32, 48 KiB)  live-object bitmap: one bit per 16-byte grain of the block,
 *                 set while a slab object starting there is allocated (a
 *                 medium run's liveness is its head descriptor's run.req,
 *                 so a run's malloc and free do not touch this line).
 *   [48, 50 KiB)  page tags: one 32-bit word per page, nonzero on the pages
 *                 of a malloc-class slab: its owner heap's tag | the page's
 *                 place in the slab << 7 | size class (the small free fast
 *                 path reads this compact array, not the 64-byte
 *                 descriptors; slab_set_owner keeps it).
 *   [50, 52 KiB)  remote heads: one 32-bit word per page, the remote-free
 *                 summary of the slab whose head the page is (slab.h).
 *                 Apart from the descriptor, which its owner writes on
 *                 every allocation from it, so that a remote free does not
 *                 pull that line away.
 *   [52, 68 KiB)  remote-free bitmap: one bit per grain, like the live
 *                 bitmap, set by other threads (atomic OR) on the objects
 *                 they freed and taken by the owner (slab.h). Other
 *                 threads never write the live bitmap or the objects.
 *   [68 KiB, 2 MiB) 495 usable pages.
 *
 * pointer -> block by masking, -> descriptor by page index, -> head
 * descriptor through page.head (kept in every page of a slab; a medium run
 * marks its head page only, since only slab objects are looked up from
 * inside a run). block_live says whether an address is a live
 * allocation: the bitmap for slab objects, the head descriptor for runs;
 * interior, foreign and already-freed pointers all read as not live.
 *
 * Buddy: free chunks of 2^order pages (order 0..8), naturally aligned within
 * the block, on one doubly linked list per order (16-bit page indices). A
 * free chunk's head descriptor is PG_FREE with its order; a head absorbed by
 * a merge becomes PG_FREE_TAIL; no page inside a free chunk but its head
 * is ever PG_FREE.
 *
 * Lazy commit: a block is reserved PROT_NONE and made read-write from its
 * start up to the highest page any run has reached (committed), in steps of
 * BLOCK_COMMIT_STEP pages that at least double what is committed (256 KiB,
 * 512 KiB, 1 MiB, 2 MiB). Like the top of a brk heap, the part no run has
 * reached faults on access, so a wild write far past an object of a young
 * block (1 MiB past it, say) is caught; a block commits fully once in use,
 * at the cost of at most four mprotect calls in its life.
 *
 * Free-page states (the purge layer's view): every free page is dirty
 * (resident, not advised), lazy (MADV_FREE'd) or clean (MADV_DONTNEED'd or
 * never touched): one bit in dirty[] or lazy[], or neither. Bits of
 * allocated pages are zero. A fresh block is all clean.
 *
 * Synchronisation: a block's buddy state is guarded by the page heap lock.
 * Descriptors of an allocated run belong to its owner (slab layer / run
 * user). Bitmap words belong to the one slab or run whose memory they cover.
 */
#ifndef SL_BLOCK_H
#define SL_BLOCK_H

#include "../base/common.h"

#define BLOCK_HEADER_PAGES 17
#define BLOCK_USABLE_PAGES (SL_BLOCK_PAGES - BLOCK_HEADER_PAGES)
#define BLOCK_MAX_ORDER    8 /* 256 pages, 1 MiB: the largest buddy chunk */
#define BLOCK_COMMIT_STEP  64 /* pages (256 KiB) made read-write at a time */
#define BLOCK_NORDERS      (BLOCK_MAX_ORDER + 1)
#define BLOCK_BITMAP_OFF   (SL_BLOCK_PAGES * 64)
#define BLOCK_BITMAP_WORDS (SL_BLOCK / SL_GRAIN / 64)
#define BLOCK_TAGS_OFF     (BLOCK_BITMAP_OFF + SL_BLOCK / SL_GRAIN / 8)
#define BLOCK_RHEAD_OFF    (BLOCK_TAGS_OFF + SL_BLOCK_PAGES * 4)
#define BLOCK_RBITMAP_OFF  (BLOCK_RHEAD_OFF + SL_BLOCK_PAGES * 4)

/* Pageblock types: the user-space twins of the kernel's migratetypes.
 * SLAB: slabs of malloc's small classes (512 B and less) and of object
 * caches; RECLAIM: slabs of object caches with a shrinker; RUN: medium
 * runs; BUF: slabs of malloc's classes above 512 B (page/antifrag.h:
 * af_slab_type); FREE: wholly free. */
enum pb_type { PB_SLAB, PB_RECLAIM, PB_RUN, PB_BUF, PB_FREE, PB_NTYPES };

enum page_kind {
    PG_HEADER = 0, /* zeroed header pages read as this */
    PG_FREE,       /* head of a free buddy chunk */
    PG_FREE_TAIL,  /* inside a free chunk */
    PG_SLAB,       /* head of a slab */
    PG_RUN,        /* head of a medium run */
    PG_TAIL,       /* inside an allocated run; head says where it starts */
};

struct page_hdr {
    union {
        struct {
            uint8_t kind; /* enum page_kind */
            union {
                uint8_t order; /* PG_FREE: buddy order */
                /* PG_SLAB head of an object cache's slab: 1 once it holds a
                 * sampled object (prof/prof.h), till it is laid out again
                 * (slab_init) */
                uint8_t prof;
            };
        };
        /* both in one load: PG_SLAB only for a slab with no sample
         * (cache.c's free fast path; x86-64 and arm64 are little-endian) */
        uint16_t kind_prof;
    };
    uint16_t head;   /* index of the head page of this page's run */
    uint32_t npages; /* head of an allocated run: its length in pages */
};

struct page {
    struct page_hdr h;
    union {
        struct {
            uint16_t next, prev; /* PG_FREE: per-order list, 0 = none */
        } free;
        uint8_t owner_area[56]; /* PG_SLAB: struct slab lives here */
        struct {
            /* PG_RUN: the size asked for (free_sized checks it) while the
             * run is live, 0 once it is freed (run_live) */
            size_t req;
            /* a freed run parked in the shared run cache (runcache.c),
             * page heap lock: its length's list, newest first, and the
             * list of all parked runs by age */
            struct page *next, *prev, *younger, *older;
            uint64_t parked_ms; /* when it was parked */
            bool parked;        /* in the shared run cache (block_mark_run clears it) */
            /* a sampled block (prof/prof.h): set by its malloc, cleared by
             * its free (and by block_mark_run), so that only a sampled
             * run's free looks it up */
            bool sampled;
            /* bit npages - q set: it held a request of q pages since it
             * was made (block_mark_run clears it; its frees set it, the
             * freeing thread owning it then): the page caches hand a
             * malloc a run that held its page count (page.h) */
            uint32_t seen;
        } run;
    };
};
_Static_assert(sizeof(struct page) == 64, "page descriptor is one cache line");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "page_hdr.kind_prof reads kind as its low byte");

struct block {
    uint8_t type;       /* enum pb_type; page heap lock */
    uint8_t list;       /* bucket it sits on in the page heap, or LIST_NONE */
    uint16_t free_pages;
    uint16_t order_mask; /* bit o: free_head[o] non-empty */
    uint16_t free_head[BLOCK_NORDERS];
    uint16_t committed;        /* pages [0, committed) are read-write */
    /* at least the longest stretch of free pages in a row (block_find_free
     * lowers it when it finds none of n, block_give raises it to all) */
    uint16_t stretch_max;
    struct block *next, *prev; /* page heap list links */
    /* purge state, page heap lock */
    uint16_t ndirty, nlazy;     /* popcounts of dirty[] and lazy[] */
    bool on_purge_list;
    uint64_t dirty_ms, lazy_ms; /* when pages last turned dirty / lazy */
    struct block *pnext, *pprev; /* blocks with dirty or lazy pages */
    uint64_t dirty[SL_BLOCK_PAGES / 64], lazy[SL_BLOCK_PAGES / 64];
    /* hugepage state (page/hugify.c), page heap lock */
    struct block *anext, *aprev; /* every mapped block */
    uint64_t dense_ms;           /* when it was first seen dense (0: not dense) */
    bool thp;                    /* collapsed into (or advised towards) a hugepage */
    bool pinned;                 /* being collapsed: not unmapped meanwhile */
};
_Static_assert(sizeof(struct block) <= BLOCK_HEADER_PAGES * sizeof(struct page), "block fits");
_Static_assert(BLOCK_COMMIT_STEP >= BLOCK_HEADER_PAGES, "a block's first commit step holds its header");
_Static_assert(BLOCK_RBITMAP_OFF + BLOCK_BITMAP_WORDS * 8 <= BLOCK_HEADER_PAGES * SL_PAGE, "bitmaps fit the header");

sl_inline struct block *block_of(const void *p) { return (struct block *)align_down((uintptr_t)p, SL_BLOCK); }
sl_inline struct page *block_pages(struct block *b) { return (struct page *)b; }
sl_inline unsigned page_index(const void *p) { return (unsigned)(((uintptr_t)p >> SL_PAGE_SHIFT) & (SL_BLOCK_PAGES - 1)); }
sl_inline struct page *page_of(const void *p) { return &block_pages(block_of(p))[page_index(p)]; }
sl_inline struct page *page_head(struct page *pg) { return &block_pages(block_of(pg))[pg->h.head]; }
sl_inline void *page_addr(struct page *pg)
{
    struct block *b = block_of(pg);
    return (uint8_t *)b + ((size_t)(pg - block_pages(b)) << SL_PAGE_SHIFT);
}

/* Live-object bitmap. */
sl_inline _Atomic uint64_t *bitmap_word(uintptr_t a)
{
    return (_Atomic uint64_t *)(align_down(a, SL_BLOCK) + BLOCK_BITMAP_OFF) + ((a >> 10) & (BLOCK_BITMAP_WORDS - 1));
}
sl_inline uint64_t bitmap_bit(uintptr_t a) { return (uint64_t)1 << ((a >> SL_GRAIN_SHIFT) & 63); }
/* Is a the start of a live allocation? A bit covers a 16-byte grain, so an
 * address inside the grain (p + 8) must be refused by its alignment. */
sl_inline bool bitmap_test(uintptr_t a)
{
    return !(a & (SL_GRAIN - 1)) && (ld_relaxed(bitmap_word(a)) & bitmap_bit(a));
}
/* A medium run has no live bit: it is live while the run.req of its head
 * descriptor is nonzero. Its free exchanges req with 0 (one winner if two
 * threads free it; a load and a store before the program's first thread:
 * slab/heap_free.c run_take), so the only PG_RUN head that is not live, a
 * freed run parked in a page cache, reads 0. A run given back to the buddy lists
 * becomes a free chunk's head or tail (PG_FREE, PG_FREE_TAIL), a slab's
 * pages are all rewritten (PG_SLAB, PG_TAIL), and a run's other pages
 * never were heads since they were last free; so no page inside a live
 * allocation reads as a run's head. The header pages' slots hold struct
 * block, whose bytes may read as anything: never a run. */
sl_inline struct page *run_head_at(uintptr_t a)
{
    if ((a & (SL_PAGE - 1)) || page_index((void *)a) < BLOCK_HEADER_PAGES)
        return NULL;
    struct page *pg = page_of((void *)a);
    return pg->h.kind == PG_RUN && pg->h.head == page_index((void *)a) ? pg : NULL;
}
sl_inline bool run_live(uintptr_t a)
{
    struct page *pg = run_head_at(a);
    return pg && __atomic_load_n(&pg->run.req, __ATOMIC_RELAXED);
}
/* A run's free notes the page count of the request it held (run.seen;
 * a request more than 31 pages shorter than its run is not noted). */
sl_inline void run_note_request(struct page *pg, size_t req)
{
    size_t d = pg->h.npages - ((req + SL_PAGE - 1) >> SL_PAGE_SHIFT);
    if (d < 32)
        pg->run.seen |= 1u << d;
}
/* Is a the start of a live allocation in a block (a slab object or a run)? */
sl_inline bool block_live(uintptr_t a) { return run_live(a) || bitmap_test(a); }

/* The remote-free bitmap word covering address a (same bit as the live
 * bitmap's). */
sl_inline _Atomic uint64_t *rbitmap_word(uintptr_t a)
{
    return (_Atomic uint64_t *)(align_down(a, SL_BLOCK) + BLOCK_RBITMAP_OFF) + ((a >> 10) & (BLOCK_BITMAP_WORDS - 1));
}
/* Single-writer set/clear (the owner of the slab): plain load and store. */
sl_inline void bitmap_set_owner(uintptr_t a)
{
    _Atomic uint64_t *w = bitmap_word(a);
    st_relaxed(w, ld_relaxed(w) | bitmap_bit(a));
}
sl_inline void bitmap_clear_owner(uintptr_t a)
{
    _Atomic uint64_t *w = bitmap_word(a);
    st_relaxed(w, ld_relaxed(w) & ~bitmap_bit(a));
}

/* A page tag: heap tag (sequence << TAG_HEAP_SHIFT) | page in slab << 7 | class */
#define TAG_PAGE_SHIFT     7 /* size class bits: 72 classes */
#define TAG_SLAB_PAGE_BITS 4 /* a slab's pages: 16 at most */
#define TAG_HEAP_SHIFT     (TAG_PAGE_SHIFT + TAG_SLAB_PAGE_BITS)

/* The page tag of the page holding address a (see the layout above). */
sl_inline _Atomic uint32_t *page_tag(uintptr_t a)
{
    return (_Atomic uint32_t *)(align_down(a, SL_BLOCK) + BLOCK_TAGS_OFF) + ((a >> SL_PAGE_SHIFT) & (SL_BLOCK_PAGES - 1));
}

/* The remote head word of the page holding address a. */
sl_inline _Atomic uint32_t *page_rhead(uintptr_t a)
{
    return (_Atomic uint32_t *)(align_down(a, SL_BLOCK) + BLOCK_RHEAD_OFF) + ((a >> SL_PAGE_SHIFT) & (SL_BLOCK_PAGES - 1));
}

/* Buddy operations; caller holds the page heap lock. */
void block_init(struct block *b, enum pb_type type);
/* Take a chunk of 2^order pages; returns its head index or 0 if none. */
unsigned block_take(struct block *b, unsigned order);
/* Return pages [first, first + n) to the free lists, merging buddies. */
void block_give(struct block *b, unsigned first, unsigned n);
/* Take exactly pages [first, first + n) if all are free; false otherwise. */
bool block_take_range(struct block *b, unsigned first, unsigned n);
/* The first page of the shortest stretch of at least n free pages in a
 * row, at any alignment (spanning chunks that are not buddies), or 0
 * (then stretch_max is n - 1 at most, till pages are given back: the
 * next search for n or more pages returns at once). */
unsigned block_find_free(struct block *b, unsigned n);
/* Mark [first, first + n) as one allocated run with head kind `kind`. */
void block_mark_run(struct block *b, unsigned first, unsigned n, enum page_kind kind);
/* The head index of the allocated run covering page idx, or 0 (slow: for
 * error messages). */
unsigned block_find_run(struct block *b, unsigned idx);

/* Free-page states; caller holds the page heap lock. */
enum page_state { PS_DIRTY, PS_LAZY, PS_CLEAN };
/* Free pages [first, first + n) are now in state st. */
void block_state_set(struct block *b, unsigned first, unsigned n, enum page_state st);
/* Pages [first, first + n) leave the free set; true if all were clean. */
bool block_state_take(struct block *b, unsigned first, unsigned n);
/* The first maximal run of pages in state st (PS_DIRTY or PS_LAZY) at or
 * after page at: its length (0 if none), its first page in *first. */
unsigned block_state_next(const struct block *b, enum page_state st, unsigned at, unsigned *first);
/* The first n free pages in a row, each dirty or lazy (resident), at
 * any alignment: their first page, or 0 if none. */
unsigned block_find_resident(const struct block *b, unsigned n);
/* Are free pages [first, first + n) all dirty or lazy? */
bool block_is_resident(const struct block *b, unsigned first, unsigned n);

#endif
