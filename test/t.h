/* t.h — a minimal test harness: CHECK records a failure and goes on;
 * t_done() prints "N passed, N failed" and gives main's exit code. */
#ifndef T_H
#define T_H

#include <stdio.h>
#include <stdlib.h>

static int t_pass, t_fail;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond)                                                                     \
            t_pass++;                                                                 \
        else {                                                                        \
            t_fail++;                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                             \
    } while (0)

#define CHECK_EQ(a, b)                                                                              \
    do {                                                                                            \
        long long t_a = (long long)(a), t_b = (long long)(b);                                      \
        if (t_a == t_b)                                                                             \
            t_pass++;                                                                               \
        else {                                                                                      \
            t_fail++;                                                                               \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, __LINE__, #a, #b, t_a, \
                    t_b);                                                                           \
        }                                                                                           \
    } while (0)

static inline int t_done(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, t_pass, t_fail);
    return t_fail ? 1 : 0;
}

/* xorshift: deterministic pseudo-random numbers for tests */
static inline unsigned long long t_rand(unsigned long long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Fisher-Yates shuffle of a pointer array */
static inline void t_shuffle(void **a, size_t n, unsigned long long *seed)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(t_rand(seed) % i);
        void *t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

#endif
