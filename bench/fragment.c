/* fragment.c — Mel Gorman's adverse fragmentation workload (2018) in user
 * space, for issue 11: bench/fragment.py runs it under sluice (boost on
 * and off, grouping off) and the peers.
 *
 * Phase 1, mixing: MIX_THREADS threads interleave three kinds of memory
 * until 150% of the budget has passed through:
 *   SLAB    long-lived small objects (16-256 B) in slots holding up to
 *           30% of the budget; once full, a new one replaces a random old
 *           one;
 *   RECLAIM objects of a cache with a shrinker: 256 B records on one LRU
 *           list capped at 60% of the budget (the program evicts the oldest
 *           past the cap). Under sluice they come from an sl_cache created
 *           SL_CACHE_RECLAIMABLE whose shrinker evicts from the LRU tail
 *           when asked; under the peers, from malloc, with no shrinker;
 *   RUN     transient buffers of 16-64 KiB, touched, a ring of 64 per
 *           thread, freed at the end of the phase.
 * Phase 2, demand: DEMAND_THREADS threads allocate 75% of the budget as
 * 2 MiB-aligned 2 MiB buffers, each touched once per page, timed.
 * Then an idle decay of IDLE_MS.
 *
 * Printed (one key=value line): extfrag and serious events (sluice:
 * sl_stat, found with dlsym; -1 under a peer), the share of the demand's
 * buffers backed by a transparent hugepage (/proc/self/pagemap and
 * /proc/kpageflags, which need root: -1 without), the per-buffer fault
 * time (median, p99), Rss - LazyFree over the live bytes and the share of
 * Rss in AnonHugePages after the idle decay (smaps_rollup), and the wall
 * time of both phases.
 *
 * argv[1]: the budget in MiB (default 256). Plain malloc/free otherwise,
 * so that any allocator can be preloaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MIX_THREADS    2
#define DEMAND_THREADS 2
#define RING           64
#ifndef PASS_X
#define PASS_X 3
#endif
#define RECLAIM_SIZE   256
#define IDLE_MS        3000
#define HUGE_SZ        (2u << 20)

static size_t budget;

/* ---- the sl_ API, when sluice is preloaded ------------------------------- */

typedef struct sl_cache sl_cache_t;
static sl_cache_t *(*p_cache_create)(const char *, size_t, size_t, unsigned, void (*)(void *));
static void *(*p_cache_alloc)(sl_cache_t *);
static void (*p_cache_free)(sl_cache_t *, void *);
static void (*p_set_reclaim)(sl_cache_t *, size_t (*)(sl_cache_t *, size_t));
static uint64_t (*p_stat)(const char *);
static sl_cache_t *lru_cache;

static uint64_t stat_or(const char *name)
{
    return p_stat ? p_stat(name) : (uint64_t)-1;
}

/* ---- RECLAIM: one LRU list under a mutex --------------------------------- */

struct rec {
    struct rec *prev, *next;
    unsigned char payload[RECLAIM_SIZE - 2 * sizeof(void *)];
};
static pthread_mutex_t lru_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec *lru_head, *lru_tail;
static size_t lru_count, lru_cap;
static _Atomic size_t evicted_by_shrinker;

static void rec_free(struct rec *r)
{
    if (lru_cache)
        p_cache_free(lru_cache, r);
    else
        free(r);
}

/* Unlink up to n from the tail; lock held. Returns the list of them. */
static struct rec *evict_locked(size_t n, size_t *got)
{
    struct rec *out = NULL;
    *got = 0;
    while (n-- && lru_tail) {
        struct rec *r = lru_tail;
        lru_tail = r->prev;
        if (lru_tail)
            lru_tail->next = NULL;
        else
            lru_head = NULL;
        lru_count--;
        r->next = out;
        out = r;
        ++*got;
    }
    return out;
}

static void free_list(struct rec *r)
{
    while (r) {
        struct rec *next = r->next;
        rec_free(r);
        r = next;
    }
}

static size_t shrinker(sl_cache_t *c, size_t want)
{
    (void)c;
    size_t got;
    pthread_mutex_lock(&lru_lock);
    struct rec *l = evict_locked(want, &got);
    pthread_mutex_unlock(&lru_lock);
    free_list(l);
    evicted_by_shrinker += got;
    return got;
}

