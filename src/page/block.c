/* block.c — the buddy allocator inside one pageblock. See block.h.
 *
 * Invariants (page heap lock held):
 *   free_pages == sum over free chunks of 2^order
 *   order_mask bit o  <=>  free_head[o] != 0
 *   a chunk never covers a header page (indices < BLOCK_HEADER_PAGES)
 */
#include <string.h>

#include "block.h"

static void list_push(struct block *b, unsigned idx, unsigned order)
{
    struct page *pg = block_pages(b);
    pg[idx].h.kind = PG_FREE;
    pg[idx].h.order = (uint8_t)order;
    pg[idx].h.head = (uint16_t)idx;
    pg[idx].free.prev = 0;
    pg[idx].free.next = b->free_head[order];
    if (b->free_head[order])
        pg[b->free_head[order]].free.prev = (uint16_t)idx;
    b->free_head[order] = (uint16_t)idx;
    b->order_mask |= (uint16_t)(1u << order);
    b->free_pages += (uint16_t)(1u << order);
}

static void list_remove(struct block *b, unsigned idx, unsigned order)
{
    struct page *pg = block_pages(b);
    uint16_t next = pg[idx].free.next, prev = pg[idx].free.prev;
    if (prev)
        pg[prev].free.next = next;
    else
        b->free_head[order] = next;
    if (next)
        pg[next].free.prev = prev;
    if (!b->free_head[order])
        b->order_mask &= (uint16_t)~(1u << order);
    b->free_pages -= (uint16_t)(1u << order);
}

/* Free one aligned chunk, merging with free buddies of equal order. */
static void give_chunk(struct block *b, unsigned idx, unsigned order)
{
    struct page *pg = block_pages(b);
    while (order < BLOCK_MAX_ORDER) {
        unsigned buddy = idx ^ (1u << order);
        if (buddy < BLOCK_HEADER_PAGES || pg[buddy].h.kind != PG_FREE || pg[buddy].h.order != order)
            break;
        list_remove(b, buddy, order);
        pg[buddy].h.kind = PG_FREE_TAIL;
        pg[idx].h.kind = PG_FREE_TAIL;
        idx &= ~(1u << order);
        order++;
    }
    list_push(b, idx, order);
}

void block_give(struct block *b, unsigned first, unsigned n)
{
    b->stretch_max = BLOCK_USABLE_PAGES; /* stretches may have grown: unknown */
    while (n) {
        /* the largest naturally aligned chunk that starts at first and fits */
        unsigned order = first ? (unsigned)__builtin_ctz(first) : BLOCK_MAX_ORDER;
        if (order > BLOCK_MAX_ORDER)
            order = BLOCK_MAX_ORDER;
        while ((1u << order) > n)
            order--;
        give_chunk(b, first, order);
        first += 1u << order;
        n -= 1u << order;
    }
}

void block_init(struct block *b, enum pb_type type)
{
    b->type = (uint8_t)type; /* a fresh mapping: every page clean, no bits */
    b->free_pages = 0;
    b->order_mask = 0;
    for (unsigned o = 0; o < BLOCK_NORDERS; o++)
        b->free_head[o] = 0;
    block_give(b, BLOCK_HEADER_PAGES, BLOCK_USABLE_PAGES);
}

unsigned block_take(struct block *b, unsigned order)
{
    unsigned have = b->order_mask >> order;
    if (!have)
        return 0;
    unsigned o = order + (unsigned)__builtin_ctz(have);
    unsigned idx = b->free_head[o];
    list_remove(b, idx, o);
    block_pages(b)[idx].h.kind = PG_TAIL; /* no longer a free head */
    while (o > order) { /* split: keep the lower half, free the upper */
        o--;
        list_push(b, idx + (1u << o), o);
    }
    return idx;
}

bool block_take_range(struct block *b, unsigned first, unsigned n)
{
    struct page *pg = block_pages(b);
    if (first < BLOCK_HEADER_PAGES || first + n > SL_BLOCK_PAGES)
        return false;
    /* Walk the free chunks that cover the range; each must be free. */
    unsigned i = first;
    while (i < first + n) {
        unsigned head = i, order = 0;
        bool found = false;
        for (unsigned o = 0; o <= BLOCK_MAX_ORDER; o++) {
            unsigned h = i & ~((1u << o) - 1);
            if (h >= BLOCK_HEADER_PAGES && pg[h].h.kind == PG_FREE && pg[h].h.order == o) {
                head = h, order = o, found = true;
                break;
            }
        }
        if (!found)
            return false;
        i = head + (1u << order);
    }
    /* All free: detach the covering chunks and give back what lies outside. */
    i = first;
    while (i < first + n) {
        unsigned head = i, order = 0;
        for (unsigned o = 0; o <= BLOCK_MAX_ORDER; o++) {
            unsigned h = i & ~((1u << o) - 1);
            if (h >= BLOCK_HEADER_PAGES && pg[h].h.kind == PG_FREE && pg[h].h.order == o) {
                head = h, order = o;
                break;
            }
        }
        list_remove(b, head, order);
        pg[head].h.kind = PG_FREE_TAIL;
        unsigned end = head + (1u << order);
        if (head < first)
            block_give(b, head, first - head);
        if (end > first + n)
            block_give(b, first + n, end - (first + n));
        i = end;
    }
    return true;
}

