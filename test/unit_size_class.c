/* Unit: the size-class table and its arithmetic lookup; the remote
 * summary's groups (slab.h) of every slab length. */
#include "../src/page/antifrag.h"
#include "../src/slab/heap_run.h"
#include "../src/slab/slab.h"
#include "t.h"

int main(void)
{
    CHECK_EQ(size_class(0), SL_CLASS_ZERO); /* malloc(0): a zero-size slot, not a class */
    for (size_t n = 1; n <= SL_SMALL_MAX; n++) {
        unsigned c = size_class(n);
        if (c != size_class_arith(n)) {
            CHECK(!"the lookup table agrees with the arithmetic");
            break;
        }
        if (c >= SL_NCLASSES || class_size[c] < n || (c > 0 && class_size[c - 1] >= n)) {
            CHECK(!"size_class picks the smallest class that fits");
            fprintf(stderr, "n=%zu class=%u\n", n, c);
            break;
        }
        if (n > 128 && (double)(class_size[c] - n) / class_size[c] > 1.0 / 9 + 1e-9) {
            CHECK(!"waste above 128 bytes is at most 1/9");
            break;
        }
        if (n > 64 && (double)(class_size[c] - n) / class_size[c] > 0.1875 + 1e-9) {
            CHECK(!"waste above 64 bytes is at most 18.75%");
            break;
        }
    }
    CHECK_EQ(size_class(SL_SMALL_MAX), SL_NCLASSES - 1);
    /* a medium run's length: the table (up to a page cache's longest run)
     * and the rounding agree, a page at a time and at every page's edges */
    for (size_t pages = 1; pages <= 2 * PCACHE_MAX_PAGES; pages++)
        for (size_t size = (pages - 1) * SL_PAGE + 1; size <= pages * SL_PAGE; size += SL_PAGE - 1) {
            size_t n = heap_run_pages(size);
            CHECK_EQ(n, heap_run_round(pages));
            CHECK(n >= pages && (pages <= 8 || (n - pages) * 8 < n));
        }
    for (unsigned c = 0; c < SL_NCLASSES; c++) {
        CHECK(class_size[c] % 16 == 0);
        CHECK(c == 0 || class_size[c] > class_size[c - 1]);
        unsigned pages = class_pages[c];
        size_t cap = pages * 4096u / class_size[c];
        CHECK(pages >= 1 && pages <= 1u << TAG_SLAB_PAGE_BITS);
        CHECK(cap >= 2);
        /* a class whose slabs fill SLAB blocks takes a whole buddy chunk:
         * no tail of 1-3 pages that only the smallest slabs could fill */
        if (af_slab_type((unsigned)cap) == PB_SLAB && (pages & (pages - 1))) {
            CHECK(!"slabs of SLAB pageblocks are a power of two pages");
            fprintf(stderr, "class=%u size=%u pages=%u\n", c, class_size[c], pages);
        }
        CHECK_EQ(af_slab_type((unsigned)cap), class_size[c] <= 512 ? PB_SLAB : PB_BUF);
        CHECK(pages * 4096u - cap * class_size[c] <= pages * 4096u / 8);
        /* the divisibility test by one multiply is exact over the whole
         * slab, at every byte (class_object_start) and every grain
         * (class_grain_start) */
        for (uint32_t off = 0; off < pages * 4096u; off++)
            if (class_object_start(c, off) != (off % class_size[c] == 0) ||
                (!(off % 16) && class_grain_start(c, off / 16) != (off % class_size[c] == 0))) {
                CHECK(!"class_object_start agrees with the division");
                fprintf(stderr, "class=%u off=%u\n", c, off);
                break;
            }
    }
    /* every bitmap word of a slab of any length has a group bit, and none
     * reaches the remote lock bit or the FULL bit */
    for (unsigned npages = 1; npages <= SL_BLOCK_PAGES; npages++) {
        unsigned sh = remote_sum_shift(npages);
        uintptr_t base = (uintptr_t)1 << 30, last = base + (uintptr_t)npages * SL_PAGE - 1;
        uint32_t first_bit = remote_sum_bit(base, base, sh), last_bit = remote_sum_bit(base, last, sh);
        if (first_bit != 2 || !last_bit || last_bit & (SLAB_REMOTE_LOCK | SLAB_FULL_BIT) ||
            (last_bit | (last_bit - 1)) & ~(SLAB_REMOTE_GROUPS | SLAB_FULL_BIT) || (sh && last_bit < 1u << 16)) {
            CHECK(!"the remote summary's groups cover the slab below the lock bit");
            fprintf(stderr, "npages=%u shift=%u last bit=%#x\n", npages, sh, last_bit);
            break;
        }
    }
    return t_done("unit_size_class");
}
