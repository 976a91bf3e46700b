/* Multi-threaded stress: cross-thread frees through shared queues, threads
 * that exit while their objects live on (freed later by others), thread
 * churn, every object's contents checked. STRESS_SCALE (env) multiplies the
 * work; the default is the short CI mode. */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
#include <stdint.h>
#include <string.h>

#include "sluice.h"
#include "t.h"

#define QCAP 4096
struct queue {
    pthread_mutex_t lock;
    void *items[QCAP];
    size_t head, count;
};
static struct queue queues[8];
static int nthreads = 4;
static long iterations = 200000;
static _Atomic long corrupt;

static void q_push(struct queue *q, void *p)
{
    pthread_mutex_lock(&q->lock);
    if (q->count < QCAP) {
        q->items[(q->head + q->count++) % QCAP] = p;
        p = NULL;
    }
    pthread_mutex_unlock(&q->lock);
    if (p) /* full: free it ourselves, also a cross-thread free */
        sl_free(p);
}

static void *q_pop(struct queue *q)
{
    void *p = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->count) {
        p = q->items[q->head];
        q->head = (q->head + 1) % QCAP;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return p;
}

/* object layout: [size][~size][pattern bytes...] */
static void *obj_new(size_t n, unsigned long long *seed)
{
    if (n < 16)
        n = 16;
    unsigned char *p = sl_malloc(n);
    if (!p)
        return NULL;
    ((size_t *)p)[0] = n;
    ((size_t *)p)[1] = ~n;
    memset(p + 16, (int)(n & 0xff), n - 16);
    (void)seed;
    return p;
}

static void obj_free(void *v)
{
    unsigned char *p = v;
    size_t n = ((size_t *)p)[0];
    if (((size_t *)p)[1] != ~n || (n > 16 && (p[16] != (unsigned char)(n & 0xff) || p[n - 1] != (unsigned char)(n & 0xff))))
        corrupt++;
    sl_free(p);
}

static size_t pick_size(unsigned long long *seed)
{
    unsigned long long r = t_rand(seed);
    switch (r % 16) {
    case 0: return r % 200000;       /* medium */
    case 1: return 16 + (r >> 8) % 16384;
    default: return 16 + (r >> 8) % 256;
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned long long seed = 0x9e3779b97f4a7c15ull * (unsigned)(id + 1);
    void *local[64] = { 0 };
    for (long i = 0; i < iterations; i++) {
        unsigned long long r = t_rand(&seed);
        int slot = (int)(r % 64);
        if (local[slot]) {
            if (r & 0x100) /* hand it to another thread to free */
                q_push(&queues[(id + 1 + (int)((r >> 9) % (unsigned)(nthreads - 1))) % nthreads], local[slot]);
            else
                obj_free(local[slot]);
        }
        local[slot] = obj_new(pick_size(&seed), &seed);
        void *other = q_pop(&queues[id]);
        if (other)
            obj_free(other);
    }
    for (int s = 0; s < 64; s++)
        if (local[s])
            q_push(&queues[(id + 1) % nthreads], local[s]); /* outlive this thread */
    return NULL;
}

/* A short-lived thread allocates, hands everything to the parent, exits. */
static void *churner(void *arg)
{
    void **out = arg;
    unsigned long long seed = (uintptr_t)arg | 1;
    for (int i = 0; i < 256; i++)
        out[i] = obj_new(pick_size(&seed) % 4096, &seed);
    return NULL;
}

/* A huge realloc that moves (mremap onto a fresh range) frees its old
 * range the moment the kernel returns; a pageblock mapped there by another
 * thread at once must keep its pagemap entries. One thread moves huge
 * blocks, the other maps and unmaps pageblocks (1 MiB runs, freed with
 * purging at once so that spare blocks go back) and checks each run. */
static _Atomic int race_stop;

static void *huge_mover(void *arg)
{
    (void)arg;
    while (!race_stop) {
        char *p = sl_malloc((2u << 20) + 1);
        if (!p)
            continue;
        p[0] = 1;
        char *q = sl_realloc(p, 9u << 20); /* the next range is usually taken: a move */
        if (!q) {
            sl_free(p);
            continue;
        }
        if (q[0] != 1)
            corrupt++;
        sl_free(q);
    }
    return NULL;
}

static void *block_churner(void *arg)
{
    (void)arg;
    while (!race_stop) {
        void *v[12];
        for (int i = 0; i < 12; i++) {
            v[i] = sl_malloc(1u << 20); /* a whole 1 MiB chunk: a block each, half of them new */
            if (v[i])
                memset(v[i], 7, 64);
        }
        for (int i = 0; i < 12; i++)
            if (v[i]) {
                sl_usable_size(v[i]); /* aborts if its block lost its pagemap entry */
                sl_free(v[i]);
            }
        sl_purge(); /* spare blocks are unmapped, so the next round maps new ones */
    }
    return NULL;
}

/* More threads than cores, so that one is preempted inside the window. */
static void race_huge_move_vs_new_blocks(double seconds)
{
    pthread_t m[2], b[2];
    race_stop = 0;
    for (int i = 0; i < 2; i++) {
        pthread_create(&m[i], NULL, huge_mover, NULL);
        pthread_create(&b[i], NULL, block_churner, NULL);
    }
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    nanosleep(&ts, NULL);
    race_stop = 1;
    for (int i = 0; i < 2; i++) {
        pthread_join(m[i], NULL);
        pthread_join(b[i], NULL);
    }
    CHECK(sl_check() == 0);
    CHECK_EQ(corrupt, 0);
}

int main(void)
{
    race_huge_move_vs_new_blocks(getenv("RACE_SECONDS") ? atof(getenv("RACE_SECONDS")) : 2);
    const char *scale = getenv("STRESS_SCALE");
    if (scale)
        iterations *= atol(scale);
    for (int i = 0; i < 8; i++)
        pthread_mutex_init(&queues[i].lock, NULL);

    for (int round = 0; round < 3; round++) {
        pthread_t t[8];
        for (int i = 0; i < nthreads; i++)
            pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
        for (int i = 0; i < nthreads; i++)
            pthread_join(t[i], NULL);
        /* objects of exited threads, freed by main */
        for (int i = 0; i < nthreads; i++) {
            void *p;
            while ((p = q_pop(&queues[i])))
                obj_free(p);
        }
        CHECK(sl_check() == 0); /* between rounds: every invariant holds */
    }
    CHECK_EQ(corrupt, 0);

    /* thread churn: 300 threads come and go; their objects die later */
    static void *held[300][256];
    for (int k = 0; k < 300; k += 2) {
        pthread_t a, b;
        pthread_create(&a, NULL, churner, held[k]);
        pthread_create(&b, NULL, churner, held[k + 1]);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    }
    for (int k = 0; k < 300; k++)
        for (int i = 0; i < 256; i++)
            if (held[k][i])
                obj_free(held[k][i]);
    CHECK_EQ(corrupt, 0);
    /* exited threads' heaps were reused, not piled up */
    CHECK(sl_stat("heap_new") <= 2 + 8 + 4);
    CHECK(sl_stat("heap_reuse") >= 290);
    /* reclaim: after everything is freed and purged, no slab is left in use */
    sl_purge();
    CHECK(sl_check() == 0);
    CHECK(sl_stat("slab_release") > 0);
    CHECK(sl_stat("free_remote") > 0);
    return t_done("stress_threads");
}
