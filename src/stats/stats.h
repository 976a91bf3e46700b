/* stats.h — every counter sluice keeps, in one table.
 *
 * Event counters live in an array per thread heap (written only by that
 * thread: relaxed load + store, no RMW) and in one global array (written
 * under the lock of the layer that counts). sl_stats_get sums them on demand
 * together with the gauges each layer reports. The struct, the text summary
 * (SLUICE_STATS=1) and the name list are all generated from SL_STAT_LIST.
 */
#ifndef SL_STATS_H
#define SL_STATS_H

#include "../base/common.h"

#define SL_STAT_LIST(X)                                                        \
    X(alloc_small, "small allocations (slab objects)")                        \
    X(alloc_medium, "medium allocations (page runs)")                         \
    X(alloc_huge, "huge allocations (own mappings)")                          \
    X(free_small, "small frees by the owning thread")                         \
    X(free_remote, "small frees by another thread")                           \
    X(free_medium, "medium frees")                                            \
    X(bulk_free_calls, "sl_free_bulk calls")                                   \
    X(free_huge, "huge frees")                                                \
    X(remote_collect, "remote free lists collected by owners")                \
    X(slab_new, "slabs created")                                              \
    X(slab_release, "empty slabs returned to the page layer")                 \
    X(slab_taken_idle, "of them, emptied by remote frees and taken from an idle owner") \
    X(mag_trim_passes, "magazine trim passes (each heap's, 4 a decay tick)")  \
    X(mag_trim_objects, "objects the trim gave back from magazines to slabs") \
    X(pcache_refill, "page cache refills (one lock each)")                    \
    X(pcache_drain, "page cache drains (one lock each)")                      \
    X(pcache_grow, "page cache budgets doubled (drained runs asked for again)") \
    X(pcache_shrink, "page cache budgets halved or reset (idle, sparse, a drop)")     \
    X(runcache_take, "medium runs reused whole from the shared run cache")    \
    X(runcache_flush, "parked runs given back to the buddy lists (cap, room)") \
    X(block_map, "pageblocks mapped")                                         \
    X(block_unmap, "pageblocks unmapped")                                     \
    X(block_steal, "whole free pageblocks taken by another type")             \
    X(extfrag, "external fragmentation events")                               \
    X(extfrag_serious, "of them, a SLAB or RECLAIM piece in a RUN or BUF block") \
    X(boost_events, "watermark boosts raised by extfrag events")              \
    X(boost_runs, "boosted reclaim passes (shrinkers, orphans, owners asked)") \
    X(boost_drains, "page caches and spare slabs given back when asked")     \
    X(thp_collapse, "dense pageblocks collapsed into hugepages (MADV_COLLAPSE)") \
    X(thp_advise, "dense pageblocks advised MADV_HUGEPAGE (for khugepaged)")   \
    X(thp_failed, "collapses and advice the kernel refused")                 \
    X(thp_split, "hugepage pageblocks turned sparse and given up to purging") \
    X(thp_untouched, "dense pageblocks left plain: too few pages resident")    \
    X(huge_map, "huge mappings made")                                         \
    X(huge_unmap, "huge mappings unmapped")                                   \
    X(huge_reuse, "huge allocations served from the huge cache")              \
    X(huge_split, "cached huge mappings split: the head handed out, the tail kept") \
    X(huge_gather, "huge allocations made of cached mappings moved together (mremap)") \
    X(huge_coalesce, "cached huge mappings joined to a freed neighbour in the address space") \
    X(realloc_inplace, "reallocs done in place")                              \
    X(realloc_move, "reallocs that moved")                                    \
    X(heap_new, "thread heaps created")                                       \
    X(heap_reuse, "thread heaps of exited threads taken over")                \
    X(heap_orphan, "thread heaps left by exiting threads")                    \
    X(cache_create, "object caches created")                                  \
    X(cache_destroy, "object caches destroyed")                               \
    X(cache_destroy_live, "live objects released by sl_cache_destroy")        \
    X(cache_shrink_bytes, "bytes returned by sl_cache_shrink")                \
    X(reclaim_calls, "cache shrinkers called (sl_cache_set_reclaim)")          \
    X(reclaim_objects, "objects the shrinkers said they freed")               \
    X(madv_free_calls, "ranges advised MADV_FREE (a madvise call each, or in a batch): dirty -> lazy") \
    X(madv_free_bytes, "bytes advised MADV_FREE")                             \
    X(madv_dontneed_calls, "ranges advised MADV_DONTNEED (a madvise call each, or in a batch): -> clean") \
    X(madv_dontneed_bytes, "bytes advised MADV_DONTNEED")                     \
    X(madv_failed, "madvise calls the kernel refused (pages stay dirty)")      \
    X(madv_batched, "of the ranges advised, those advised together, one process_madvise call a batch") \
    X(madv_batches, "process_madvise calls that advised a batch of ranges")    \
    X(drop_purge, "purges at a drop in the pages in use (no reclaimer running), or of slabs taken from idle owners") \
    X(drop_regret, "drops left unpurged: the last drop's purged pages were taken back") \
    X(teardown_ranges, "big ranges queued for teardown by workers")            \
    X(teardown_sync, "big ranges the caller released (no workers, queue full)") \
    X(teardown_sync_bytes, "bytes in them")                                    \
    X(teardown_batches, "teardown gather batches released")                   \
    X(teardown_helped, "of them, by a freeing, allocating or flushing thread") \
    X(teardown_bytes, "bytes unmapped by the teardown queue")                 \
    X(teardown_ns, "ns from free to unmapped, summed over queued ranges")     \
    X(teardown_max_ns, "ns from free to unmapped, the longest")               \
    X(teardown_workers, "teardown worker threads started")                    \
    X(reclaimer_runs, "decay passes run by the reclaimer thread")             \
    X(pressure_events, "memory pressure seen: everything purged at once")

