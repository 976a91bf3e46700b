/* Server-like churn: 4 threads handle "requests"; each request allocates a
 * handful of short-lived buffers (16 B - 8 KiB), updates a long-lived
 * per-thread cache (objects live for thousands of requests), and passes one
 * object in 8 to another thread, which frees it. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common.h"

#define THREADS 4
#define CACHE   4096
#define MAILBOX 256
struct mailbox {
    pthread_mutex_t lock;
    void *items[MAILBOX];
    int count;
};
static struct mailbox boxes[THREADS];
static long requests;

static void post(int to, void *p)
{
    struct mailbox *m = &boxes[to];
    pthread_mutex_lock(&m->lock);
    if (m->count < MAILBOX) {
        m->items[m->count++] = p;
        p = NULL;
    }
    pthread_mutex_unlock(&m->lock);
    free(p);
}

static void drain(int me)
{
    struct mailbox *m = &boxes[me];
    void *items[MAILBOX];
    pthread_mutex_lock(&m->lock);
    int n = m->count;
    memcpy(items, m->items, sizeof(void *) * (size_t)n);
    m->count = 0;
    pthread_mutex_unlock(&m->lock);
    for (int i = 0; i < n; i++)
        free(items[i]);
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    unsigned long long seed = 0x12345u + (unsigned)me;
    void *cache[CACHE] = { 0 };
    unsigned long long sum = 0;
    for (long r = 0; r < requests; r++) {
        void *tmp[8];
        int n = 2 + (int)(rng(&seed) % 7);
        for (int i = 0; i < n; i++) {
            size_t sz = (rng(&seed) % 16 == 0) ? 1024 + rng(&seed) % 7168 : 16 + rng(&seed) % 240;
            tmp[i] = malloc(sz);
            memset(tmp[i], (int)r, sz < 64 ? sz : 64);
        }
        int k = (int)(rng(&seed) % CACHE);
        free(cache[k]);
        cache[k] = malloc(32 + rng(&seed) % 480);
        sum += (uintptr_t)cache[k] & 0xff;
        for (int i = 0; i < n; i++) {
            if (i == 0 && (r & 7) == 0)
                post((me + 1) % THREADS, tmp[i]);
            else
                free(tmp[i]);
        }
        if ((r & 63) == 0)
            drain(me);
    }
    drain(me);
    for (int k = 0; k < CACHE; k++)
        free(cache[k]);
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    requests = (long)(400000 * bench_scale(argc, argv));
    for (int i = 0; i < THREADS; i++)
        pthread_mutex_init(&boxes[i].lock, NULL);
    pthread_t t[THREADS];
    double t0 = now();
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    unsigned long long sum = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (uintptr_t)r;
    }
    for (int i = 0; i < THREADS; i++)
        drain(i);
    report(now() - t0, sum);
    return 0;
}
