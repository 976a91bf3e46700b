/* Unit: the buddy allocator inside one pageblock, and the free-page states
 * (dirty / lazy / clean) the purge layer keeps per page. */
#include <sys/mman.h>

#include "../src/page/block.h"
#include "t.h"

static unsigned count_free(struct block *b)
{
    unsigned n = 0;
    for (unsigned o = 0; o < BLOCK_NORDERS; o++) {
        for (unsigned i = b->free_head[o]; i; i = block_pages(b)[i].free.next)
            n += 1u << o;
        CHECK(!!(b->order_mask & (1u << o)) == !!b->free_head[o]);
    }
    return n;
}

/* Reference: recount the state maps page by page. */
static void check_counts(struct block *b)
{
    unsigned d = 0, l = 0;
    for (unsigned i = 0; i < SL_BLOCK_PAGES; i++) {
        d += (b->dirty[i / 64] >> (i % 64)) & 1;
        l += (b->lazy[i / 64] >> (i % 64)) & 1;
        CHECK(!(((b->dirty[i / 64] & b->lazy[i / 64]) >> (i % 64)) & 1)); /* never both */
    }
    CHECK_EQ(b->ndirty, d);
    CHECK_EQ(b->nlazy, l);
}

static void test_states(struct block *b)
{
    CHECK_EQ(b->ndirty + b->nlazy, 0); /* a fresh block is all clean */
    unsigned first, n;
    CHECK_EQ(block_state_next(b, PS_DIRTY, 0, &first), 0);
    /* spans across word boundaries, merged and split */
    block_state_set(b, 60, 10, PS_DIRTY);   /* 60..69 */
    block_state_set(b, 70, 60, PS_DIRTY);   /* 70..129: one span 60..129 */
    block_state_set(b, 200, 300, PS_LAZY);  /* 200..499 */
    check_counts(b);
    CHECK_EQ(block_state_next(b, PS_DIRTY, 0, &first), 70);
    CHECK_EQ(first, 60);
    CHECK_EQ(block_state_next(b, PS_DIRTY, 130, &first), 0);
    CHECK_EQ(block_state_next(b, PS_LAZY, 0, &first), 300);
    CHECK_EQ(first, 200);
    /* a state change in the middle splits a span */
    block_state_set(b, 100, 4, PS_LAZY);
    check_counts(b);
    CHECK_EQ(block_state_next(b, PS_DIRTY, 0, &first), 40);
    CHECK_EQ(first, 60);
    CHECK_EQ(block_state_next(b, PS_DIRTY, 100, &first), 26);
    CHECK_EQ(first, 104);
    CHECK_EQ(block_state_next(b, PS_LAZY, 0, &first), 4);
    CHECK_EQ(first, 100);
    /* taking pages: clean only if none was dirty or lazy */
    CHECK(block_state_take(b, 140, 50)); /* 140..189: clean */
    CHECK(!block_state_take(b, 120, 30)); /* 120..129 were dirty */
    check_counts(b);
    CHECK_EQ(b->ndirty, 40 + 16); /* 60..99 and 104..119 */
    /* a span that runs to the block's end */
    n = block_state_next(b, PS_LAZY, 105, &first);
    CHECK_EQ(first, 200);
    CHECK_EQ(first + n, 500u);
    block_state_set(b, 500, 12, PS_LAZY);
    CHECK_EQ(block_state_next(b, PS_LAZY, 105, &first), 312);
    CHECK_EQ(first + 312, (unsigned)SL_BLOCK_PAGES);
    /* clean again: every bit gone */
    block_state_set(b, BLOCK_HEADER_PAGES, BLOCK_USABLE_PAGES, PS_CLEAN);
    check_counts(b);
    CHECK_EQ(b->ndirty + b->nlazy, 0);
    /* randomised against the reference */
    unsigned long long seed = 5;
    for (int i = 0; i < 20000; i++) {
        unsigned a = BLOCK_HEADER_PAGES + (unsigned)(t_rand(&seed) % BLOCK_USABLE_PAGES);
        unsigned len = 1 + (unsigned)(t_rand(&seed) % (SL_BLOCK_PAGES - a));
        unsigned op = (unsigned)(t_rand(&seed) % 4);
        if (op == 3)
            block_state_take(b, a, len);
        else
            block_state_set(b, a, len, (enum page_state)op);
    }
    check_counts(b);
    block_state_take(b, BLOCK_HEADER_PAGES, BLOCK_USABLE_PAGES);
    CHECK_EQ(b->ndirty + b->nlazy, 0);
}

