/* cxx.c — C++ operator new and delete (plain, array, nothrow, sized,
 * aligned) on sluice, written in C under their mangled names, so that
 * libsluice.so does not pull libstdc++, libm and libgcc_s into every C
 * program it is preloaded into (1.2 MB of RSS measured per process).
 *
 * On failure new calls the C++ new handler and retries, and throws
 * std::bad_alloc when there is none, through libstdc++'s own
 * std::get_new_handler and std::__throw_bad_alloc. They are weak
 * references: any program that calls operator new has libstdc++ loaded.
 * This file is built with -fexceptions so those exceptions unwind through
 * it. A sized delete whose size does not match the allocation is reported
 * and aborts, like any bad free.
 */
#include <stdbool.h>

#include "../base/fatal.h"
#include "fast.h"
#include "sluice.h"

typedef void (*new_handler_fn)(void);
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern _Noreturn void _ZSt17__throw_bad_allocv(void) __attribute__((weak));

static sl_noinline void *new_slow(size_t n, size_t align, bool nothrow)
{
    for (;;) {
        void *p = align ? sl_aligned_alloc(align, n) : sl_malloc(n);
        if (p)
            return p;
        new_handler_fn handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
        if (!handler) {
            if (nothrow)
                return NULL;
            if (_ZSt17__throw_bad_allocv)
                _ZSt17__throw_bad_allocv();
            sl_fatal("operator new: out of memory and no C++ runtime to throw std::bad_alloc", NULL, NULL, 0);
        }
        handler();
    }
}

/* malloc's own fast path, inline (fast.h): through sl_malloc, a new cost
 * a call through the PLT and a frame more than a malloc */
sl_inline void *new_plain(size_t n, bool nothrow)
{
    void *p = alloc(n);
    return likely(p != NULL) ? p : new_slow(n, 0, nothrow);
}

sl_inline void *new_aligned(size_t n, size_t align, bool nothrow)
{
    void *p = sl_aligned_alloc(align, n);
    return likely(p != NULL) ? p : new_slow(n, align, nothrow);
}

#define EXPORT __attribute__((visibility("default")))
typedef struct nothrow_t nothrow_t; /* std::nothrow_t, only ever by reference */

/* operator new / new[] (size), (size, nothrow), (size, align), (size, align, nothrow) */
EXPORT void *_Znwm(size_t n) { return new_plain(n, false); }
EXPORT void *_Znam(size_t n) { return new_plain(n, false); }
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const nothrow_t *t) { (void)t; return new_plain(n, true); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const nothrow_t *t) { (void)t; return new_plain(n, true); }
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a, false); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a, false); }
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const nothrow_t *t) { (void)t; return new_aligned(n, a, true); }
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const nothrow_t *t) { (void)t; return new_aligned(n, a, true); }

/* operator delete / delete[]: plain, nothrow, sized, aligned, and their mixes */
EXPORT void _ZdlPv(void *p) { dealloc(p); }
EXPORT void _ZdaPv(void *p) { dealloc(p); }
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const nothrow_t *t) { (void)t; dealloc(p); }
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const nothrow_t *t) { (void)t; dealloc(p); }
EXPORT void _ZdlPvm(void *p, size_t n) { dealloc_sized(p, 0, n, false); }
EXPORT void _ZdaPvm(void *p, size_t n) { dealloc_sized(p, 0, n, false); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; dealloc(p); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; dealloc(p); }
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const nothrow_t *t) { (void)a, (void)t; dealloc(p); }
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const nothrow_t *t) { (void)a, (void)t; dealloc(p); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { dealloc_sized(p, a, n, false); }
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { dealloc_sized(p, a, n, false); }