static void lru_insert(unsigned long long *seed)
{
    struct rec *r = lru_cache ? p_cache_alloc(lru_cache) : malloc(sizeof *r);
    if (!r)
        abort();
    memset(r->payload, (int)(rng(seed) & 0xff), sizeof r->payload);
    size_t got;
    pthread_mutex_lock(&lru_lock);
    r->prev = NULL;
    r->next = lru_head;
    if (lru_head)
        lru_head->prev = r;
    lru_head = r;
    if (!lru_tail)
        lru_tail = r;
    lru_count++;
    struct rec *l = lru_count > lru_cap ? evict_locked(lru_count - lru_cap, &got) : NULL;
    pthread_mutex_unlock(&lru_lock);
    free_list(l);
}

/* ---- phase 1 ---------------------------------------------------------------- */

struct mixer {
    unsigned long long seed;
    void **slots;
    size_t *slot_size;
    size_t nslots, filled, slab_live;
};
static _Atomic size_t passed; /* bytes allocated so far, all threads */

static void *mix(void *arg)
{
    struct mixer *m = arg;
    void *ring[RING] = { 0 };
    unsigned ri = 0;
    while (passed < budget * PASS_X / 2) {
        size_t bytes = 0;
        /* RUN: one transient buffer, touched */
        size_t n = (16u << 10) + (rng(&m->seed) % (48u << 10));
        free(ring[ri]);
        char *b = malloc(n);
        for (size_t i = 0; i < n; i += 4096)
            b[i] = 1;
        ring[ri] = b;
        ri = (ri + 1) % RING;
        bytes += n;
        /* RECLAIM: 96 KiB of records */
        for (int i = 0; i < 384; i++)
            lru_insert(&m->seed);
        bytes += 384 * RECLAIM_SIZE;
        /* SLAB: 48 KiB of small objects, long-lived */
        for (size_t got = 0; got < (48u << 10);) {
            size_t sz = 16 + rng(&m->seed) % 241;
            size_t i = m->filled < m->nslots ? m->filled++ : rng(&m->seed) % m->nslots;
            if (m->slots[i]) {
                m->slab_live -= m->slot_size[i];
                free(m->slots[i]);
            }
            m->slots[i] = malloc(sz);
            memset(m->slots[i], 7, sz);
            m->slot_size[i] = sz;
            m->slab_live += sz;
            got += sz;
        }
        bytes += 48u << 10;
        passed += bytes;
    }
    for (int i = 0; i < RING; i++)
        free(ring[i]);
    return NULL;
}

/* ---- phase 2 ---------------------------------------------------------------- */

struct demander {
    size_t n;
    char **bufs;
    double *fault_us;
};

static void *demand(void *arg)
{
    struct demander *d = arg;
    for (size_t i = 0; i < d->n; i++) {
        void *p = NULL;
        if (posix_memalign(&p, HUGE_SZ, HUGE_SZ))
            abort();
        double t = now();
        for (size_t o = 0; o < HUGE_SZ; o += 4096)
            ((char *)p)[o] = 1;
        d->fault_us[i] = (now() - t) * 1e6;
        d->bufs[i] = p;
    }
    return NULL;
}

/* Is the page at p part of a transparent hugepage? 1, 0, or -1 when the
 * kernel will not say (pagemap's frame numbers need CAP_SYS_ADMIN). */
