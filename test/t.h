/* t.h — a minimal test harness: CHECK records a failure and goes on;
 * t_done() prints "N passed, N failed" and gives main's exit code. */
#ifndef T_H
#define T_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc.h" /* the process as the kernel sees it */

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

/* CHECK with a message: printf's format and arguments after the condition */
#define CHECK_MSG(cond, ...)                                                \
    do {                                                                    \
        if (cond)                                                           \
            t_pass++;                                                       \
        else {                                                              \
            t_fail++;                                                       \
            fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);   \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
        }                                                                   \
    } while (0)

static inline int t_done(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, t_pass, t_fail);
    return t_fail ? 1 : 0;
}

/* a monotonic clock in milliseconds */
static inline unsigned long long t_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

/* ---- waiting on a condition with a deadline ------------------------------
 * A thread test waits for what it expects, never a fixed time: it polls
 * the condition about every millisecond until it holds or a generous
 * deadline passes (seconds: these tests run on loaded machines and under
 * ThreadSanitizer, 5-20x slower), and checks that it held. The normal case
 * goes on as soon as the condition holds. What a test must show does NOT
 * happen for a while is checked at once and again once what does happen
 * later has come (or with an injected option value); the policy's timing
 * itself is unit-tested with a fake clock (unit_decay, unit_antifrag). */
#include <stdbool.h>

/* Give up the CPU for about us microseconds: the polling interval. */
static inline void t_pause_us(unsigned us)
{
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* A fixed wait of ms milliseconds, for the few tests that still need one
 * (each says why); everything else waits with t_wait_until or T_WAIT. */
static inline void t_sleep_ms(unsigned ms) { t_pause_us(ms * 1000u); }

/* Poll cond(arg) every poll_us microseconds until it holds (true) or
 * timeout_ms have passed (false: it was asked a last time at the deadline). */
static inline bool t_wait_until_every(bool (*cond)(void *), void *arg, unsigned timeout_ms, unsigned poll_us)
{
    unsigned long long deadline = t_now_ms() + timeout_ms;
    bool held;
    while (!(held = cond(arg)) && t_now_ms() < deadline)
        t_pause_us(poll_us);
    return held;
}

/* Poll cond(arg) about every millisecond until it holds (true) or
 * timeout_ms have passed (false). */
static inline bool t_wait_until(bool (*cond)(void *), void *arg, unsigned timeout_ms)
{
    return t_wait_until_every(cond, arg, timeout_ms, 1000);
}

/* The same for an expression, evaluated afresh at each poll (it may have
 * side effects: a slow path driven while waiting); its value is whether
 * it held: CHECK(T_WAIT(sl_stat("x") > 0, 20000)). A GNU statement
 * expression (gcc and clang: the compilers of this project). */
#define T_WAIT_EVERY(expr, timeout_ms, poll_us)                                   \
    __extension__({                                                               \
        unsigned long long t_wait_deadline_ = t_now_ms() + (unsigned)(timeout_ms); \
        bool t_wait_held_;                                                        \
        while (!(t_wait_held_ = (expr)) && t_now_ms() < t_wait_deadline_)         \
            t_pause_us(poll_us);                                                  \
        t_wait_held_;                                                             \
    })
#define T_WAIT(expr, timeout_ms) T_WAIT_EVERY(expr, timeout_ms, 1000)

/* Resident pages of [p, p + n) by mincore (p page-aligned; a partial last
 * page counts whole); a failed mincore fails the test. */
#include <sys/mman.h>
static inline size_t t_resident_pages(void *p, size_t n)
{
    unsigned char v[1024];
    size_t in = 0;
    for (size_t off = 0; off < n; off += sizeof v * 4096) {
        size_t len = n - off < sizeof v * 4096 ? n - off : sizeof v * 4096;
        CHECK_EQ(mincore((char *)p + off, len, v), 0);
        for (size_t i = 0; i < (len + 4095) / 4096; i++)
            in += v[i] & 1;
    }
    return in;
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

/* Run this program again (/proc/self/exe) with argument `name`, with the
 * environment settings of `env` ("K=V K2=V2", may be empty) added; its
 * stderr goes to out (NUL-terminated, at most cap - 1 bytes, *len set).
 * Returns the wait status. For tests whose cases must each start a fresh
 * process (options read at start, an abort expected). */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static inline int t_run_self(const char *argv0, const char *name, const char *env, char *out, size_t cap,
                             size_t *len)
{
    int fds[2];
    *len = 0;
    out[0] = 0;
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", env);
        for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
            char *eq = strchr(tok, '=');
            if (eq) {
                *eq = 0;
                setenv(tok, eq + 1, 1);
            }
        }
        dup2(fds[1], 2);
        close(fds[0]);
        execl("/proc/self/exe", argv0, name, (char *)NULL);
        _exit(3);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n < cap - 1 && (r = read(fds[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    *len = n;
    close(fds[0]);
    int status = -1;
    waitpid(pid, &status, 0);
    return status;
}

#endif
