/* Unit: the size-class table and its arithmetic lookup. */
#include "../src/slab/size_class.h"
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
    for (unsigned c = 0; c < SL_NCLASSES; c++) {
        CHECK(class_size[c] % 16 == 0);
        CHECK(c == 0 || class_size[c] > class_size[c - 1]);
        unsigned pages = class_pages[c];
        size_t cap = pages * 4096u / class_size[c];
        CHECK(pages >= 1 && pages <= 8);
        CHECK(cap >= 2);
        CHECK(pages * 4096u - cap * class_size[c] <= pages * 4096u / 8);
    }
    return t_done("unit_size_class");
}
