/* A drop's purge advises the freed runs between live ones in batches, one
 * process_madvise(2) call for many ranges, where the kernel takes it
 * (os_purge_many: Linux 6.14+ for the calling process); where it does not
 * (here a child with a seccomp filter that answers ENOSYS, as an older
 * kernel would, and EPERM, as a sandbox might), the same ranges are
 * advised one madvise call each, and none is lost. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#define KiB 1024u
enum { RUNS = 1200 };
static void *run[RUNS];

/* Can this kernel advise one of this process's ranges by process_madvise? */
static bool kernel_batches(void)
{
#ifdef SYS_process_madvise
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    struct iovec v = { p, 4096 };
    long r = syscall(SYS_process_madvise, -10001 /* PIDFD_SELF_PROCESS */, &v, 1, MADV_FREE, 0);
    munmap(p, 4096);
    return r == 4096;
#else
    return false;
#endif
}

/* 1200 runs of 40 KiB, each written; every other one freed: a drop (the
 * pages in use fall by half), its purge advising ~600 ranges, each a
 * freed run between live ones. Returns the ranges advised. */
static uint64_t drop_scattered(void)
{
    uint64_t before = sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls");
    for (int i = 0; i < RUNS; i++) {
        run[i] = sl_malloc(40 * KiB);
        CHECK(run[i] != NULL);
        memset(run[i], 1, 40 * KiB);
    }
    uint64_t drops = sl_stat("drop_purge");
    for (int i = 0; i < RUNS; i += 2)
        sl_free(run[i]);
    CHECK(sl_stat("drop_purge") > drops);
    CHECK_EQ(sl_stat("madv_failed"), 0);
    return sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls") - before;
}

static void free_rest(void)
{
    for (int i = 1; i < RUNS; i += 2)
        sl_free(run[i]);
}

/* In a child, whose drop is its first: every range is advised alone.
 * err: process_madvise answers err (a seccomp filter installed before
 * the child's first allocation), as an older kernel (ENOSYS) or a
 * sandbox (EPERM) would; 0: SLUICE_PURGE_BATCH=0 (opt.purge_batch, set
 * at run time) though the kernel would take a batch. */
static void one_by_one(int err)
{
    const char *why = err ? strerror(err) : "SLUICE_PURGE_BATCH=0";
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (!err) {
            long off = 0;
            CHECK_EQ(sl_ctl("opt.purge_batch", NULL, NULL, &off, sizeof off), 0);
        }
#ifdef SYS_process_madvise
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { sizeof f / sizeof f[0], f };
        if (err && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))) {
            printf("refused (%s): no seccomp here, not run\n", why);
            fflush(stdout);
            _exit(0);
        }
#endif
        uint64_t batches = sl_stat("madv_batches");
        uint64_t ranges = drop_scattered();
        printf("%s: %llu ranges advised one by one, %llu batches\n", why, (unsigned long long)ranges,
               (unsigned long long)(sl_stat("madv_batches") - batches));
        CHECK(ranges >= RUNS / 4);
        CHECK_EQ(sl_stat("madv_batches"), batches);
        free_rest();
        fflush(stdout);
        _exit(t_fail ? 1 : 0);
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    one_by_one(ENOSYS);
    one_by_one(EPERM);
    one_by_one(0);
    bool batches = kernel_batches();
    uint64_t ranges = drop_scattered();
    uint64_t calls = sl_stat("madv_batches"), batched = sl_stat("madv_batched");
    printf("batched: %llu ranges advised, %llu of them in %llu process_madvise calls%s\n",
           (unsigned long long)ranges, (unsigned long long)batched, (unsigned long long)calls,
           batches ? "" : " (this kernel advises no batch: not checked)");
    CHECK(ranges >= RUNS / 4);
    if (batches) {
        CHECK(calls > 0);
        CHECK(batched >= ranges / 2);
        CHECK(calls * 8 <= batched); /* several ranges a call */
    }
    free_rest();
    CHECK_EQ(sl_check(), 0);
    return t_done("purge_batch");
}