enum sl_stat {
#define X(name, text) STAT_##name,
    SL_STAT_LIST(X)
#undef X
    STAT_COUNT
};

/* Gauges: each layer's state, reported when asked (STAT_SOURCE). */
#define SL_GAUGE_LIST(X)                                                      \
    X(blocks, "pageblocks mapped")                                            \
    X(blocks_slab, "pageblocks typed SLAB")                                   \
    X(blocks_reclaim, "pageblocks typed RECLAIM")                             \
    X(blocks_run, "pageblocks typed RUN")                                     \
    X(blocks_buf, "pageblocks typed BUF (slabs of malloc's classes above 512 B)") \
    X(blocks_free, "pageblocks wholly free")                                  \
    X(budget_bytes, "heap budget: pageblock bytes before fallback (0: none)")  \
    X(thp_blocks, "pageblocks collapsed or advised into hugepages")           \
    X(free_page_bytes, "bytes in free pages of mapped pageblocks")            \
    X(active_bytes, "bytes in pages of pageblocks handed out (slabs, runs)")  \
    X(dirty_bytes, "free bytes still resident, not advised")                  \
    X(dirty_thp_bytes, "of them, in dense hugepage pageblocks: kept resident") \
    X(parked_bytes, "of them, runs parked whole in the shared run cache")     \
    X(lazy_bytes, "free bytes advised MADV_FREE (the kernel may take them)")  \
    X(clean_bytes, "free bytes that read as zero (DONTNEED or untouched)")    \
    X(huge_live_bytes, "bytes in live huge mappings")                         \
    X(huge_cached_bytes, "bytes in cached huge mappings")                     \
    X(huge_count, "live huge allocations")                                    \
    X(teardown_pending_bytes, "bytes queued for teardown, not yet started")   \
    X(teardown_inflight_bytes, "bytes being released by teardown now")        \
    X(meta_bytes, "bytes mapped for sluice's own records")                    \
    X(block_header_bytes, "bytes of pageblock headers (descriptors, bitmaps)") \
    X(block_rss_bytes, "pageblock bytes resident (smaps)")                    \
    X(block_thp_bytes, "of them, in transparent hugepages")                   \
    X(huge_rss_bytes, "huge mapping bytes resident (smaps)")                  \
    X(huge_thp_bytes, "of them, in transparent hugepages")                    \
    X(resident_bytes, "pageblock, huge and zone bytes resident (mincore)")    \
    X(mapped_bytes, "bytes mapped in all")

enum sl_gauge {
#define X(name, text) GAUGE_##name,
    SL_GAUGE_LIST(X)
#undef X
    GAUGE_COUNT
};

/* A layer's report to the statistics. Each layer that keeps gauges, or
 * counters outside stats_global, registers one beside its own code; the
 * statistics run every report when they are read, so they call no layer
 * (stats is a sink: every layer pushes into it, it reaches none). A report
 * adds its counters into c and adds its share of each gauge into g (all
 * start at 0: mapped_bytes, dirty_bytes and the like sum several layers). */
