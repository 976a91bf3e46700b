/* t.h — a minimal test harness: CHECK records a failure and goes on;
 * t_done() prints "N passed, N failed" and gives main's exit code. */
#ifndef T_H
#define T_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

/* a monotonic clock in milliseconds */
static inline unsigned long long t_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
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
