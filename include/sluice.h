/* sluice.h — public interface of the sluice memory allocator.
 *
 * libsluice.so also replaces the malloc family and C++ operator new/delete
 * when preloaded (LD_PRELOAD=libsluice.so) or linked (-lsluice). The sl_*
 * functions below are the same allocator under its own names.
 *
 * Misuse (double free, a pointer sluice did not hand out, realloc of freed
 * memory, a sized free with the wrong size) prints one line on stderr and
 * aborts. Failures return NULL with errno = ENOMEM (EINVAL for a bad
 * alignment); a successful call leaves errno untouched.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SL_API __attribute__((visibility("default")))

SL_API void *sl_malloc(size_t size);
SL_API void *sl_calloc(size_t n, size_t size);
SL_API void *sl_realloc(void *p, size_t size);
SL_API void *sl_reallocarray(void *p, size_t n, size_t size);
SL_API void sl_free(void *p);
SL_API void sl_free_sized(void *p, size_t size);
SL_API void sl_free_aligned_sized(void *p, size_t align, size_t size);
SL_API void *sl_aligned_alloc(size_t align, size_t size);
SL_API int sl_posix_memalign(void **out, size_t align, size_t size);
SL_API void *sl_memalign(size_t align, size_t size);
SL_API void *sl_valloc(size_t size);
SL_API void *sl_pvalloc(size_t size);
SL_API size_t sl_usable_size(const void *p);

/* Bulk operations. sl_alloc_bulk gives n objects of `size` bytes in out,
 * all or none: it returns n, or 0 with errno = ENOMEM. sl_free_bulk frees
 * any mix of sizes and owning threads; NULL entries are skipped. Objects of
 * one slab are chained privately and handed back with one operation (none
 * for this thread's slabs, one compare-and-swap for another thread's), so
 * freeing N objects costs one splice per slab rather than N frees. Like the
 * kernel's kmem_cache_free_bulk, sl_free_bulk may set entries of ptrs to
 * NULL as it goes. */
SL_API size_t sl_alloc_bulk(size_t size, size_t n, void **out);
SL_API void sl_free_bulk(void **ptrs, size_t n);

/* Object caches: the kernel's kmem_cache in user space. A cache hands out
 * objects of one size from its own slabs, with the same per-thread fast
 * paths as malloc.
 *   sl_cache_create: size >= 1 (at most 128 KiB); align 0 or a power of two
 *     up to 4096 (objects are at least 16-byte aligned); flags below; ctor,
 *     if not NULL, runs once per object when it is first carved from a new
 *     slab, not on every allocation, and a freed object keeps its
 *     constructed state (the constructor must not free to its own cache).
 *     NULL with errno EINVAL for bad arguments, ENOMEM when out of memory
 *     or when 448 caches are already open. name is copied (47 characters).
 *   sl_cache_alloc / _alloc_bulk: NULL / 0 with errno ENOMEM; bulk is all
 *     n objects or none.
 *   sl_cache_free / _free_bulk: an object of another cache (or of malloc)
 *     is reported in one line on stderr and the process aborts. NULL is
 *     ignored. free() and sl_free_bulk() also take cache objects.
 *   sl_cache_shrink: return this thread's and exited threads' empty slabs
 *     of the cache; the bytes returned.
 *   sl_cache_destroy: release every slab of the cache at once, live objects
 *     included (they are counted in the stat "cache_destroy_live"). */
typedef struct sl_cache sl_cache_t;
#define SL_CACHE_RECLAIMABLE   0x1u /* slabs in RECLAIM pageblocks */
#define SL_CACHE_HWCACHE_ALIGN 0x2u /* align objects to 64-byte cache lines */
SL_API sl_cache_t *sl_cache_create(const char *name, size_t size, size_t align, unsigned flags,
                                   void (*ctor)(void *));
SL_API void *sl_cache_alloc(sl_cache_t *c);
SL_API void sl_cache_free(sl_cache_t *c, void *p);
SL_API size_t sl_cache_alloc_bulk(sl_cache_t *c, size_t n, void **out);
SL_API void sl_cache_free_bulk(sl_cache_t *c, size_t n, void **objs);
SL_API size_t sl_cache_shrink(sl_cache_t *c);
SL_API void sl_cache_destroy(sl_cache_t *c);
/* The cache's shrinker (the kernel's, for a cache whose owner can give
 * objects back, such as one created SL_CACHE_RECLAIMABLE): fn is asked to
 * free up to `want` objects of the cache (with sl_cache_free) and returns
 * how many it freed. sl_purge() asks every cache that has one, with want =
 * SIZE_MAX, before it gives memory back; under a heap budget the
 * watermark boost asks for the objects of a few pageblocks, from the
 * reclaimer thread (SLUICE_BOOST). So fn may run on sluice's reclaimer
 * thread: a program that forks while holding the lock fn takes should
 * take that lock in a pthread_atfork handler, as for its own threads.
 * One call of a given fn at a time. NULL removes it, and returns once no
 * call of the old fn is running; sl_cache_destroy forgets it the same
 * way. fn must not create or destroy caches, nor set another shrinker. */
SL_API void sl_cache_set_reclaim(sl_cache_t *c, size_t (*fn)(sl_cache_t *c, size_t want));

