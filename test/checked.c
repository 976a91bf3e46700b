/* The checked mode (SLUICE_CHECK=1, src/api/checked.c), run with it set:
 * what it catches, each in a child that must die with its one line (or,
 * for an access to a guard page or a freed huge block, with SIGSEGV), and
 * that it still behaves as malloc (contents, zeroing, alignment, sizes,
 * threads, fork). Uses the malloc names (the override). */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

static void *(*volatile M)(size_t) = malloc;
static void (*volatile F)(void *) = free;

static void churn(size_t size, int n) /* push earlier frees out of the quarantine */
{
    for (int i = 0; i < n; i++)
        F(M(size));
}

static void run_case(const char *name)
{
    volatile char *p;
    if (!strcmp(name, "overflow_1_small")) {
        p = M(24);
        p[24] ^= 1; /* a flip: a write of the canary's own value is no change to catch */
        F((void *)p);
    } else if (!strcmp(name, "overflow_31_medium")) {
        p = M(5000);
        p[5031] ^= 1;
        F((void *)p);
    } else if (!strcmp(name, "overflow_at_realloc")) {
        p = M(100);
        p[100] ^= 1;
        p = realloc((void *)p, 200);
    } else if (!strcmp(name, "underflow_1")) {
        p = M(64);
        p[-1] ^= 1;
        F((void *)p);
    } else if (!strcmp(name, "underflow_32")) {
        p = M(64);
        p[-32] ^= 1;
        F((void *)p);
    } else if (!strcmp(name, "write_after_free")) {
        p = M(100);
        F((void *)p);
        p[10] ^= 1;
        churn(100, 1000);
    } else if (!strcmp(name, "double_free_quarantined")) {
        p = M(100);
        F((void *)p);
        F((void *)p);
    } else if (!strcmp(name, "double_free_released")) {
        p = M(100);
        F((void *)p);
        churn(3000, 1000); /* another size class: p's block is not reused */
        F((void *)p);
    } else if (!strcmp(name, "free_sized_small_off_by_one")) {
        p = M(100);
        sl_free_sized((void *)p, 99);
    } else if (!strcmp(name, "interior_free")) {
        p = M(100);
        F((void *)(p + 16));
    } else if (!strcmp(name, "large_use_after_free")) {
        p = M(100000);
        F((void *)p);
        p[0] = 1;
    } else if (!strcmp(name, "large_overflow_guard")) {
        p = M(100000);
        p[100000] = 1;
    } else if (!strcmp(name, "zero_size_read")) {
        p = M(0);
        (void)*(volatile char *)p;
    } else if (!strcmp(name, "large_double_free")) {
        p = M(200000);
        F((void *)p);
        F((void *)p);
    }
    _exit(0); /* the misuse went unnoticed */
}

struct expect {
    const char *name, *message; /* NULL: SIGSEGV */
};

static const struct expect cases[] = {
    { "overflow_1_small", "sluice: heap buffer overflow past 0x" },
    { "overflow_31_medium", "sluice: heap buffer overflow past 0x" },
    { "overflow_at_realloc", "sluice: heap buffer overflow past 0x" },
    { "underflow_1", "sluice: heap buffer underflow or corrupted header before 0x" },
    { "underflow_32", "sluice: heap buffer underflow or corrupted header before 0x" },
    { "write_after_free", "sluice: write after free to 0x" },
    { "double_free_quarantined", "sluice: double free of 0x" },
    { "double_free_released", "sluice: double free of 0x" },
    { "free_sized_small_off_by_one", "sluice: sized free with the wrong size: 0x" },
    { "interior_free", "sluice: free of a pointer not returned by malloc, or a corrupted header, at 0x" },
    { "large_use_after_free", NULL },
    { "large_overflow_guard", NULL },
    { "zero_size_read", NULL },
    { "large_double_free", "sluice: double free of 0x" },
};

static void death(const char *self, const struct expect *c)
{
    int fds[2];
    if (pipe(fds))
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        execl(self, self, c->name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[512] = { 0 };
    ssize_t n = 0, r;
    while ((r = read(fds[0], buf + n, sizeof buf - 1 - (size_t)n)) > 0)
        n += r;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    int want = c->message ? SIGABRT : SIGSEGV;
    bool ok = WIFSIGNALED(status) && WTERMSIG(status) == want && (!c->message || strstr(buf, c->message));
    if (!ok)
        fprintf(stderr, "checked: %s: status %d, stderr: %s\n", c->name, status, buf);
    CHECK(ok);
}

/* ---- still a malloc ------------------------------------------------------ */

static void *threads_work(void *arg)
{
    void **mine = arg;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 64; i++) {
            size_t n = (size_t)(round * 64 + i) % 3000;
            unsigned char *p = M(n);
            memset(p, 7, n);
            F(mine[i]);
            mine[i] = p;
        }
    }
    return NULL;
}

static void behaves(void)
{
    size_t sizes[] = { 0, 1, 15, 16, 100, 4000, 16384, 70000, 300000, 3u << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        unsigned char *p = M(n);
        CHECK(p != NULL && ((uintptr_t)p & 15) == 0);
        CHECK_EQ(malloc_usable_size(p), n);
        bool zero = true;
        for (size_t k = 0; k < n; k++)
            zero &= p[k] == 0;
        CHECK(zero); /* handed out zeroed */
        memset(p, 0xab, n);
        unsigned char *q = realloc(p, n * 2 + 1);
        bool kept = true;
        for (size_t k = 0; k < n; k++)
            kept &= q[k] == 0xab;
        CHECK(kept);
        sl_free_sized(q, n * 2 + 1);
        void *a = aligned_alloc(4096, n ? n : 1);
        CHECK(((uintptr_t)a & 4095) == 0);
        free(a);
        void *m = NULL;
        CHECK_EQ(posix_memalign(&m, 1u << 21, n + 1), 0);
        CHECK(((uintptr_t)m & ((1u << 21) - 1)) == 0);
        free(m);
        unsigned char *c = calloc(3, n + 1);
        bool cz = true;
        for (size_t k = 0; k < 3 * (n + 1); k++)
            cz &= c[k] == 0;
        CHECK(cz);
        free(c);
    }
    void *v[100];
    CHECK_EQ(sl_alloc_bulk(48, 100, v), 100); /* one by one, checked */
    sl_free_bulk(v, 100);
    static void *kept[2][64];
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, threads_work, kept[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 64; i++) /* the exited threads' blocks: remote frees */
        F(kept[0][i]), F(kept[1][i]);
    pid_t pid = fork();
    if (pid == 0) {
        char *p = M(1000);
        memset(p, 1, 1000);
        F(p);
        _exit(sl_check());
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(sl_check() == 0);
}

int main(int argc, char **argv)
{
    if (!getenv("SLUICE_CHECK")) {
        fprintf(stderr, "checked: run with SLUICE_CHECK=1\n");
        return 1;
    }
    if (argc > 1) {
        run_case(argv[1]);
        return 0;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        death("/proc/self/exe", &cases[i]);
    behaves();
    return t_done("checked");
}
