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

/* Release all free memory now: collect remote frees, return empty slabs and
 * cached pages, unmap free pageblocks and cached huge mappings. */
SL_API void sl_purge(void);

/* Statistics. A name is a counter ("alloc_small", "free_remote",
 * "extfrag", ...) or a gauge ("blocks", "huge_live_bytes",
 * "mapped_bytes", ...); sl_stat_name(i) lists them all, NULL past the end.
 * Unknown names give 0. */
SL_API uint64_t sl_stat(const char *name);
SL_API const char *sl_stat_name(size_t i);
SL_API void sl_stats_print(int fd);

#ifdef __cplusplus
}
#endif

#endif