static int thp_backed(int pm, int kf, const void *p)
{
    uint64_t e, flags;
    if (pread(pm, &e, 8, (off_t)((uintptr_t)p / 4096 * 8)) != 8 || !(e >> 63))
        return -1;
    uint64_t pfn = e & ((1ull << 55) - 1);
    if (!pfn || pread(kf, &flags, 8, (off_t)(pfn * 8)) != 8)
        return -1;
    return (int)(flags >> 22 & 1); /* KPF_THP */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    budget = (size_t)(argc > 1 ? atof(argv[1]) : 256) << 20;
    p_cache_create = dlsym(RTLD_DEFAULT, "sl_cache_create");
    p_cache_alloc = dlsym(RTLD_DEFAULT, "sl_cache_alloc");
    p_cache_free = dlsym(RTLD_DEFAULT, "sl_cache_free");
    p_set_reclaim = dlsym(RTLD_DEFAULT, "sl_cache_set_reclaim");
    p_stat = dlsym(RTLD_DEFAULT, "sl_stat");
    if (p_cache_create && p_cache_alloc && p_cache_free && p_set_reclaim) {
        lru_cache = p_cache_create("fragment-lru", sizeof(struct rec), 0, 0x1u /* SL_CACHE_RECLAIMABLE */, NULL);
        p_set_reclaim(lru_cache, shrinker);
    }
    lru_cap = budget / 10 * 6 / RECLAIM_SIZE;

    double t0 = now();
    struct mixer mx[MIX_THREADS];
    pthread_t th[MIX_THREADS > DEMAND_THREADS ? MIX_THREADS : DEMAND_THREADS];
    for (int i = 0; i < MIX_THREADS; i++) {
        mx[i] = (struct mixer){ .seed = 0x9e3779b97f4a7c15ull * (unsigned)(i + 1) };
        mx[i].nslots = budget / 10 * 3 / MIX_THREADS / 136;
        mx[i].slots = calloc(mx[i].nslots, sizeof(void *));
        mx[i].slot_size = calloc(mx[i].nslots, sizeof(size_t));
        pthread_create(&th[i], NULL, mix, &mx[i]);
    }
    for (int i = 0; i < MIX_THREADS; i++)
        pthread_join(th[i], NULL);
    double t_mix = now() - t0;
    uint64_t ev_mix = stat_or("extfrag"), ser_mix = stat_or("extfrag_serious"), blocks_mix = stat_or("blocks");

    size_t nbuf = budget * 3 / 4 / HUGE_SZ, per = nbuf / DEMAND_THREADS;
    struct demander dm[DEMAND_THREADS];
    double *all_us = calloc(nbuf, sizeof(double));
    char **all_bufs = calloc(nbuf, sizeof(char *));
    for (int i = 0; i < DEMAND_THREADS; i++) {
        dm[i] = (struct demander){ per, all_bufs + i * per, all_us + i * per };
        pthread_create(&th[i], NULL, demand, &dm[i]);
    }
    for (int i = 0; i < DEMAND_THREADS; i++)
        pthread_join(th[i], NULL);
    double wall = now() - t0;
    nbuf = per * DEMAND_THREADS;

    int pm = open("/proc/self/pagemap", O_RDONLY), kf = open("/proc/kpageflags", O_RDONLY);
    long thp = 0, known = 0;
    for (size_t i = 0; i < nbuf; i++) {
        int b = thp_backed(pm, kf, all_bufs[i]);
        if (b >= 0) {
            known++;
            thp += b;
        }
    }
    qsort(all_us, nbuf, sizeof(double), cmp_double);

    usleep(IDLE_MS * 1000);
    size_t live = nbuf * (size_t)HUGE_SZ + lru_count * sizeof(struct rec);
    for (int i = 0; i < MIX_THREADS; i++)
        live += mx[i].slab_live;
    uint64_t rss = proc_smaps("Rss"), lazy = proc_smaps("LazyFree"), anon_huge = proc_smaps("AnonHugePages");
    printf("extfrag=%lld serious=%lld extfrag_mix=%lld serious_mix=%lld shrinker_evicted=%zu "
           "thp_demand_pct=%.1f fault_med_us=%.1f fault_p99_us=%.1f held_over_live=%.3f rss_thp_pct=%.1f "
           "block_thp_pct=%.1f live_mib=%.1f rss_mib=%.1f seconds=%.3f mix_seconds=%.3f blocks_mix=%lld blocks=%lld\n",
           (long long)stat_or("extfrag"), (long long)stat_or("extfrag_serious"), (long long)ev_mix,
           (long long)ser_mix, (size_t)evicted_by_shrinker, known ? 100.0 * (double)thp / (double)known : -1.0,
           all_us[nbuf / 2], all_us[nbuf * 99 / 100], (double)(rss - lazy) / (double)live,
           100.0 * (double)anon_huge / (double)rss,
           p_stat && p_stat("block_rss_bytes") ? 100.0 * (double)p_stat("block_thp_bytes") / (double)p_stat("block_rss_bytes")
                                               : -1.0,
           (double)live / 1048576.0, (double)rss / 1048576.0, wall, t_mix, (long long)blocks_mix,
           (long long)stat_or("blocks"));
    return 0;
}
