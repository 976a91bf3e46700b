/* mixed_lifetime.c — the heap a long-running program really has (issue 39,
 * item 5): long-lived small objects interleaved with transient buffers,
 * then an idle. What it measures: how much of the idle heap is on
 * transparent hugepages, and what it holds for what it uses.
 *
 * One thread allocates argv[1] MiB in all (default 2 GiB):
 *   - long-lived objects of 16-512 B (uniform), touched, never freed, 5%
 *     of the bytes: about 100 MiB at the end;
 *   - transient buffers, touched once per page: 70% of them 1-16 KiB, the
 *     rest 16 KiB-4 MiB (log-uniform); all kept till the end, or with
 *     argv[3] = N > 0 in a ring of N slots (each new one frees a random
 *     old one).
 * Then the transients are freed, malloc_trim(0) is called, and the
 * program idles argv[2] seconds (default 12) with a second thread of its
 * own started at the beginning (so that SLUICE_RECLAIMER=auto runs the
 * reclaimer), then reads /proc/self/smaps_rollup. MIXED_TIMELINE=1 prints
 * the hugepage share each second of the idle on stderr.
 *
 * Printed (one key=value line): held_over_live (Rss - LazyFree over the
 * live bytes asked for, the array of pointers to them included),
 * rss_thp_pct (AnonHugePages / Rss, the process), block_thp_pct (the same
 * for sluice's pageblocks: sl_stat's block_thp_bytes / block_rss_bytes,
 * -1 under a peer), the live and held MiB, thp50_s (seconds into the idle
 * until half of sluice's pageblock Rss was on hugepages; -1: never, or a
 * peer), the wall time of the allocating phase, and sluice's counters
 * (sl_stat, found with dlsym; -1 under a peer): thp_collapse, thp_advise,
 * thp_split, thp_failed, the pageblock MiB in use and free (active_mib,
 * free_page_mib), blocks, blocks_slab, blocks_buf, blocks_run, extfrag,
 * extfrag_serious, block_map (pageblocks mapped in all: with every buffer
 * kept, the most mapped at once), block_steal, boost_runs.
 *
 * Plain malloc/free otherwise, so that any allocator can be preloaded
 * (bench/mixed_lifetime.py runs it under sluice and the peers).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define RING_DEFAULT  0 /* all transients live till the end */
#define LONG_SHARE    20 /* one byte in LONG_SHARE is long-lived: 5% */
#define LONG_MIN      16
#define LONG_MAX      512

static uint64_t (*p_stat)(const char *);
static long long stat_or(const char *name) { return p_stat ? (long long)p_stat(name) : -1; }

/* A transient buffer's size: 70% 1-16 KiB (uniform), the rest 16 KiB-4 MiB
 * (log-uniform: many more small ones than big ones). */
static size_t transient_size(unsigned long long *s)
{
    unsigned long long r = rng(s);
    if (r % 10 < 7)
        return 1024 + (r >> 8) % (15u << 10);
    double u = (double)((r >> 11) & ((1ull << 40) - 1)) / (double)(1ull << 40);
    return (size_t)((16u << 10) * exp2(8.0 * u)); /* 16 KiB * 2^[0,8) */
}

static void touch(char *p, size_t n, unsigned char v)
{
    for (size_t off = 0; off < n; off += 4096)
        p[off] = (char)v;
    p[n - 1] = (char)v;
}

/* The program's own second thread: it waits until main is done. */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_done;

