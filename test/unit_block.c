/* Unit: the buddy allocator inside one pageblock. */
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
        unsigned j = (i * 7919u) % n; /* 7919 is prime, coprime with 500 */
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
    return t_done("unit_block");
}