/* block_find_resident: n free pages in a row, each dirty or lazy, at any
 * alignment, across words and across the two states; a clean page or an
 * allocated one (no bit) breaks a stretch. */
static void test_find_resident(struct block *b)
{
    CHECK_EQ(block_find_resident(b, 1), 0); /* all clean */
    block_state_set(b, 20, 5, PS_DIRTY);    /* 20..24 */
    block_state_set(b, 40, 30, PS_DIRTY);   /* 40..69: across a word */
    block_state_set(b, 70, 10, PS_LAZY);    /* 70..79: the stretch goes on lazy */
    block_state_set(b, 128, 64, PS_LAZY);   /* a whole word */
    block_state_set(b, 192, 70, PS_DIRTY);  /* 128..261 */
    CHECK_EQ(block_find_resident(b, 1), 20);
    CHECK_EQ(block_find_resident(b, 5), 20);
    CHECK_EQ(block_find_resident(b, 6), 40);
    CHECK_EQ(block_find_resident(b, 40), 40);
    CHECK_EQ(block_find_resident(b, 41), 128);
    CHECK_EQ(block_find_resident(b, 134), 128);
    CHECK_EQ(block_find_resident(b, 135), 0);
    CHECK(block_is_resident(b, 60, 20));   /* dirty then lazy */
    CHECK(block_is_resident(b, 128, 134)); /* across three words */
    CHECK(!block_is_resident(b, 60, 21));  /* 80 is clean */
    CHECK(!block_is_resident(b, 19, 2));
    block_state_take(b, 150, 1); /* an allocated page splits 128..261 */
    CHECK_EQ(block_find_resident(b, 100), 151);
    CHECK_EQ(block_find_resident(b, 112), 0);
    /* up to the block's last page */
    block_state_set(b, SL_BLOCK_PAGES - 3, 3, PS_DIRTY);
    CHECK_EQ(block_find_resident(b, 3), 20);
    block_state_take(b, BLOCK_HEADER_PAGES, 300);
    CHECK_EQ(block_find_resident(b, 3), SL_BLOCK_PAGES - 3);
    CHECK_EQ(block_find_resident(b, 4), 0);
    block_state_take(b, BLOCK_HEADER_PAGES, BLOCK_USABLE_PAGES);
    CHECK_EQ(b->ndirty + b->nlazy, 0);
    /* random states against a page-by-page search, every length: the
     * word-at-a-time search's carried, inner and top stretches */
    uint64_t seed = 7;
    for (int round = 0; round < 40; round++) {
        for (int k = 0; k < 12; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            unsigned a = BLOCK_HEADER_PAGES + (unsigned)(seed >> 33) % BLOCK_USABLE_PAGES;
            unsigned len = 1 + (unsigned)(seed >> 20) % (round < 20 ? 40 : 150);
            if (a + len > SL_BLOCK_PAGES)
                len = SL_BLOCK_PAGES - a;
            if ((seed >> 60) & 1)
                block_state_take(b, a, len);
            else
                block_state_set(b, a, len, (seed >> 61) & 1 ? PS_LAZY : PS_DIRTY);
        }
        for (unsigned n = 1; n <= 200; n++) {
            unsigned want = 0;
            for (unsigned i = BLOCK_HEADER_PAGES, run = 0; i < SL_BLOCK_PAGES && !want; i++) {
                bool res = (b->dirty[i / 64] | b->lazy[i / 64]) >> (i % 64) & 1;
                run = res ? run + 1 : 0;
                if (run == n)
                    want = i + 1 - n;
            }
            CHECK_EQ(block_find_resident(b, n), want);
        }
    }
    block_state_take(b, BLOCK_HEADER_PAGES, BLOCK_USABLE_PAGES);
    CHECK_EQ(b->ndirty + b->nlazy, 0);
}

/* block_find_free: n free pages in a row at any alignment, across chunks
 * that are not buddies; the shortest stretch that fits; none: 0. */
