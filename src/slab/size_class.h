/* size_class.h — the small size classes (the kernel's kmalloc-N caches).
 *
 * Classes are multiples of 16, so every malloc(n >= 16) is 16-byte aligned
 * as glibc guarantees: 16..128 in steps of 16, then 8 classes per doubling
 * up to 32 KiB. Internal waste (class - request) / class is at most 1/9
 * (11.1%) for requests above 128 bytes; between 65 and 128 bytes the 16-byte
 * grid allows at most 15/80 (18.75%). Larger requests are page runs.
 *
 * Each class lives in slabs of 1-16 pages: up to 512 bytes, the smallest
 * power of two pages that holds at least 64 objects with at most 1/16 of
 * it wasted, else (classes above 512 bytes) 8 pages or fewer with the
 * least waste, never below 2 objects
 * (measured: 1-page slabs of 64-512 B objects sent about one allocation in
 * five into the slow path); the classes above 16 KiB hold exactly 2
 * objects in 9-16 pages (no waste). A power of two because the slabs of
 * these classes fill SLAB pageblocks of their own (page/antifrag.h:
 * af_slab_type) with objects that tend to live long: a slab of 3, 5, 6 or
 * 7 pages takes a buddy chunk of 4 or 8 and leaves 1-3 pages that only
 * the few 1- and 2-page slabs can fill. Measured on
 * bench/mixed_lifetime: 47-83 pages of each SLAB block stayed free in
 * such holes, 12% of the idle heap, kept resident once the block is a
 * hugepage. A page tag (page/block.h) has 4 bits
 * for a page's place in its slab, so 16 pages at most.
 *
 *   X(object size, slab pages)
 */
#ifndef SL_SIZE_CLASS_H
#define SL_SIZE_CLASS_H

#include "../base/common.h"

#define SL_SIZE_CLASSES(X)                                                                                    \
    X(16, 1) X(32, 1) X(48, 1) X(64, 1) X(80, 2) X(96, 2) X(112, 2) X(128, 2)                    \
    X(144, 4) X(160, 4) X(176, 4) X(192, 4) X(208, 4) X(224, 4) X(240, 4) X(256, 4)                    \
    X(288, 8) X(320, 8) X(352, 8) X(384, 8) X(416, 8) X(448, 8) X(480, 8) X(512, 8)                    \
    X(576, 8) X(640, 8) X(704, 8) X(768, 8) X(832, 8) X(896, 8) X(960, 8) X(1024, 8)                    \
    X(1152, 8) X(1280, 8) X(1408, 8) X(1536, 8) X(1664, 8) X(1792, 8) X(1920, 8) X(2048, 8)                    \
    X(2304, 8) X(2560, 8) X(2816, 8) X(3072, 8) X(3328, 6) X(3584, 8) X(3840, 8) X(4096, 8)                    \
    X(4608, 8) X(5120, 8) X(5632, 7) X(6144, 8) X(6656, 5) X(7168, 7) X(7680, 8) X(8192, 8)                    \
    X(9216, 7) X(10240, 8) X(11264, 6) X(12288, 6) X(13312, 7) X(14336, 7) X(15360, 8) X(16384, 8)                    \
    X(18432, 9) X(20480, 10) X(22528, 11) X(24576, 12) X(26624, 13) X(28672, 14) X(30720, 15) X(32768, 16)

#define SL_NCLASSES  72
/* malloc(0)'s class: a slot of a heap's cur[] that stays the empty dummy
 * slab, so the fast path costs nothing more and sends it to the slow path,
 * which hands out a zero-size slot (zero/zero.h). class_lut[0] names it. */
#define SL_CLASS_ZERO SL_NCLASSES
#define SL_SMALL_MAX 32768
/* Magazine depth per class (slab/heap_mag.h): 64 KiB of objects, 32 to 256
 * (the classes of 2 KiB and above keep 32, 64 KiB to 1 MiB of them:
 * jemalloc's thread cache keeps 20 objects of its classes up to 32 KiB).
 * Their slabs hold 2 to 16 objects, so a magazine of 16 let a random
 * walk of frees and mallocs empty a slab (given back) and build one again
 * often: bench_sizes 1 3 (4-32 KiB) made 3,699 slabs with 16, 1,015 with
 * 32; instructions a replacement (bench_sizes 0.5 3 less 0.25 3) 131.3
 * with 16, 112.8 with 24, 106.7 with 32, 103.3 with 64 (tcmalloc 108.5),
 * and peak RSS 18.8, 15.3, 14.1, 13.4 MB (tcmalloc 18.7): fewer slabs
 * rebuilt at new places touch fewer pages. bench_mixed's peak 140.3 ->
 * 137.3 MB; 2-4 KiB objects (bench_sizes 0.5 2) 108.1 -> 104.5
 * instructions. A magazine
 * that a burst of frees overflows grows (heap.c: mag_grow), doubling up to
 * its room: 64 KiB of objects too, at most 2048 (the classes of 16 to 256
 * bytes can grow). A thread's magazines hold at most 14.2 MiB (a full
 * magazine of every class, grown; 8.4 MiB with 16 objects at least, most
 * of the difference in the classes above 4 KiB); a watermark boost, sl_purge and thread
 * exit empty them, the trim gives back what sat unused (mag_trim.h),
 * and an emptied magazine starts again at its depth. */
