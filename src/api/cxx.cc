// cxx.cc — C++ operator new and delete (plain, array, nothrow, sized,
// aligned) on sluice. new throws std::bad_alloc after trying the new
// handler, as the standard asks; a sized delete whose size does not match
// the allocation is reported and aborts, like any bad free.
#include <new>

#include "sluice.h"

namespace {

void *new_slow(std::size_t n, std::size_t align, bool nothrow)
{
    for (;;) {
        void *p = align ? sl_aligned_alloc(align, n) : sl_malloc(n);
        if (p)
            return p;
        std::new_handler handler = std::get_new_handler();
        if (!handler) {
            if (nothrow)
                return nullptr;
            throw std::bad_alloc();
        }
        if (nothrow) {
            try {
                handler();
            } catch (...) {
                return nullptr;
            }
        } else {
            handler();
        }
    }
}

inline void *new_impl(std::size_t n)
{
    void *p = sl_malloc(n);
    return p ? p : new_slow(n, 0, false);
}

inline void *new_aligned(std::size_t n, std::align_val_t a)
{
    void *p = sl_aligned_alloc(static_cast<std::size_t>(a), n);
    return p ? p : new_slow(n, static_cast<std::size_t>(a), false);
}

} // namespace

#define EXPORT __attribute__((visibility("default")))

EXPORT void *operator new(std::size_t n) { return new_impl(n); }
EXPORT void *operator new[](std::size_t n) { return new_impl(n); }
EXPORT void *operator new(std::size_t n, const std::nothrow_t &) noexcept
{
    void *p = sl_malloc(n);
    return p ? p : new_slow(n, 0, true);
}
EXPORT void *operator new[](std::size_t n, const std::nothrow_t &t) noexcept { return operator new(n, t); }
EXPORT void *operator new(std::size_t n, std::align_val_t a) { return new_aligned(n, a); }
EXPORT void *operator new[](std::size_t n, std::align_val_t a) { return new_aligned(n, a); }
EXPORT void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
    void *p = sl_aligned_alloc(static_cast<std::size_t>(a), n);
    return p ? p : new_slow(n, static_cast<std::size_t>(a), true);
}
EXPORT void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &t) noexcept
{
    return operator new(n, a, t);
}

EXPORT void operator delete(void *p) noexcept { sl_free(p); }
EXPORT void operator delete[](void *p) noexcept { sl_free(p); }
EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept { sl_free(p); }
EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept { sl_free(p); }
EXPORT void operator delete(void *p, std::size_t n) noexcept { sl_free_sized(p, n); }
EXPORT void operator delete[](void *p, std::size_t n) noexcept { sl_free_sized(p, n); }
EXPORT void operator delete(void *p, std::align_val_t) noexcept { sl_free(p); }
EXPORT void operator delete[](void *p, std::align_val_t) noexcept { sl_free(p); }
EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { sl_free(p); }
EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { sl_free(p); }
EXPORT void operator delete(void *p, std::size_t n, std::align_val_t a) noexcept
{
    sl_free_aligned_sized(p, static_cast<std::size_t>(a), n);
}
EXPORT void operator delete[](void *p, std::size_t n, std::align_val_t a) noexcept
{
    sl_free_aligned_sized(p, static_cast<std::size_t>(a), n);
}
