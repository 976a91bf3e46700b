/* pagemap.c — leaf creation and range updates; see pagemap.h.
 *
 * A leaf's mapping holds, past its 2^16 entries, a summary: one bit per
 * group of 64 entries, set (and never cleared) once an entry of the group
 * has been set nonzero. pagemap_walk visits only the groups marked, so a
 * walk costs the granules ever used instead of 65,536 loads a leaf: the
 * statistics walk twice (resident bytes, runs) whenever a program asks
 * for them, and redis asks every 100 ms (jemalloc's "stats.resident" and
 * "stats.active": ~1 M instructions a time without the summary). */
#include "pagemap.h"

#include "../os/os.h"

_Atomic uintptr_t pagemap_zero_leaf[1u << PM_LEAF_BITS];

_Atomic uintptr_t pagemap_top[1u << PM_TOP_BITS];

_Atomic uint64_t pagemap_blocks[(size_t)1 << (PM_FLAT_BITS - SL_BLOCK_SHIFT - 6)];

/* Keep the flat block bitmap (pagemap.h) for granule g: published after
 * the entry, taken away before it is cleared (pagemap_set's order). */
static void blocks_update(uintptr_t g, bool block)
{
    if (g >= (uintptr_t)1 << (PM_FLAT_BITS - SL_BLOCK_SHIFT))
        return;
    _Atomic uint64_t *w = &pagemap_blocks[g >> 6];
    uint64_t bit = (uint64_t)1 << (g & 63);
    if (block)
        atomic_fetch_or_explicit(w, bit, memory_order_release);
    else if (atomic_load_explicit(w, memory_order_relaxed) & bit)
        atomic_fetch_and_explicit(w, ~bit, memory_order_release);
}

#define PM_GROUPS ((1u << PM_LEAF_BITS) / 64) /* the summary's bits */
#define LEAF_BYTES ((sizeof(uintptr_t) << PM_LEAF_BITS) + PM_GROUPS / 8)

/* The summary of a leaf (not pagemap_zero_leaf, which has none). */
static _Atomic uint64_t *leaf_summary(_Atomic uintptr_t *leaf) { return (_Atomic uint64_t *)&leaf[1u << PM_LEAF_BITS]; }

static _Atomic uintptr_t *leaf_get_or_create(uintptr_t top)
{
    _Atomic uintptr_t *leaf = pagemap_leaf(top);
    if (leaf != pagemap_zero_leaf)
        return leaf;
    size_t bytes = LEAF_BYTES;
    _Atomic uintptr_t *fresh = os_map(bytes);
    if (!fresh)
        return NULL;
    uintptr_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&pagemap_top[top], &expected,
                                                (uintptr_t)fresh - (uintptr_t)pagemap_zero_leaf,
                                                memory_order_acq_rel, memory_order_acquire))
        return fresh;
    os_unmap((void *)fresh, bytes);
    return pagemap_leaf(top);
}

bool pagemap_set(uintptr_t base, size_t size, uintptr_t value)
{
    /* a pageblock must be in the flat bitmap, or sl_free would not know it */
    if ((value & PM_BLOCK) && base + size > (uintptr_t)1 << PM_FLAT_BITS)
        return false;
    for (uintptr_t a = base; a < base + size; a += SL_BLOCK) {
        uintptr_t top = a >> (SL_BLOCK_SHIFT + PM_LEAF_BITS);
        if (top >= (1u << PM_TOP_BITS))
            return false;
        _Atomic uintptr_t *leaf = pagemap_leaf(top);
        if (leaf == pagemap_zero_leaf) {
            if (!value)
                continue; /* clearing what was never set */
            if (!(leaf = leaf_get_or_create(top)))
                return false;
        }
        if (!(value & PM_BLOCK))
            blocks_update(a >> SL_BLOCK_SHIFT, false);
        uintptr_t i = (a >> SL_BLOCK_SHIFT) & ((1u << PM_LEAF_BITS) - 1);
        atomic_store_explicit(&leaf[i], value, memory_order_release);
        _Atomic uint64_t *sum = &leaf_summary(leaf)[i / 64 / 64];
        uint64_t bit = (uint64_t)1 << (i / 64 % 64);
        if (value && !(atomic_load_explicit(sum, memory_order_relaxed) & bit))
            atomic_fetch_or_explicit(sum, bit, memory_order_release); /* after the entry */
        if (value & PM_BLOCK)
            blocks_update(a >> SL_BLOCK_SHIFT, true);
    }
    return true;
}

void pagemap_walk(void (*fn)(uintptr_t granule, uintptr_t entry, void *arg), void *arg)
{
    for (uintptr_t top = 0; top < (1u << PM_TOP_BITS); top++) {
        _Atomic uintptr_t *leaf = pagemap_leaf(top);
        if (leaf == pagemap_zero_leaf)
            continue;
        for (unsigned w = 0; w < PM_GROUPS / 64; w++) {
            uint64_t groups = atomic_load_explicit(&leaf_summary(leaf)[w], memory_order_acquire);
            for (; groups; groups &= groups - 1) {
                uintptr_t g = (uintptr_t)w * 64 + (unsigned)__builtin_ctzll(groups);
                for (uintptr_t i = g * 64; i < g * 64 + 64; i++) {
                    uintptr_t e = atomic_load_explicit(&leaf[i], memory_order_acquire);
                    if (e)
                        fn(((top << PM_LEAF_BITS) | i) << SL_BLOCK_SHIFT, e, arg);
                }
            }
        }
    }
}