/* The free chunk that ends at page `end` (exclusive), or 0: chunks are
 * naturally aligned, so its head is end - 2^k for some order k at which
 * that is aligned; a head is PG_FREE with its order, and no other page
 * ever is (block.h). */
static unsigned chunk_ending_at(const struct page *pg, unsigned end)
{
    for (unsigned k = 0; k <= BLOCK_MAX_ORDER && (1u << k) <= end; k++) {
        unsigned h = end - (1u << k);
        if (h & ((1u << k) - 1))
            break; /* not aligned at k: nor at any higher order */
        if (h >= BLOCK_HEADER_PAGES && pg[h].h.kind == PG_FREE && pg[h].h.order == k)
            return h;
    }
    return 0;
}

/* The shortest stretch of at least n free pages in a row, at any
 * alignment. Any n pages in a row hold a naturally aligned range of
 * 2^k pages, k = log2(n + 1) - 1 rounded down, and a free aligned range
 * lies within one free chunk (buddies merge when both are free): so each
 * chunk of order k or more is grown into its stretch, rightwards by the
 * chunk heads that follow it, leftwards by the chunks that end where it
 * starts. A few chunks a block, not a walk of its pages. */
unsigned block_find_free(struct block *b, unsigned n)
{
    if (b->stretch_max < n)
        return 0; /* searched since the last give: none this long */
    const struct page *pg = block_pages(b);
    unsigned best = 0, best_len = SL_BLOCK_PAGES + 1;
    for (unsigned o = log2_floor(n + 1) - 1; o < BLOCK_NORDERS; o++)
        for (unsigned i = b->free_head[o]; i; i = pg[i].free.next) {
            unsigned first = i, end = i + (1u << o), h;
            while (end < SL_BLOCK_PAGES && pg[end].h.kind == PG_FREE)
                end += 1u << pg[end].h.order;
            while ((h = chunk_ending_at(pg, first)))
                first = h;
            if (end - first >= n && end - first < best_len)
                best = first, best_len = end - first;
        }
    if (!best)
        b->stretch_max = (uint16_t)(n - 1);
    return best;
}

void block_mark_run(struct block *b, unsigned first, unsigned n, enum page_kind kind)
{
    struct page *pg = block_pages(b);
    bool resized = pg[first].h.kind == PG_RUN && pg[first].h.head == first; /* a live run keeps its mark */
    bool same = resized && pg[first].h.npages == n;
    pg[first].h.kind = (uint8_t)kind;
    pg[first].h.head = (uint16_t)first;
    pg[first].h.npages = n;
    if (kind == PG_RUN) {
        pg[first].run.parked = false; /* the slot may hold a slab's bytes */
        if (!resized)
            pg[first].run.sampled = false;
        if (!same)
            pg[first].run.seen = 0; /* its bits count pages back from its end */
    }
    if (kind != PG_SLAB)
        return; /* only slab objects are looked up from inside a run */
    /* a slab starts with no owner: the slot may hold a run's run-cache
     * links, and the slab's owner word lies where they were */
    memset(pg[first].owner_area, 0, sizeof pg[first].owner_area);
    for (unsigned i = first + 1; i < first + n; i++) {
        pg[i].h.kind = PG_TAIL;
        pg[i].h.head = (uint16_t)first;
    }
}

unsigned block_find_run(struct block *b, unsigned idx)
{
    struct page *pg = block_pages(b);
    for (unsigned i = idx + 1; i-- > BLOCK_HEADER_PAGES;) {
        unsigned k = pg[i].h.kind;
        if ((k == PG_SLAB || k == PG_RUN) && pg[i].h.head == i && i + pg[i].h.npages > idx)
            return i;
        if (k == PG_FREE && i + (1u << pg[i].h.order) > idx)
            return 0;
    }
    return 0;
}

/* ---- free-page states ---------------------------------------------------- */

/* Bits of [first, first + n) that fall in word w. */
static uint64_t range_mask(unsigned w, unsigned first, unsigned n)
{
    unsigned lo = w * 64, hi = lo + 64, end = first + n;
    if (end <= lo || first >= hi)
        return 0;
    unsigned a = first > lo ? first - lo : 0, z = end < hi ? end - lo : 64;
    uint64_t top = z == 64 ? ~0ull : (1ull << z) - 1;
    return top & ~((1ull << a) - 1);
}