static void *idler(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&idle_lock);
    while (!idle_done)
        pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t total = (size_t)(argc > 1 ? atof(argv[1]) : 2048) << 20;
    double idle_s = argc > 2 ? atof(argv[2]) : 12;
    p_stat = dlsym(RTLD_DEFAULT, "sl_stat");
    pthread_t th;
    pthread_create(&th, NULL, idler, NULL);

    size_t long_cap = total / LONG_SHARE / ((LONG_MIN + LONG_MAX) / 2) * 2 + 1024;
    void **longs = calloc(long_cap, sizeof(void *)); /* its own bytes count as live below */
    size_t nlong = 0, live = 0, passed = 0, transient_bytes = 0;
    size_t ring_n = argc > 3 ? (size_t)atol(argv[3]) : RING_DEFAULT, nring = 0;
    size_t ring_cap = ring_n ? ring_n : total / 1024 + 1;
    void **ring = calloc(ring_cap, sizeof(void *));
    unsigned long long seed = 39, sum = 0;
    double t0 = now();
    while (passed < total) {
        /* one transient buffer in the ring */
        size_t n = transient_size(&seed);
        size_t k = ring_n ? rng(&seed) % ring_n : nring++;
        free(ring[k]);
        char *b = malloc(n);
        touch(b, n, (unsigned char)passed);
        ring[k] = b;
        passed += n;
        transient_bytes += n;
        /* long-lived objects, one byte in LONG_SHARE of all */
        while (live * (LONG_SHARE - 1) < transient_bytes && nlong < long_cap) {
            size_t sz = LONG_MIN + rng(&seed) % (LONG_MAX - LONG_MIN + 1);
            char *p = malloc(sz);
            memset(p, (int)(nlong & 0xff), sz);
            longs[nlong++] = p;
            live += sz;
            passed += sz;
        }
    }
    for (size_t k = 0; k < ring_cap; k++)
        free(ring[k]);
    free(ring);
    double t = now() - t0;
    malloc_trim(0);
    /* the idle, a second at a time: when did half of sluice's pageblock
     * Rss come to be on hugepages (sl_stat reads smaps: a few ms) */
    double thp50_s = -1, idle_t0 = now();
    for (double left = idle_s; left > 0; left -= 1) {
        usleep((useconds_t)((left < 1 ? left : 1) * 1e6));
        long long r = stat_or("block_rss_bytes"), h = stat_or("block_thp_bytes");
        if (thp50_s < 0 && r > 0 && 2 * h >= r)
            thp50_s = now() - idle_t0;
        if (getenv("MIXED_TIMELINE"))
            fprintf(stderr, "idle %.1f s: pageblock rss %.1f MiB, on hugepages %.1f MiB, collapsed %lld\n",
                    now() - idle_t0, (double)r / 1048576.0, (double)h / 1048576.0, stat_or("thp_collapse"));
    }

    for (size_t i = 0; i < nlong; i += 97)
        sum += (unsigned char)((char *)longs[i])[0];
    live += long_cap * sizeof(void *);
    uint64_t rss = proc_smaps("Rss"), lazy = proc_smaps("LazyFree"), anon_huge = proc_smaps("AnonHugePages");
    long long brss = stat_or("block_rss_bytes"), bthp = stat_or("block_thp_bytes");
    printf("held_over_live=%.3f rss_thp_pct=%.1f block_thp_pct=%.1f live_mib=%.1f held_mib=%.1f "
           "thp_mib=%.1f peak_mib=%.1f thp50_s=%.1f objects=%zu seconds=%.3f thp_collapse=%lld thp_advise=%lld thp_split=%lld "
           "thp_failed=%lld active_mib=%.1f free_page_mib=%.1f blocks=%lld blocks_slab=%lld blocks_buf=%lld blocks_run=%lld extfrag=%lld extfrag_serious=%lld block_map=%lld block_steal=%lld boost_runs=%lld checksum=%llu\n",
           (double)(rss - lazy) / (double)live, rss ? 100.0 * (double)anon_huge / (double)rss : 0.0,
           brss > 0 ? 100.0 * (double)bthp / (double)brss : -1.0, (double)live / 1048576.0,
           (double)(rss - lazy) / 1048576.0, (double)anon_huge / 1048576.0, peak_rss_kib() / 1024.0, thp50_s, nlong, t, stat_or("thp_collapse"),
           stat_or("thp_advise"), stat_or("thp_split"), stat_or("thp_failed"), (double)stat_or("active_bytes") / 1048576.0,
           (double)stat_or("free_page_bytes") / 1048576.0, stat_or("blocks"),
           stat_or("blocks_slab"), stat_or("blocks_buf"), stat_or("blocks_run"), stat_or("extfrag"), stat_or("extfrag_serious"), stat_or("block_map"),
           stat_or("block_steal"), stat_or("boost_runs"), sum);

    pthread_mutex_lock(&idle_lock);
    idle_done = 1;
    pthread_cond_signal(&idle_cond);
    pthread_mutex_unlock(&idle_lock);
    pthread_join(th, NULL);
    for (size_t i = 0; i < nlong; i++)
        free(longs[i]);
    free(longs);
    return 0;
}
