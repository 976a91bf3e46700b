/* zero.c — zones of zero-size slots. See zero.h.
 *
 * Invariants (zero_lock): a zone's live == popcount(bits); its pagemap
 * granule maps to it with PM_ZERO; zones are on the list from first made
 * until a failed allocation drains the empty ones (DRAIN_ZERO_ZONES);
 * cursor (zone, slot) names where the next search starts.
 */
#include "zero.h"

#include <errno.h>

#include "../base/drain.h"
#include "../base/fatal.h"
#include "../base/lock.h"
#include "../meta/meta.h"
#include "../os/os.h"
#include "../pagemap/pagemap.h"

#define ZONE_SLOTS (SL_BLOCK / SL_GRAIN)
#define ZONE_WORDS (ZONE_SLOTS / 64)

struct zero_zone {
    uint8_t *base;
    struct zero_zone *next;
    size_t live;
    uint64_t bits[ZONE_WORDS]; /* slot i live: bit i % 64 of word i / 64 */
};

static SL_LOCK_DEFINE(zero_lock, LOCK_ZERO);
static struct zero_zone *zones, *cur_zone;
static size_t cur_word, nzones, live_total;

static struct zero_zone *zone_new(void)
{
    struct zero_zone *z = meta_alloc(sizeof *z);
    if (!z)
        return NULL;
    z->base = os_reserve_aligned(SL_BLOCK, SL_BLOCK, NULL);
    if (!z->base || !pagemap_set((uintptr_t)z->base, SL_BLOCK, (uintptr_t)z | PM_ZERO)) {
        if (z->base)
            os_unmap(z->base, SL_BLOCK);
        meta_free(z, sizeof *z);
        errno = ENOMEM;
        return NULL;
    }
    z->next = zones;
    zones = z;
    nzones++;
    return z;
}

/* The next free slot at or after the cursor, in the zones' order and round
 * again; NULL if every zone is full. */
static void *take_next_fit(void)
{
    struct zero_zone *z = cur_zone;
    size_t w = cur_word;
    for (size_t seen = 0; z && seen <= nzones * ZONE_WORDS; seen++) {
        if (z->live < ZONE_SLOTS && ~z->bits[w]) {
            unsigned b = (unsigned)__builtin_ctzll(~z->bits[w]);
            z->bits[w] |= 1ull << b;
            z->live++;
            cur_zone = z;
            cur_word = w;
            return z->base + ((w * 64 + b) << SL_GRAIN_SHIFT);
        }
        if (++w == ZONE_WORDS || z->live == ZONE_SLOTS) {
            w = 0;
            z = z->next ? z->next : zones;
        }
    }
    return NULL;
}

void *zero_alloc(void)
{
    lock_acquire(&zero_lock);
    void *p = take_next_fit();
    if (!p) {
        struct zero_zone *z = zone_new();
        if (z) {
            cur_zone = z;
            cur_word = 0;
            p = take_next_fit();
        }
    }
    if (p)
        live_total++;
    lock_release(&zero_lock);
    return p;
}

/* The slot index of p in z, if p is a slot's start and live; else report. */
static size_t live_slot(struct zero_zone *z, const void *p, const char *op)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)z->base;
    size_t i = off >> SL_GRAIN_SHIFT;
    bool is_realloc = op[0] == 'r';
    if (off & (SL_GRAIN - 1))
        sl_fatal(is_realloc ? "realloc of an interior pointer" : "free of an interior pointer", p,
                 "zero-size block", (size_t)-1);
    if (!(z->bits[i / 64] & (1ull << (i % 64))))
        sl_fatal(is_realloc ? "realloc of freed memory at" : "double free of", p, "zero-size block",
                 (size_t)-1);
    return i;
}

void zero_free(struct zero_zone *z, void *p, const char *op)
{
    lock_acquire(&zero_lock);
    size_t i = live_slot(z, p, op);
    z->bits[i / 64] &= ~(1ull << (i % 64));
    z->live--;
    live_total--;
    lock_release(&zero_lock);
}

void zero_check(struct zero_zone *z, const void *p, const char *op)
{
    lock_acquire(&zero_lock);
    live_slot(z, p, op);
    lock_release(&zero_lock);
}

#define FAIL(what, p, num) sl_fatal("sl_check: " what, p, NULL, num)

void zero_check_all(void)
{
    lock_acquire(&zero_lock);
    size_t n = 0, live = 0;
    for (struct zero_zone *z = zones; z; z = z->next) {
        if (++n > nzones)
            FAIL("zero-size zone list longer than its count", NULL, nzones);
        if (pagemap_get((uintptr_t)z->base) != ((uintptr_t)z | PM_ZERO))
            FAIL("pagemap entry of a zero-size zone points elsewhere: zone", z->base, 0);
        size_t c = 0;
        for (size_t w = 0; w < ZONE_WORDS; w++)
            c += (size_t)popcount64(z->bits[w]);
        if (c != z->live)
            FAIL("zero-size zone's live count disagrees with its bits: zone", z->base, z->live);
        live += c;
    }
    if (n != nzones || live != live_total)
        FAIL("zero-size slots counted wrong: live", NULL, live);
    lock_release(&zero_lock);
}

sl_lock *zero_fork_lock(void) { return &zero_lock; }

/* The reclaim registry's entry (base/drain.h): after a failed allocation,
 * zones with no live slot are unmapped (address space is all they hold).
 * A stale zero-size pointer into one is then reported as a pointer sluice
 * did not allocate, instead of as a double free. */
static void drain_zero_zones(enum drain_depth depth, size_t want)
{
    (void)depth, (void)want;
    struct zero_zone *gone = NULL;
    lock_acquire(&zero_lock);
    for (struct zero_zone **zp = &zones; *zp;) {
        struct zero_zone *z = *zp;
        if (z->live) {
            zp = &z->next;
            continue;
        }
        *zp = z->next;
        nzones--;
        pagemap_set((uintptr_t)z->base, SL_BLOCK, 0);
        z->next = gone;
        gone = z;
    }
    cur_zone = zones;
    cur_word = 0;
    lock_release(&zero_lock);
    while (gone) {
        struct zero_zone *z = gone;
        gone = z->next;
        os_unmap(z->base, SL_BLOCK);
        meta_free(z, sizeof *z);
    }
}
static size_t zero_zones_held(void)
{
    lock_acquire(&zero_lock);
    size_t n = nzones * SL_BLOCK;
    lock_release(&zero_lock);
    return n;
}
DRAIN_REGISTER(zero_zones_drain, .name = "zero_zones", .order = DRAIN_ZERO_ZONES, .depths = DRAIN_ENOMEM,
               .run = drain_zero_zones, .held = zero_zones_held);