static void test_find_free(struct block *b)
{
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES);
    /* one chunk of 256 pages in the upper half; the lower half's 239
     * pages are chunks of 128, 64, 32 and less: no chunk of 256 there */
    CHECK_EQ(block_find_free(b, BLOCK_USABLE_PAGES), BLOCK_HEADER_PAGES); /* the whole block, one stretch */
    unsigned top = block_take(b, BLOCK_MAX_ORDER);
    CHECK_EQ(top, 256);
    CHECK_EQ(block_take(b, BLOCK_MAX_ORDER), 0);
    CHECK_EQ(block_find_free(b, 200), BLOCK_HEADER_PAGES); /* 17..255 */
    CHECK_EQ(block_find_free(b, 239), BLOCK_HEADER_PAGES);
    CHECK_EQ(block_find_free(b, 240), 0);
    CHECK(block_take_range(b, BLOCK_HEADER_PAGES, 200)); /* what stretch_fit does with it */
    CHECK_EQ(b->free_pages, 39);
    CHECK_EQ(count_free(b), 39);
    /* two stretches, 217..255 (39) and a shorter one of 10 in the upper
     * half: best fit takes the shorter */
    block_give(b, top + 20, 10);
    CHECK_EQ(block_find_free(b, 10), top + 20);
    CHECK_EQ(block_find_free(b, 11), BLOCK_HEADER_PAGES + 200);
    CHECK_EQ(block_find_free(b, 40), 0);
    CHECK(b->stretch_max < 40);                                 /* the next search of 40 returns at once */
    CHECK_EQ(block_find_free(b, 39), BLOCK_HEADER_PAGES + 200); /* a shorter one still looks */
    /* a give may join stretches: the hint is reset */
    /* up to the block's last page */
    block_give(b, SL_BLOCK_PAGES - 45, 45);
    CHECK_EQ(block_find_free(b, 45), SL_BLOCK_PAGES - 45);
    block_give(b, BLOCK_HEADER_PAGES, 200);
    block_give(b, top, 20);
    block_give(b, top + 30, 256 - 30 - 45);
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES);
    CHECK_EQ(count_free(b), BLOCK_USABLE_PAGES);
}

int main(void)
{
    void *raw = mmap(NULL, 2 * SL_BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct block *b = (struct block *)align_up((uintptr_t)raw, SL_BLOCK);
    block_init(b, PB_SLAB);
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES);
    CHECK_EQ(count_free(b), BLOCK_USABLE_PAGES);

    /* every order can be taken; chunks are naturally aligned */
    for (unsigned o = 0; o <= BLOCK_MAX_ORDER; o++) {
        unsigned idx = block_take(b, o);
        CHECK(idx >= BLOCK_HEADER_PAGES);
        CHECK((idx & ((1u << o) - 1)) == 0);
        block_mark_run(b, idx, 1u << o, PG_RUN);
        CHECK_EQ(count_free(b), b->free_pages);
        block_give(b, idx, 1u << o);
    }
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES);

    /* fill with single pages, free them in a scrambled order: all merge back */
    unsigned idx[BLOCK_USABLE_PAGES], n = 0, x;
    while ((x = block_take(b, 0)))
        block_mark_run(b, idx[n++] = x, 1, PG_RUN);
    CHECK_EQ(n, BLOCK_USABLE_PAGES);
    CHECK_EQ(b->free_pages, 0);
    for (unsigned i = 0; i < n; i++) {
        unsigned j = (i * 7919u) % n; /* 7919 is prime, coprime with the usable page count */
        block_give(b, idx[j], 1);
    }
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES);
    CHECK(b->free_head[BLOCK_MAX_ORDER] != 0); /* the top half merged whole */

    /* non-power-of-two runs and exact ranges */
    unsigned r = block_take(b, 3);
    block_give(b, r + 5, 3); /* a 5-page run */
    block_mark_run(b, r, 5, PG_RUN);
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES - 5);
    CHECK(block_take_range(b, r + 5, 3)); /* grow it in place to 8 */
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES - 8);
    CHECK(!block_take_range(b, r + 4, 2)); /* overlaps the run: refused */
    CHECK_EQ(count_free(b), b->free_pages);
    block_give(b, r, 8);
    CHECK_EQ(b->free_pages, BLOCK_USABLE_PAGES);
    CHECK(!block_take_range(b, 2, 4)); /* header pages are never free */

    /* a run parked in the run cache leaves list links in its descriptor;
     * the same page made a slab's head reads as a slab with no owner */
    r = block_take(b, 3);
    block_mark_run(b, r, 8, PG_RUN);
    block_pages(b)[r].run.next = block_pages(b) + r + 8;
    block_pages(b)[r].run.parked = true;
    block_give(b, r, 8);
    CHECK_EQ(block_take(b, 3), r);
    block_mark_run(b, r, 8, PG_SLAB);
    for (unsigned i = 0; i < sizeof block_pages(b)[r].owner_area; i++)
        CHECK_EQ(block_pages(b)[r].owner_area[i], 0);
    block_give(b, r, 8);
    test_find_free(b);
    test_states(b);
    test_find_resident(b);
    return t_done("unit_block");
}
