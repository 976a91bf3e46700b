/* annotate.c — the client requests of annotate.h, for memcheck and ASan. */
#include "annotate.h"

#ifndef SL_HAVE_VALGRIND
#define SL_HAVE_VALGRIND 0
#endif
#if SL_HAVE_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif

/* ASan's interface, if the program was built with it (weak: NULL if not). */
void __asan_poison_memory_region(void const volatile *addr, size_t size) __attribute__((weak));
void __asan_unpoison_memory_region(void const volatile *addr, size_t size) __attribute__((weak));

static _Atomic int watcher; /* enum annotate_watcher; 0: not asked yet */

/* Is this valgrind's memcheck? A request only memcheck answers: the
 * validity bits of a byte (1: done); other tools leave the default, 0. */
static bool on_memcheck(void)
{
#if SL_HAVE_VALGRIND
    if (!RUNNING_ON_VALGRIND)
        return false;
    char byte = 0, vbits = 0;
    return VALGRIND_GET_VBITS(&byte, &vbits, 1) == 1;
#else
    return false;
#endif
}

enum annotate_watcher annotate_watch(void)
{
    int w = ld_relaxed(&watcher);
    if (likely(w))
        return (enum annotate_watcher)w;
    w = on_memcheck() ? WATCH_MEMCHECK : __asan_poison_memory_region ? WATCH_ASAN : WATCH_NONE;
    st_relaxed(&watcher, w);
    return (enum annotate_watcher)w;
}

#if SL_HAVE_VALGRIND
#define ON_MEMCHECK() (annotate_watch() == WATCH_MEMCHECK)
#else
#define ON_MEMCHECK() false
#endif

void annotate_quiet_begin(void)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_DISABLE_ERROR_REPORTING;
#endif
}

void annotate_quiet_end(void)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_ENABLE_ERROR_REPORTING;
#endif
}

void annotate_malloc(void *p, size_t n, bool zeroed)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
#else
    (void)p, (void)n, (void)zeroed;
#endif
}

void annotate_free(void *p)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_FREELIKE_BLOCK(p, 0);
#else
    (void)p;
#endif
}

void annotate_reuse(void *p, size_t n)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_MAKE_MEM_UNDEFINED(p, n);
#else
    (void)p, (void)n;
#endif
}

void annotate_defined(void *p, size_t n)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_MAKE_MEM_DEFINED(p, n);
#else
    (void)p, (void)n;
#endif
}

void annotate_pool_create(const void *pool)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_CREATE_MEMPOOL(pool, 0, 0);
#else
    (void)pool;
#endif
}

void annotate_pool_destroy(const void *pool)
{
#if SL_HAVE_VALGRIND
    if (ON_MEMCHECK())
        VALGRIND_DESTROY_MEMPOOL(pool);
#else
    (void)pool;
#endif
}

void annotate_pool_alloc(const void *pool, void *p, size_t n, bool constructed)
{
    switch (annotate_watch()) {
    case WATCH_MEMCHECK:
#if SL_HAVE_VALGRIND
        VALGRIND_MEMPOOL_ALLOC(pool, p, n);
        if (constructed)
            VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
        break;
    case WATCH_ASAN:
        __asan_unpoison_memory_region(p, n);
        break;
    default:
        break;
    }
    (void)pool, (void)constructed;
}

void annotate_pool_free(const void *pool, void *p, size_t n)
{
    switch (annotate_watch()) {
    case WATCH_MEMCHECK:
#if SL_HAVE_VALGRIND
        VALGRIND_MEMPOOL_FREE(pool, p);
#endif
        break;
    case WATCH_ASAN:
        __asan_poison_memory_region(p, n);
        break;
    default:
        break;
    }
    (void)pool;
}
