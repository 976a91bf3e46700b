/* teardown.c — what a free of a huge buffer costs the thread that frees it,
 * and how long until the memory is back (the kernel's parallel-free
 * measurement: malloc, touch, free). Arguments: GiB, pages (4k: the
 * buffer is advised MADV_NOHUGEPAGE, every allocator alike; thp:
 * MADV_HUGEPAGE), repeats. The process makes a thread first, so that an
 * allocator that waits for the program's own threads (sluice's auto mode)
 * may use its own. "back" is the time until the memory has left the
 * process: for sluice, until sl_flush() returns (found with dlsym, so the
 * program runs under any allocator); for the others, until free returns.
 * rss_after is VmRSS right after that, against the buffer's size.
 * One line per repeat: free_ms=... back_ms=... rss_after_mib=... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void *nothing(void *a) { return a; }

int main(int argc, char **argv)
{
    size_t gib = argc > 1 ? strtoul(argv[1], NULL, 10) : 4;
    int thp = argc > 2 && !strcmp(argv[2], "thp");
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    pthread_t t;
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
    void (*flush)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "sl_flush");
    size_t n = gib << 30;
    for (int r = 0; r < reps; r++) {
        char *p = malloc(n);
        if (!p)
            return 1;
        madvise(p, n, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        for (size_t i = 0; i < n; i += 4096)
            p[i] = (char)i;
        double t0 = now();
        free(p);
        double t1 = now();
        if (flush)
            flush();
        double t2 = now();
        printf("free_ms=%.3f back_ms=%.3f rss_after_mib=%.0f\n", (t1 - t0) * 1e3, (t2 - t0) * 1e3,
               rss_kib() / 1024.0);
    }
    return 0;
}