void block_state_set(struct block *b, unsigned first, unsigned n, enum page_state st)
{
    for (unsigned w = first / 64; w * 64 < first + n; w++) {
        uint64_t m = range_mask(w, first, n);
        b->ndirty = (uint16_t)(b->ndirty - popcount64(b->dirty[w] & m));
        b->nlazy = (uint16_t)(b->nlazy - popcount64(b->lazy[w] & m));
        b->dirty[w] &= ~m;
        b->lazy[w] &= ~m;
        if (st == PS_DIRTY) {
            b->dirty[w] |= m;
            b->ndirty = (uint16_t)(b->ndirty + popcount64(m));
        } else if (st == PS_LAZY) {
            b->lazy[w] |= m;
            b->nlazy = (uint16_t)(b->nlazy + popcount64(m));
        }
    }
}

bool block_is_resident(const struct block *b, unsigned first, unsigned n)
{
    for (unsigned w = first / 64; w * 64 < first + n; w++) {
        uint64_t m = range_mask(w, first, n);
        if (((b->dirty[w] | b->lazy[w]) & m) != m)
            return false;
    }
    return true;
}

bool block_state_take(struct block *b, unsigned first, unsigned n)
{
    bool clean = true;
    for (unsigned w = first / 64; w * 64 < first + n; w++) {
        uint64_t m = range_mask(w, first, n), d = b->dirty[w] & m, l = b->lazy[w] & m;
        if (d | l) {
            clean = false;
            b->ndirty = (uint16_t)(b->ndirty - popcount64(d));
            b->nlazy = (uint16_t)(b->nlazy - popcount64(l));
            b->dirty[w] &= ~m;
            b->lazy[w] &= ~m;
        }
    }
    return clean;
}

unsigned block_state_next(const struct block *b, enum page_state st, unsigned at, unsigned *first)
{
    const uint64_t *bits = st == PS_DIRTY ? b->dirty : b->lazy;
    unsigned i = at;
    while (i < SL_BLOCK_PAGES) { /* find a set bit */
        uint64_t v = bits[i / 64] >> (i % 64);
        if (v) {
            i += (unsigned)__builtin_ctzll(v);
            break;
        }
        i = (i / 64 + 1) * 64;
    }
    if (i >= SL_BLOCK_PAGES)
        return 0;
    unsigned j = i;
    while (j < SL_BLOCK_PAGES) { /* find the next clear bit */
        uint64_t v = ~bits[j / 64] >> (j % 64);
        if (v) {
            j += (unsigned)__builtin_ctzll(v);
            break;
        }
        j = (j / 64 + 1) * 64;
    }
    if (j > SL_BLOCK_PAGES)
        j = SL_BLOCK_PAGES;
    *first = i;
    return j - i;
}

/* The first n free pages in a row that are resident (dirty or lazy): a
 * run of n set bits in dirty[] | lazy[], which hold free pages only.
 * Returns its first page, or 0 if none. Word by word: the stretch carried
 * in from the words below, then (n <= 64, and some pages i and i + n - 1
 * resident) one wholly inside the word, by and-ing the word with itself
 * shifted (bit i then says bits i .. i + n - 1 are all set), then the
 * word's top stretch carried on. The first in page order either way: a
 * stretch inside the word that starts below the top stretch is found
 * before it, and the carried one starts below both. Most calls find
 * nothing (the block's resident pages are in shorter stretches): a stretch
 * at a time this took ~260 instructions a call, 18 a replacement of
 * 32-256 KiB objects (bench_sizes 0.5 4 less 0.25 4); now ~145 and 8. */
unsigned block_find_resident(const struct block *b, unsigned n)
{
    unsigned start = 0, len = 0; /* the stretch reaching this word's bit 0 */
    for (unsigned w = BLOCK_HEADER_PAGES / 64; w < SL_BLOCK_PAGES / 64; w++) {
        uint64_t v = b->dirty[w] | b->lazy[w];
        if (!v) {
            len = 0;
            continue;
        }
        if (v == ~0ull) { /* a whole word resident: the stretch goes on */
            if (!len)
                start = w * 64;
            len += 64;
            if (len >= n)
                return start;
            continue;
        }
        if (len && len + (unsigned)__builtin_ctzll(~v) >= n)
            return start;
        if (n <= 64 && (v & v >> (n - 1))) { /* pages i and i + n - 1 resident, for some i */
            uint64_t m = v;
            for (unsigned have = 1; have < n && m;) {
                unsigned s = have < n - have ? have : n - have;
                m &= m >> s;
                have += s;
            }
            if (m)
                return w * 64 + (unsigned)__builtin_ctzll(m);
        }
        len = (unsigned)__builtin_clzll(~v); /* the ones at the top */
        start = w * 64 + 64 - len;
    }
    return 0;
}
