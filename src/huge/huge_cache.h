/* huge_cache.h — inside the huge layer (huge.c and huge_cache.c only):
 * huge_lock, the retirement of a mapping, and the cache of freed mappings.
 *
 * huge_lock guards every huge descriptor's live and state fields, the
 * cache list and its counts, and huge.c's live counts. It is a leaf lock
 * except for meta (huge_lock -> meta lock: a retired descriptor is freed
 * under it). Ranges taken out of the pagemap under it are unmapped after
 * it is dropped (struct huge_releases). The functions named *_locked run
 * with it held; the others take it.
 */
#ifndef SL_HUGE_CACHE_H
#define SL_HUGE_CACHE_H

#include "../base/lock.h"
#include "huge.h"
#include "huge_fit.h"

/* bench/sizes' 1-2 MiB band keeps ~570 mappings live and frees one at
 * random per step: the cache's fill walks at random, and each time it hits
 * full or empty a mapping is unmapped or made (16 entries: 838 made, 64:
 * 606, of which 570 are the band's first fill) */
#define HUGE_CACHE_ENTRIES 64
#define HUGE_CACHE_BYTES   ((size_t)256 << 20)

extern sl_lock huge_lock;

/* Ranges taken out of the pagemap under huge_lock, handed to the teardown
 * layer once it is dropped (teardown may start a worker, and a big range
 * is not unmapped with a lock held). At most one per cache entry and the
 * mapping being freed. */
struct huge_releases {
    unsigned n;
    struct {
        void *base;
        size_t len;
    } r[HUGE_CACHE_ENTRIES + 2];
};
/* Unmap what was put aside (huge_lock not held). */
void huge_release_now(struct huge_releases *rel);
/* hd's mapping leaves the pagemap and the counts, its descriptor is
 * freed, and the range is put aside for huge_release_now (locked). */
void huge_retire_locked(struct huge *hd, struct huge_releases *rel);

/* Cached mappings to be moved side by side into one fresh mapping
 * (huge_fit.h's gather), in that order: out of the cache, its counts and
 * the pagemap (their addresses are the kernel's to hand out again once
 * they are moved), still mapped, each one's map_size what it brings. */
struct huge_gather {
    unsigned n;
    size_t bytes;
    size_t clean_bytes; /* cached mappings left clean (advised): the fresh
                         * pages the request faults in instead are what
                         * their advice cost, a drop's regret (page.h) */
    struct huge *hd[HUGE_GATHER_MAX];
};
/* What huge_fit_choose picks for a request of map_size bytes aligned to
 * align: a cached mapping taken out of the cache (split after map_size if
 * longer: the tail stays cached), or NULL with the mappings to gather in
 * *g (g->n 0: none, map afresh) (locked). */
struct huge *huge_cache_take_locked(size_t map_size, size_t align, struct huge_gather *g);
/* Cache hd, just freed and dirty, or retire it if it may not be cached;
 * it takes back the cached parts split from the same mapping beside it;
 * the oldest entries past the cache's budget are retired (locked). */
void huge_cache_put_locked(struct huge *hd, struct huge_releases *rel);
/* Is the cache's tick due (at most once per decay tick, while it holds
 * anything)? Then *now is the time read. No lock. */
bool huge_cache_tick_due(uint64_t *now);
/* Hold the cache's dirty mappings to their share of the dirty cap, with
 * live_bytes of live huge mappings (locked). */
void huge_cache_cap_locked(uint64_t now, size_t live_bytes);
/* The cache's part of the gauges: cached_bytes, dirty_bytes, lazy_bytes
 * (locked). */
void huge_cache_gauges_locked(struct huge_gauges *g);
/* sl_check's part for the cache: its entries and counts; returns the
 * bytes cached (locked). */
size_t huge_cache_check_locked(void);

#endif
