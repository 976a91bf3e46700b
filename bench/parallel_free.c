/* parallel_free.c — the kernel's parallel-free experiment in user space:
 * malloc a huge buffer, touch every page, free it; how long free() takes
 * the thread that calls it, and how long until the memory has left the
 * process (VmRSS below a tenth of the buffer, polled every 0.2 ms; at
 * most 5 s: an allocator that keeps the memory says "never").
 * Arguments: GiB, pages (4k: the buffer is advised MADV_NOHUGEPAGE, the
 * same under every allocator; thp: MADV_HUGEPAGE), frees (each of a new
 * buffer). The process makes a thread first, so that an allocator that
 * waits for the program's own threads (sluice's auto mode) may use its
 * own. One line per free: free_us=... back_ms=... (-1: never) rss_mib=...
 * ctl_us=...: the control, a loop of 4096 stores to distinct cache lines
 * (32 pages) timed just before the free: what touching that many lines
 * costs at that moment, right after the touch loop has flushed the caches
 * and TLBs (on this VM a median of about 50 us, against 2.5-9 us warm). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* VmRSS in KiB, read with one pread of a descriptor kept open (no stdio:
 * the poll must not allocate while the allocator under test works) */
static long rss_kib(int fd)
{
    char buf[4096];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *p = strstr(buf, "VmRSS:");
    return p ? atol(p + 6) : -1;
}

static void *nothing(void *a) { return a; }

static char control_lines[4096 * 64];

/* us for one store to each of 4096 cache lines */
static double control_us(void)
{
    double t = now();
    for (size_t i = 0; i < sizeof control_lines; i += 64)
        ((volatile char *)control_lines)[i] = (char)i;
    return (now() - t) * 1e6;
}

int main(int argc, char **argv)
{
    size_t gib = argc > 1 ? strtoul(argv[1], NULL, 10) : 4;
    int thp = argc > 2 && !strcmp(argv[2], "thp");
    int frees = argc > 3 ? atoi(argv[3]) : 3;
    pthread_t t;
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
    int fd = open("/proc/self/status", O_RDONLY);
    size_t n = gib << 30;
    long limit_kib = (long)(n / 10 / 1024);
    for (int r = 0; r < frees; r++) {
        char *p = malloc(n);
        if (!p)
            return 1;
        /* the pages inside the buffer: glibc's and jemalloc's pointers are
         * not page aligned, and madvise refuses an unaligned start */
        char *lo = (char *)(((uintptr_t)p + 4095) & ~(uintptr_t)4095);
        char *hi = (char *)(((uintptr_t)p + n) & ~(uintptr_t)4095);
        if (madvise(lo, (size_t)(hi - lo), thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
            return 2;
        for (size_t i = 0; i < n; i += 4096)
            p[i] = (char)i;
        double ctl = control_us();
        double t0 = now();
        free(p);
        double t1 = now(), t2;
        long kib;
        struct timespec pause = { 0, 200000 };
        while ((kib = rss_kib(fd)) >= limit_kib && (t2 = now()) - t0 < 5.0)
            nanosleep(&pause, NULL);
        t2 = now();
        printf("free_us=%.1f back_ms=%.1f rss_mib=%.0f ctl_us=%.1f\n", (t1 - t0) * 1e6,
               kib < limit_kib ? (t2 - t0) * 1e3 : -1.0, kib / 1024.0, ctl);
        fflush(stdout);
    }
    return 0;
}
