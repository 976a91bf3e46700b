/* huge.h — huge allocations: each its own mapping, 2 MiB aligned and a whole
 * number of 2 MiB granules long, so it owns its pagemap entries.
 * Transparent hugepages (MADV_HUGEPAGE on the whole granules the request
 * covers) only from HUGE_THP_MIN up: a buffer of a few MiB touched sparsely
 * (one byte every 64 KiB) would fault in and zero whole 2 MiB pages
 * (measured, bench/large: 1.8 s with the hint on every mapping and a
 * 4-entry cache, 0.05 s without it and with the cache below), while a
 * mapping of 64 MiB and more is nearly always filled, and hugepages make
 * its faults, its TLB misses and its teardown (issue 10) cheaper. A
 * request aligned to 2 MiB or more (posix_memalign, aligned_alloc) gets
 * the hint at any size: a program that aligns to the hugepage size asks
 * for hugepages (bench/fragment's demand). Where THP is "always", the
 * kernel backs the smaller ones too.
 *
 * A freed mapping is kept in a cache (HUGE_CACHE_ENTRIES, at most
 * HUGE_CACHE_BYTES, each at most half of that) and reused, so a program
 * that allocates and frees big buffers in a loop does not pay mmap + page
 * faults each time: the best resident fit split to the request's length,
 * else resident mappings moved together by mremap, else a clean fit
 * (huge_fit.h). Cached descriptors stay in the pagemap with live ==
 * false, so a double free is named as one.
 *
 * Purging: a cached mapping is dirty when freed; after the dirty decay it
 * is advised MADV_DONTNEED (in every purge mode but off: MADV_FREE'd pages
 * would count in the RSS until memory runs short, huge_cache.c: advise_cached),
 * and after the lazy decay it is unmapped. With SLUICE_DIRTY_DECAY_MS=0
 * it is advised as it is freed. A reuse clears it for calloc unless it is
 * known clean.
 */
#ifndef SL_HUGE_H
#define SL_HUGE_H

#include "../base/common.h"
#include "../page/block.h" /* enum page_state */

#define HUGE_MIN     ((size_t)1 << 20)  /* requests above 1 MiB are huge */
#define HUGE_THP_MIN ((size_t)64 << 20) /* from here on, MADV_HUGEPAGE */

struct huge {
    uint8_t *base;
    size_t map_size;  /* mapping length, multiple of 2 MiB */
    size_t req_size;  /* last requested size (free_sized checks it) */
    bool live;        /* huge_lock */
    bool quarantined; /* checked mode: freed, PROT_NONE, awaiting release
                       * (still set at huge_free if it could not be made
                       * read-write again: then it is unmapped, not cached) */
    bool sampled;     /* live and sampled (prof/prof.h): set by its malloc,
                       * cleared by its free, which then forgets the sample */
    bool thp;         /* advised MADV_HUGEPAGE (some of it): set and cleared
                       * by its owner (huge.c: hint_huge), kept in the cache */
    uint8_t state;    /* cached: enum page_state, huge_lock */
    uint32_t origin;  /* the mapping it was split from (its parts share it:
                       * huge_cache.c joins them again), huge_lock */
    uint64_t state_ms; /* cached: when it entered that state */
    struct huge *next; /* cache list, huge_lock */
};

/* align: power of two; zero: the caller needs zeroed memory. NULL + ENOMEM. */
void *huge_alloc(size_t size, size_t align, bool zero);
void huge_free(struct huge *hd, void *p);
/* Grow or shrink in place, or move by mremap; NULL if neither works
 * (p stays valid). */
void *huge_realloc(struct huge *hd, void *p, size_t size);
/* Validate p against its descriptor (op names the caller in the message). */
void huge_check(struct huge *hd, const void *p, const char *op);
void huge_trim(void);   /* empty the cache (sl_purge) */
/* The purge layer's pass over cached mappings (force: whatever their age). */
void huge_purge_decay(uint64_t now_ms, bool force);
struct huge_gauges {
    size_t live_bytes, cached_bytes, count, dirty_bytes, lazy_bytes;
};
void huge_gauges(struct huge_gauges *g);
void huge_check_all(void); /* sl_check's part; aborts on a broken invariant */
struct sl_lock *huge_fork_lock(void); /* for fork's handlers */

/* The slab layer's allocation slow paths call it after page_alloc, with
 * no lock held. When the heap grew (a pageblock mapped since the last
 * call), and once per decay tick while the cache holds mappings (with a
 * reclaimer or without one), the cache's dirty mappings are held to
 * their share of the dirty cap, newest kept (huge_cache.c: huge_cache_cap_locked); the
 * tick also runs the cache's decay. Two loads when nothing was mapped and
 * nothing is cached; a clock read per call while something is. */
void huge_growth(void);

#endif