struct sl_cache_stats; /* sluice.h */
typedef void stat_cache_emit(const struct sl_cache_stats *row, void *arg);
struct stat_source {
    void (*report)(uint64_t c[STAT_COUNT], uint64_t g[GAUGE_COUNT]);
    /* the per-cache table (slabinfo): emit called once for each row, in
     * cache id order (NULL: this source has none) */
    void (*caches)(stat_cache_emit *emit, void *arg);
};
#define STAT_SOURCE(var, fn) sl_section_entry("sl_stat_source") static const struct stat_source var = { fn, NULL }
#define STAT_CACHE_SOURCE(var, fn)                                                                                  \
    sl_section_entry("sl_stat_source") static const struct stat_source var = { NULL, fn }

typedef _Atomic uint64_t stat_counters[STAT_COUNT];

extern stat_counters stats_global; /* written under the counting layer's lock */

/* Single-writer add to one counter (owner thread, or holder of the
 * layer's lock). */
sl_inline void count_add(_Atomic uint64_t *c, uint64_t n)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    /* one add to memory instead of a load, an add and a store: an aligned
     * 8-byte write, so a reader's relaxed load sees the old or new value */
    __asm__("addq %1, %0" : "+m"(*(uint64_t *)c) : "er"(n));
#else
    st_relaxed(c, ld_relaxed(c) + n);
#endif
}
sl_inline void stat_add(_Atomic uint64_t *c, enum sl_stat id, uint64_t n) { count_add(&c[id], n); }

/* Add to a global counter from any thread, with no lock (slow paths only:
 * one atomic RMW). A counter is written either this way or under its
 * layer's lock, never both. */
sl_inline void stat_add_shared(enum sl_stat id, uint64_t n)
{
    atomic_fetch_add_explicit(&stats_global[id], n, memory_order_relaxed);
}

/* One madvise call of `bytes`, MADV_FREE (lazy) or MADV_DONTNEED. */
sl_inline void stat_madvise(bool lazy, uint64_t bytes)
{
    stat_add_shared(lazy ? STAT_madv_free_calls : STAT_madv_dontneed_calls, 1);
    stat_add_shared(lazy ? STAT_madv_free_bytes : STAT_madv_dontneed_bytes, bytes);
}

void stats_print(void); /* text summary to stderr, write(2) only */
/* A statistic by name (sl_stat's, and the registry's held.NAME ...):
 * false if there is none. */
bool stats_lookup(const char *name, uint64_t *v);
/* Several at once, from one snapshot: false if one is unknown (it reads 0). */
bool stats_lookup_many(size_t n, const char *const name[], uint64_t v[]);
/* sl_stats_json, with the smaps gauges (which walk every page table) read
 * or left 0. */
void stats_json(int fd, bool smaps);
/* The text summary (or, as_json, the JSON object, smaps read) handed to cb
 * a piece at a time, each a string of at most 512 bytes: jemalloc's
 * malloc_stats_print (api/jemalloc_compat.c). No allocation; no lock of
 * sluice is held while cb runs. */
void stats_write(void (*cb)(void *arg, const char *s), void *arg, bool as_json);
/* Every counter now (the global ones and each layer's report). */
void stats_counters(uint64_t out[STAT_COUNT]);
/* For print.c. The gauges that ask the kernel, read only when wanted: the
 * smaps ones make it walk every page table and format text for every
 * mapping (milliseconds per 100 MiB); resident_bytes walks sluice's own
 * page tables with mincore (microseconds). */
enum stats_want { STATS_WANT_SMAPS = 1, STATS_WANT_RESIDENT = 2 };
/* Every counter and gauge: the global counters, then each layer's report
 * (STAT_SOURCE), then the costly gauges that are wanted (stats_want bits;
 * the others read 0). */
void stats_snapshot(uint64_t all[STAT_COUNT + GAUGE_COUNT], unsigned want);
/* Each layer's per-cache rows (STAT_CACHE_SOURCE), to emit. */
void stats_caches_each(stat_cache_emit *emit, void *arg);
/* SLUICE_PUBLISH (publish.c): write the statistics to the option's path
 * (%p: the process id) through a temporary file and rename, so a reader
 * never sees half of them. One writer at a time; after the final write
 * (at exit, with the smaps gauges) nothing more is written. */
enum publish_when {
    PUBLISH_START, /* at load: the file says the process is watched */
    PUBLISH_TICK,  /* the reclaimer's tick */
    PUBLISH_FINAL, /* at exit */
};
void stats_publish(enum publish_when when);
/* In a fork child: its own file, written at once, with the counters it
 * inherited named as such (they are its parent's). */
void stats_publish_fork_child(void);

#endif