/* Per-cache statistics, the kernel's /proc/slabinfo: one row for each
 * malloc size class ("malloc-16" ... "malloc-32768") and each object
 * cache. The caller sets size to sizeof(struct sl_cache_stats) (the
 * version: fields are only ever added at the end); sl_cache_stats fills
 * what both know of, sets size to it and returns 0, or EINVAL (NULL
 * arguments, a size below the first version's). The counts are summed
 * over every thread when asked; objects_active and the slabs are read from
 * the slabs themselves, and in a program whose threads are not allocating
 * objects_active == allocations - frees. sl_ctl reads the same figures:
 * "cache.NAME.FIELD" (a uint64_t; NAME a cache's name or malloc-N) and
 * "caches.I" (the I-th row as this struct, from 0, in the order
 * SLUICE_STATS lists them; ENOENT past the last). */
struct sl_cache_stats {
    size_t size;             /* in: sizeof(struct sl_cache_stats); out: the bytes filled */
    char name[48];
    uint64_t object_size;    /* bytes an object takes in its slabs (its stride) */
    uint64_t objects_active; /* handed out and not freed */
    uint64_t objects_total;  /* room in its slabs */
    uint64_t slabs_active;   /* slabs holding an object handed out (or, for malloc,
                              * freed into a thread's magazine or batch: not back yet) */
    uint64_t slabs_total;
    uint64_t pages_per_slab; /* 4 KiB pages */
    uint64_t pageblock_type; /* SL_PAGEBLOCK_SLAB, _RECLAIM (SL_CACHE_RECLAIMABLE), or _BUF
                              * (malloc's classes above 512 B) */
    uint64_t allocations;    /* objects handed out, ever (sl_cache_alloc, malloc, bulk) */
    uint64_t frees;          /* objects given back, ever, every way */
    uint64_t remote_frees;   /* of the frees, by a thread other than the slab's owner */
    uint64_t bulk_frees;     /* of the frees, through sl_free_bulk or sl_cache_free_bulk */
};
#define SL_PAGEBLOCK_SLAB    0
#define SL_PAGEBLOCK_RECLAIM 1
#define SL_PAGEBLOCK_BUF     2
SL_API int sl_cache_stats(sl_cache_t *cache, struct sl_cache_stats *out);

/* Release all free memory now: collect remote frees, return empty slabs and
 * cached pages, make every free page clean (MADV_DONTNEED, whatever
 * SLUICE_PURGE says), unmap free pageblocks and cached huge mappings.
 * malloc_trim(0) does the same. Big cached mappings go to the teardown
 * queue like a big free: sl_flush() waits for them. */
SL_API void sl_purge(void);

/* Wait until every range queued for background teardown before the call
 * (a free, shrinking realloc or sl_purge of SLUICE_TEARDOWN_MIN bytes or
 * more) is unmapped; the calling thread releases batches itself while
 * there are any. Returns at once when nothing is queued. */
SL_API void sl_flush(void);

/* Walk every structure of the allocator and check every invariant (free
 * lists, buddy orders, run kinds against the lists and caches that hold
 * them, live-object bitmaps against slab counts, free-page states against
 * their counts, the pagemap against pageblocks and huge mappings). Call it
 * while other threads are not allocating. Returns 0, or prints one line
 * naming the broken invariant and aborts. */
SL_API int sl_check(void);

/* Statistics. A name is a counter ("alloc_small", "free_remote",
 * "extfrag", ...) or a gauge ("blocks", "huge_live_bytes",
 * "mapped_bytes", ...); sl_stat_name(i) lists them all, NULL past the end.
 * Unknown names give 0. */
SL_API uint64_t sl_stat(const char *name);
/* Every option and statistic by name, and the actions: "opt.NAME" (an
 * option by the name after SLUICE_: read as an int64_t, and the ones that
 * can change at run time written as one), "stat.NAME" (a statistic, read
 * as a uint64_t), "purge", "flush", "check", "stats.print" and
 * "stats.json" (an int file descriptor as the new value), "prof.dump"
 * (a const char * path, or none: sl_prof_dump). old/oldlen read
 * (oldlen in: room, out: size), new/newlen write. Returns 0 or ENOENT (no
 * such name), EINVAL (wrong size or value), EPERM (read-only). */
SL_API int sl_ctl(const char *name, void *old, size_t *oldlen, const void *new_value, size_t newlen);
SL_API const char *sl_stat_name(size_t i);
/* Heap profiling (SLUICE_PROF=PATH, SLUICE_LEAKS=1 or SLUICE_CHECK=1 turn
 * the sampling on at start): write the live-memory profile now, in pprof's
 * protocol buffer format (`go tool pprof -sample_index=inuse_space PATH`),
 * to path ("%p" is the process id), or with path NULL to SLUICE_PROF's
 * next numbered file, PATH.N. Returns 0, or ENOTSUP when profiling is
 * off, EINVAL for NULL without SLUICE_PROF, or open's or write's errno.
 * Also sl_ctl("prof.dump", NULL, NULL, &path, sizeof path). */
SL_API int sl_prof_dump(const char *path);
SL_API void sl_stats_print(int fd);
/* The same figures as one JSON object on one line: {"version":1,
 * "counters":{name:n,...},"gauges":{name:n,...},"kernel":{...},
 * "reconciliation":{...},"drains":{...},"enomem_drains":n,
 * "caches":[{"name":...,"object_size":n,...},...]} (sl_stat(3) has every
 * key; a "caches" row has struct sl_cache_stats's fields, pageblock_type
 * as "SLAB" or "RECLAIM"). SLUICE_STATS=json prints it to stderr at exit.
 * No allocation: safe anywhere. */
SL_API void sl_stats_json(int fd);

#ifdef __cplusplus
}
#endif

#endif
