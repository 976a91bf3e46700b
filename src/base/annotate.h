/* annotate.h — telling a memory checker which blocks sluice hands out and
 * takes back, so that it reports a use after free of them: valgrind's
 * memcheck (client requests, compiled in when CMake found
 * <valgrind/valgrind.h>) and AddressSanitizer (its poisoning interface,
 * found at run time: libsluice is not built with ASan, a program that
 * links it may be).
 *
 * Who watches, decided once (annotate_watch, at the first question):
 *   - memcheck: the malloc family runs in checked mode (api/checked.c:
 *     every call through its slow paths) and each block is a
 *     MALLOCLIKE/FREELIKE block; each object cache is a mempool whose
 *     objects are MEMPOOL_ALLOC'd and MEMPOOL_FREE'd, its calls taken off
 *     their fast paths (cache/cache.c). Under other valgrind tools
 *     (callgrind for bench/pair.sh, cachegrind) nothing changes.
 *   - ASan: it replaces malloc itself; the object caches poison a freed
 *     object and unpoison it when it is handed out again.
 * The fast paths never ask: the choice is folded into values they compare
 * anyway (sl_small_limit; an object cache's fast-path key and id).
 *
 * sluice's own reads and writes of free objects (free-list links, marks)
 * run between annotate_quiet_begin and _end: memcheck's reports are off
 * for this thread meanwhile (a free object is no-access to memcheck).
 */
#ifndef SL_ANNOTATE_H
#define SL_ANNOTATE_H

#include "common.h"

enum annotate_watcher { WATCH_NONE = 1, WATCH_MEMCHECK, WATCH_ASAN };
/* Who watches this process (memcheck, ASan or nobody). */
enum annotate_watcher annotate_watch(void);

void annotate_quiet_begin(void);
void annotate_quiet_end(void);

/* The malloc family (memcheck): p, n bytes, handed out (zeroed: they read
 * as 0 and count as initialised) and taken back. */
void annotate_malloc(void *p, size_t n, bool zeroed);
void annotate_free(void *p);
/* Memory sluice is about to use for itself, whatever it held: accessible
 * again (memcheck: undefined; its own writes define it). */
void annotate_reuse(void *p, size_t n);
/* p, n bytes: accessible and initialised (memcheck). */
void annotate_defined(void *p, size_t n);

/* An object cache (pool: an address that names it): made, destroyed (its
 * objects with it), an object of n bytes handed out (constructed: its
 * bytes count as initialised) and taken back. */
void annotate_pool_create(const void *pool);
void annotate_pool_destroy(const void *pool);
void annotate_pool_alloc(const void *pool, void *p, size_t n, bool constructed);
void annotate_pool_free(const void *pool, void *p, size_t n);

#endif