#define MAG_BYTES        65536
#define MAG_MAX_OBJECTS  256
#define MAG_ROOM_OBJECTS 2048
#define MAG_MIN_OBJECTS  32
#define MAG_DEPTH(size, most)                                                                              \
    ((size) * (most) <= MAG_BYTES ? (most)                                                                 \
     : (size) * MAG_MIN_OBJECTS >= MAG_BYTES ? MAG_MIN_OBJECTS : MAG_BYTES / (size))
#define MAG_CAP(size)  MAG_DEPTH(size, MAG_MAX_OBJECTS)
#define MAG_ROOM(size) MAG_DEPTH(size, MAG_ROOM_OBJECTS)
/* The largest request the small fast path takes: SL_SMALL_MAX, or 0 in
 * checked mode (SLUICE_CHECK=1, api/checked.c), which then sees every
 * request through the slow path. One compare either way. */
extern size_t sl_small_limit sl_hidden;

extern const uint32_t class_size[SL_NCLASSES];
extern const uint8_t class_pages[SL_NCLASSES];
/* ceil(2^64 / (size / 16)), mod 2^64: n * class_div[c] <= class_div[c] - 1
 * (mod 2^64) when n, below 2^32, is a multiple of size / 16 (Lemire,
 * Kaser and Kurz, "Faster remainder by direct computation", 2019: one
 * multiply, no division, no remainder). */
extern const uint64_t class_div[SL_NCLASSES];
/* Is grain g (16 bytes each) of a slab of class cls an object's start? */
static inline bool class_grain_start(unsigned cls, uint32_t g)
{
    return (uint64_t)g * class_div[cls] <= class_div[cls] - 1;
}
/* Is off, bytes from the start of a slab of class cls, an object's start? */
static inline bool class_object_start(unsigned cls, uint32_t off)
{
    return !(off & 15) && class_grain_start(cls, off >> 4);
}
/* An object's weight in a remote batch (slab/heap_free.h): 1, or its
 * size in KiB rounded up above 1 KiB. */
extern const uint8_t class_batch_units[SL_NCLASSES];
extern const uint8_t class_lut[SL_SMALL_MAX / 16 + 1];
extern const uint16_t class_mag_cap[SL_NCLASSES];  /* MAG_CAP: a magazine's depth laid out */
extern const uint16_t class_mag_room[SL_NCLASSES]; /* MAG_ROOM: the most it grows to */
/* Every class's magazine in one array of a heap, each with room for its
 * mark below and a NULL end: MAG_SLOTS entries; class_mag_end[c] is c's
 * NULL end (set by size_class_init, before the first heap). */
#define MAG_SLOT_X(size, pages) +MAG_ROOM(size) + 2
enum { MAG_SLOTS = 0 SL_SIZE_CLASSES(MAG_SLOT_X) };
extern uint16_t class_mag_end[SL_NCLASSES];
void size_class_init(void);

/* The arithmetic behind the classes: 16-byte steps to 128, then 8 classes
 * per doubling. */
sl_inline unsigned size_class_arith(size_t n)
{
    if (n <= 128)
        return n ? (unsigned)((n - 1) >> 4) : 0;
    unsigned b = log2_floor(n - 1);
    return ((b - 7) << 3) + (unsigned)((n - 1) >> (b - 3));
}

/* Class of a request of n <= SL_SMALL_MAX bytes (the malloc fast path: one
 * load, no branch); 0 bytes is SL_CLASS_ZERO. */
sl_inline unsigned size_class_small(size_t n) { return class_lut[(n + 15) >> 4]; }
/* The same for any n: above SL_SMALL_MAX, a class past the last. */
sl_inline unsigned size_class(size_t n)
{
    return likely(n <= SL_SMALL_MAX) ? size_class_small(n) : size_class_arith(n);
}

#endif
