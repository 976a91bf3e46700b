/* cold_pages.c — what this machine charges for memory a program already
 * has, right after it has touched a big buffer: the floor under
 * bench/parallel_free's free() latency. No allocator is involved: the
 * buffer is mmap'ed directly, so the figures are the same under any
 * preload. Each round maps GiB of anonymous memory (4 KiB pages,
 * MADV_NOHUGEPAGE), touches every page, then times
 *   - one store to each of 64 pages of a static array that was resident
 *     before the touch (what a free() path that reads its metadata, its
 *     queue and its code pays for each distinct page),
 *   - a futex wake of a thread that waits (what waking a worker pays),
 *   - getppid (a bare system call),
 * and unmaps the buffer. Arguments: GiB (default 8), rounds (default 6).
 * One line per round: pages_us=... slow_pages=... (over 10 us)
 * wake_us=... syscall_us=... */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

enum { PAGES = 64 };
static char resident[PAGES * 4096];
static int word;

static void *waiter(void *arg)
{
    for (;;) {
        int w = __atomic_load_n(&word, __ATOMIC_ACQUIRE);
        syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, w, NULL, NULL, 0);
    }
    return arg;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 8) << 30;
    int rounds = argc > 2 ? atoi(argv[2]) : 6;
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    for (size_t i = 0; i < sizeof resident; i += 64)
        resident[i] = 1;
    for (int r = 0; r < rounds; r++) {
        char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        madvise(p, n, MADV_NOHUGEPAGE);
        for (size_t i = 0; i < n; i += 4096)
            p[i] = 1;
        usleep(1000); /* the waiter is asleep again */
        int slow = 0;
        double t0 = now();
        for (int k = 0; k < PAGES; k++) {
            double a = now();
            ((volatile char *)resident)[k * 4096]++;
            slow += now() - a > 10e-6;
        }
        double t1 = now();
        __atomic_add_fetch(&word, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        double t2 = now();
        syscall(SYS_getppid);
        double t3 = now();
        printf("pages_us=%.1f slow_pages=%d wake_us=%.1f syscall_us=%.1f\n", (t1 - t0) * 1e6, slow, (t2 - t1) * 1e6,
               (t3 - t2) * 1e6);
        fflush(stdout);
        munmap(p, n);
    }
    return 0;
}
