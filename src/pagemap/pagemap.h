/* pagemap.h — which 2 MiB granules of the address space are sluice's, and to
 * which region each belongs. Answers "is this pointer ours?" for every free.
 *
 * A two-level radix tree over 48-bit addresses: a static top level of 2^11
 * leaf pointers, each leaf 2^16 entries (one per granule, 128 GiB a leaf),
 * mapped on first use and never freed. An entry is 0 (not ours) or a region
 * address with its kind in the low bits:
 *   PM_BLOCK  the granule is a pageblock; the address is the block itself
 *   PM_HUGE   the granule belongs to a huge mapping; the address is its
 *             descriptor (struct huge)
 *   PM_ZERO   the granule is a zone of zero-size slots; the address is its
 *             descriptor (struct zero_zone)
 * Readers take no lock (acquire loads); writers publish a region after
 * initialising it and clear it before releasing it.
 *
 * Beside the tree, a flat bitmap of the PM_BLOCK granules, all below 2^47
 * (where the kernel maps everything not asked for higher up; pagemap_set
 * refuses a block above): 8 MiB of .bss, of which a page covers 64 GiB, so
 * only the pages for the address ranges in use are ever touched. The free
 * fast path asks it alone (one load, one bit test, no dependent second
 * load); pagemap_set keeps it.
 */
#ifndef SL_PAGEMAP_H
#define SL_PAGEMAP_H

#include "../base/common.h"

enum { PM_BLOCK = 1, PM_HUGE = 2, PM_ZERO = 4, PM_KIND_MASK = 7 };

#define PM_TOP_BITS  11
#define PM_LEAF_BITS 16

/* A top-level slot holds its leaf's address as an offset from
 * pagemap_zero_leaf (all zero, never written): 0 until a leaf is mapped, so
 * a lookup has no branch for a missing leaf, and the table needs neither an
 * initialiser nor load-time relocations (it is zero, in .bss). */
extern _Atomic uintptr_t pagemap_top[1u << PM_TOP_BITS];
extern _Atomic uintptr_t pagemap_zero_leaf[1u << PM_LEAF_BITS];

sl_inline _Atomic uintptr_t *pagemap_leaf(uintptr_t top)
{
    return (_Atomic uintptr_t *)((uintptr_t)pagemap_zero_leaf +
                                 atomic_load_explicit(&pagemap_top[top], memory_order_acquire));
}

/* The entry for address a, or 0. Two dependent loads; no call. */
sl_inline uintptr_t pagemap_get(uintptr_t a)
{
    uintptr_t top = a >> (SL_BLOCK_SHIFT + PM_LEAF_BITS);
    if (unlikely(top >= (1u << PM_TOP_BITS)))
        return 0;
    _Atomic uintptr_t *leaf = pagemap_leaf(top);
    return atomic_load_explicit(&leaf[(a >> SL_BLOCK_SHIFT) & ((1u << PM_LEAF_BITS) - 1)],
                                memory_order_acquire);
}

#define PM_FLAT_BITS 47 /* address bits the flat block bitmap covers */
extern _Atomic uint64_t pagemap_blocks[(size_t)1 << (PM_FLAT_BITS - SL_BLOCK_SHIFT - 6)];

/* The flat bitmap's bit for address a, which must be below 1 << PM_FLAT_BITS. */
sl_inline bool pagemap_flat_test(uintptr_t a)
{
    uintptr_t g = a >> SL_BLOCK_SHIFT;
    return bit_test64(atomic_load_explicit(&pagemap_blocks[g >> 6], memory_order_acquire), g);
}

/* Is a inside a pageblock (its entry PM_BLOCK)? */
sl_inline bool pagemap_is_block(uintptr_t a)
{
    return likely(a < (uintptr_t)1 << PM_FLAT_BITS) && pagemap_flat_test(a);
}

/* Is a a 16-byte aligned address inside a pageblock: what the small free
 * fast path may take (heap_free_block)? The alignment is tested with the
 * range, in one mask; a misaligned pointer goes to the slow path, which
 * reports it. */
sl_inline bool pagemap_is_block_grain(uintptr_t a)
{
    return likely(!(a & (~(((uintptr_t)1 << PM_FLAT_BITS) - 1) | (SL_GRAIN - 1)))) && pagemap_flat_test(a);
}

/* The region an entry names (a block, a struct huge, a struct zero_zone). */
sl_inline void *pagemap_region(uintptr_t e) { return (void *)(e & ~(uintptr_t)PM_KIND_MASK); }

/* Set the entries of [base, base + size) (granule aligned) to value.
 * Returns false (ENOMEM) if a leaf could not be mapped, or if value is a
 * PM_BLOCK entry and the range reaches past 2^47. */
bool pagemap_set(uintptr_t base, size_t size, uintptr_t value);

/* Call fn for every granule whose entry is not 0, in address order (for
 * sl_check and the statistics; no lock: entries may change meanwhile). */
void pagemap_walk(void (*fn)(uintptr_t granule, uintptr_t entry, void *arg), void *arg);

#endif
