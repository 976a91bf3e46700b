/* size_class.c — the class tables, generated from SL_SIZE_CLASSES. */
#include "size_class.h"

const uint32_t class_size[SL_NCLASSES] = {
#define X(size, pages) size,
    SL_SIZE_CLASSES(X)
#undef X
};

const uint8_t class_pages[SL_NCLASSES] = {
#define X(size, pages) pages,
    SL_SIZE_CLASSES(X)
#undef X
};
