/* common.h — constants and compiler helpers shared by every layer.
 *
 * Geometry (fixed for the whole allocator):
 *   page       4 KiB   (SL_PAGE)
 *   pageblock  2 MiB   (SL_BLOCK), also the pagemap granule
 *   an object start is a multiple of 16 bytes (SL_GRAIN): the live-object
 *   bitmap of a pageblock has one bit per grain.
 * Nothing here calls the kernel or allocates.
 */
#ifndef SL_COMMON_H
#define SL_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define sl_noinline __attribute__((noinline))
#define sl_cold     __attribute__((cold, noinline))
/* A table entry in a linker section (the reclaim registry's drains, the
 * statistics' sources): kept by a link that collects unused sections
 * (--gc-sections, as rustc links), which would drop it otherwise, since
 * nothing names it but the section's __start_/__stop_ bounds. */
#if defined(__has_attribute)
#if __has_attribute(retain)
#define sl_section_entry(name) __attribute__((used, retain, section(name), aligned(sizeof(void *))))
#endif
#endif
#ifndef sl_section_entry
#define sl_section_entry(name) __attribute__((used, section(name), aligned(sizeof(void *))))
#endif

/* SLUICE_DEBUG=ON (-DSL_DEBUG=1): cheap invariants (sl_assert) and the
 * lock order (lock.h) are checked; SL_DEBUG=2 adds the expensive walks
 * (sl_assert_expensive). Constants, not #ifdef, so both are compiled. */
#ifndef SL_DEBUG
#define SL_DEBUG 0
#endif
static const bool config_debug = SL_DEBUG >= 1;
static const bool config_debug_expensive = SL_DEBUG >= 2;
_Noreturn void sl_assert_fail(const char *cond, const char *file, int line);
#define sl_assert(cond)                                       \
    do {                                                      \
        if (config_debug && !(cond))                          \
            sl_assert_fail(#cond, __FILE__, __LINE__);        \
    } while (0)
#define sl_assert_expensive(cond)                             \
    do {                                                      \
        if (config_debug_expensive && !(cond))                \
            sl_assert_fail(#cond, __FILE__, __LINE__);        \
    } while (0)
#define sl_inline   static inline __attribute__((always_inline))
#define sl_hidden   __attribute__((visibility("hidden")))

#define SL_PAGE_SHIFT  12
#define SL_PAGE        ((size_t)1 << SL_PAGE_SHIFT)
#define SL_BLOCK_SHIFT 21
#define SL_BLOCK       ((size_t)1 << SL_BLOCK_SHIFT)
#define SL_BLOCK_PAGES (SL_BLOCK / SL_PAGE)          /* 512 */
#define SL_GRAIN_SHIFT 4
#define SL_GRAIN       ((size_t)1 << SL_GRAIN_SHIFT)  /* 16: malloc alignment */
#define SL_CACHELINE   64

/* A spin-wait hint to the CPU. */
sl_inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

sl_inline uintptr_t align_down(uintptr_t x, uintptr_t a) { return x & ~(a - 1); }
sl_inline uintptr_t align_up(uintptr_t x, uintptr_t a) { return (x + a - 1) & ~(a - 1); }
sl_inline bool is_pow2(size_t x) { return x && !(x & (x - 1)); }
/* A 64-bit mix (murmur3's finaliser): every input bit moves every output
 * bit; for hash tables and the checked mode's canaries. */
sl_inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}
sl_inline unsigned log2_floor(size_t x) { return 63u - (unsigned)__builtin_clzl(x); }
sl_inline unsigned log2_ceil(size_t x) { return x <= 1 ? 0 : log2_floor(x - 1) + 1; }
/* Bits set in x, inline: the baseline x86-64 has no popcnt instruction, and
 * __builtin_popcountll calls libgcc's __popcountdi2 (callgrind: 6% of a
 * medium-run churn's instructions went there). */
sl_inline unsigned popcount64(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/* Bit i mod 64 of v: test, and take (test and clear). On x86-64 one bt / btr, which
 * take the index mod 64 themselves (the compiler masks it first, and
 * folds a test into neighbouring branches as a shift and four logic ops). */
sl_inline bool bit_test64(uint64_t v, uintptr_t i)
{
#if defined(__x86_64__)
    bool c;
    __asm__("btq %2, %1" : "=@ccc"(c) : "r"(v), "r"(i) : "cc");
    return c;
#else
    return (v >> (i & 63)) & 1;
#endif
}
/* Set bit i mod 64 of *v; was it set already? One bts on x86-64 (a
 * remote batch's flush gathers a run's mask with it). */
sl_inline bool bit_test_set64(uint64_t *v, uintptr_t i)
{
#if defined(__x86_64__)
    bool c;
    __asm__("btsq %2, %0" : "+r"(*v), "=@ccc"(c) : "r"(i) : "cc");
    return c;
#else
    uint64_t b = (uint64_t)1 << (i & 63);
    bool c = *v & b;
    *v |= b;
    return c;
#endif
}
/* Clear bit i mod 64 of *v and say whether it was set: one btr, whose
 * carry flag is the old bit (bulk free's check-and-take of a live bit). */
sl_inline bool bit_take64(uint64_t *v, uintptr_t i)
{
#if defined(__x86_64__)
    bool c;
    __asm__("btrq %2, %0" : "+r"(*v), "=@ccc"(c) : "r"(i) : "cc");
    return c;
#else
    bool c = (*v >> (i & 63)) & 1;
    *v &= ~((uint64_t)1 << (i & 63));
    return c;
#endif
}

/* Relaxed atomics for single-writer counters and fields that other threads
 * only read: a plain load and store in the generated code, no RMW, but no
 * data race in the C11 model (so ThreadSanitizer stays quiet). */
#define ld_relaxed(p)    atomic_load_explicit((p), memory_order_relaxed)
#define st_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
/* st_relaxed of a 64-bit word for the fast paths. On x86-64 a relaxed
 * store is a plain mov, but GCC 12 computes an atomic store's indexed
 * address in a register instead of folding the displacement into the mov
 * (one instruction more per magazine push and pop: bench/pair.sh 76 -> 73);
 * so there it is that mov, in asm. ThreadSanitizer builds keep the atomic
 * store, which it sees. p must be 8-byte aligned. */
#if defined(__SANITIZE_THREAD__)
#define SL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) /* clang's spelling */
#define SL_TSAN 1
#endif
#endif
#if defined(__x86_64__) && !defined(SL_TSAN)
#define st_relaxed64(p, v) __asm__("movq %1, %0" : "=m"(*(p)) : "r"(v))
#else
#define st_relaxed64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#endif
/* The same store with release order: on x86 (TSO) every store is one, so
 * only the compiler is held back (a signal fence emits nothing). */
#if defined(__x86_64__) && !defined(SL_TSAN)
#define st_release64(p, v)                           \
    do {                                             \
        __atomic_signal_fence(__ATOMIC_SEQ_CST);     \
        st_relaxed64(p, v);                          \
    } while (0)
#else
#define st_release64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#endif

#endif
