/* size_class.c — the class tables, generated from SL_SIZE_CLASSES. */
#include "size_class.h"

const uint32_t class_size[SL_NCLASSES] = {
#define X(size, pages) size,
    SL_SIZE_CLASSES(X)
#undef X
};

/* a page tag (block.h) has 3 bits for a page's place in its slab */
#define X(size, pages) _Static_assert((pages) <= 8, "a malloc class's slab has at most 8 pages");
SL_SIZE_CLASSES(X)
#undef X

const uint8_t class_pages[SL_NCLASSES] = {
#define X(size, pages) pages,
    SL_SIZE_CLASSES(X)
#undef X
};

/* class of a request n <= 1024, indexed by (n + 15) / 16; generated from
 * the arithmetic (the unit test checks every size), but for 0 bytes:
 * SL_CLASS_ZERO */
const uint8_t class_lut[65] = {
SL_CLASS_ZERO,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,16,17,17,18,18,19,19,20,20,21,21,22,22,23,23,24,24,24,24,25,25,25,25,26,26,26,26,27,27,27,27,28,28,28,28,29,29,29,29,30,30,30,30,31,31,31,31
};

size_t sl_small_limit = SL_SMALL_MAX;

/* Magazine depth per class (slab/heap.h): 16 KiB of objects, 1 to 32. */
const uint8_t class_mag_cap[SL_NCLASSES] = {
#define X(size, pages) (uint8_t)((size) * 32 <= 16384 ? 32 : 16384 / (size)),
    SL_SIZE_CLASSES(X)
#undef X
};
