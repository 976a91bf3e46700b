/* lazyfree.c — two questions about giving memory back.
 *
 * ebizzy mode (default): the workload the kernel's MADV_FREE authors
 * measured allocators with (ebizzy): each thread loops allocate a chunk,
 * fill it, copy records into it, search it, free it. Every chunk is fresh
 * memory from the allocator's point of view, so what the allocator does with
 * freed pages (keep them, MADV_FREE them, MADV_DONTNEED them) decides
 * whether the next chunk faults and is zeroed by the kernel.
 *   lazyfree [threads] [seconds] [chunk KiB]
 * prints  records_per_s=<n> rss_kib=<n> lazyfree_kib=<n> held_kib=<n>
 * (held = Rss - LazyFree, read from /proc/self/smaps_rollup right after the
 * run, with no purge call).
 *
 * idle mode: allocate 4 GiB in 256 KiB chunks, touch it, free it all (or all
 * but every keep-th chunk), then idle, printing Rss and LazyFree every
 * 100 ms:
 *   lazyfree idle [seconds] [GiB] [keep]
 * prints lines  t=<s> rss_kib=<n> lazyfree_kib=<n> live_kib=<n>
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static void smaps(long *rss, long *lazy)
{
    *rss = (long)(proc_smaps("Rss") >> 10);
    *lazy = (long)(proc_smaps("LazyFree") >> 10);
}

enum { RECORD = 64 };
static size_t chunk_bytes;
static double run_seconds;
static volatile int stop;
static char source[1 << 20]; /* the records copied in */

struct worker {
    pthread_t t;
    unsigned long long records, found;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    unsigned long long seed = (uintptr_t)w | 1;
    size_t nrec = chunk_bytes / RECORD;
    while (!stop) {
        char *c = malloc(chunk_bytes);
        memset(c, 0, chunk_bytes);                             /* fill */
        size_t off = (rng(&seed) % (sizeof source / RECORD - nrec)) * RECORD;
        memcpy(c, source + off, chunk_bytes);                  /* copy */
        unsigned long long key = rng(&seed) % 256, hits = 0;   /* search */
        for (size_t r = 0; r < nrec; r++)
            hits += (unsigned char)c[r * RECORD] == key;
        w->found += hits;
        free(c);
        w->records += nrec;
    }
    return NULL;
}

static int ebizzy(int threads)
{
    for (size_t i = 0; i < sizeof source; i++)
        source[i] = (char)(i * 2654435761u >> 13);
    struct worker w[64];
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        w[i].records = w[i].found = 0;
        pthread_create(&w[i].t, NULL, work, &w[i]);
    }
    usleep((useconds_t)(run_seconds * 1e6));
    stop = 1;
    unsigned long long records = 0, found = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(w[i].t, NULL);
        records += w[i].records;
        found += w[i].found;
    }
    double secs = now() - t0;
    long rss, lazy;
    smaps(&rss, &lazy);
    printf("records_per_s=%.0f rss_kib=%ld lazyfree_kib=%ld held_kib=%ld checksum=%llu\n", records / secs, rss,
           lazy, rss - lazy, found);
    return 0;
}

static int idle(double seconds, double gib, int keep)
{
    size_t chunk = 256 << 10, n = (size_t)(gib * (1 << 30)) / chunk;
    char **p = malloc(n * sizeof *p);
    double t0 = now();
    for (size_t i = 0; i < n; i++) {
        p[i] = malloc(chunk);
        memset(p[i], 1, chunk);
    }
    long rss, lazy;
    smaps(&rss, &lazy);
    printf("t=%.2f rss_kib=%ld lazyfree_kib=%ld phase=allocated\n", now() - t0, rss, lazy);
    long live = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep > 0 && i % (size_t)keep == 0)
            live += (long)(chunk >> 10);
        else
            free(p[i]);
    }
    double t1 = now();
    while (now() - t1 < seconds) {
        smaps(&rss, &lazy);
        printf("t=%.2f rss_kib=%ld lazyfree_kib=%ld live_kib=%ld\n", now() - t0, rss, lazy, live);
        fflush(stdout);
        usleep(100000);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "idle"))
        return idle(argc > 2 ? atof(argv[2]) : 15, argc > 3 ? atof(argv[3]) : 4, argc > 4 ? atoi(argv[4]) : 0);
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    run_seconds = argc > 2 ? atof(argv[2]) : 3;
    chunk_bytes = (size_t)(argc > 3 ? atoi(argv[3]) : 256) << 10;
    return ebizzy(threads < 1 ? 1 : threads > 64 ? 64 : threads);
}
