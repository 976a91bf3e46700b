/* class_peaks.c — the least a segregated-fit heap needs for a program:
 * preloaded over glibc's malloc, it follows every malloc, calloc, realloc
 * and free, counts the bytes live in each of sluice's size classes
 * (size_class.h: 16-byte steps to 128, then 8 classes per doubling up to
 * 32 KiB; above that, page runs by their length in pages), and prints at
 * exit
 *   - the peak of the sum: the most bytes live at once (class-rounded),
 *     about what a heap that reuses any freed block for any size needs;
 *   - the sum of the peaks: each class's most bytes live at once, summed,
 *     what a heap that never moves memory between classes needs (and
 *     that rounded up to pages per class);
 *   - per class, its peak and what it had live at the peak of the sum.
 * docs/benchmarks/small-rss.md uses it: espresso has 443 KiB live at most
 * but 1,325 KiB as the sum of its classes' peaks.
 *
 *   CLASS_PEAKS_OUT=out.txt LD_PRELOAD=build/bench/class_peaks.so PROGRAM ARGS
 *
 * (built with the benchmarks; alone: gcc -O2 -shared -fPIC -o
 * class_peaks.so bench/class_peaks.c -ldl -lpthread)
 *
 * (CLASS_PEAKS_OUT unset: stderr.) One lock around the counts, so a
 * threaded program is followed too; posix_memalign, aligned_alloc and
 * memalign are not (their frees are ignored, as is any pointer not seen).
 * A measuring tool, not part of the library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SMALL_MAX 32768
#define NSMALL    72                /* sluice's classes up to 32 KiB */
#define NRUN      257               /* page runs of 1..256 pages, the rest in the last */
#define NCLS      (NSMALL + NRUN)
#define TABLE     (1u << 22)        /* open addressing, linear probing: live pointers */

static size_t live[NCLS], peak[NCLS], at_peak[NCLS], total, total_peak;
static uintptr_t *keys;
static uint32_t *sizes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *(*real_malloc)(size_t), *(*real_calloc)(size_t, size_t), *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

static unsigned log2_floor(size_t n) { return 63u - (unsigned)__builtin_clzll(n); }

/* n's class and the bytes it takes there */
static unsigned class_of(size_t n, size_t *bytes)
{
    if (!n)
        n = 1;
    if (n <= 128) {
        *bytes = (n + 15) & ~(size_t)15;
        return (unsigned)((n - 1) >> 4);
    }
    if (n <= SMALL_MAX) {
        unsigned b = log2_floor(n - 1);
        size_t step = (size_t)1 << (b - 3);
        *bytes = ((n - 1) / step + 1) * step;
        return ((b - 7) << 3) + (unsigned)((n - 1) >> (b - 3));
    }
    size_t pages = (n + 4095) / 4096;
    *bytes = pages * 4096;
    return NSMALL + (unsigned)(pages < NRUN ? pages - 1 : NRUN - 1);
}

static size_t home(uintptr_t p) { return (size_t)((p * 0x9E3779B97F4A7C15ull) >> 42) & (TABLE - 1); }

static size_t find(uintptr_t p)
{
    size_t h = home(p);
    while (keys[h] && keys[h] != p)
        h = (h + 1) & (TABLE - 1);
    return h;
}

static void seen_alloc(void *p, size_t n)
{
    if (!p || !keys)
        return;
    size_t bytes;
    unsigned c = class_of(n, &bytes);
    pthread_mutex_lock(&lock);
    size_t h = find((uintptr_t)p);
    keys[h] = (uintptr_t)p;
    sizes[h] = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
    if ((live[c] += bytes) > peak[c])
        peak[c] = live[c];
    if ((total += bytes) > total_peak) {
        total_peak = total;
        memcpy(at_peak, live, sizeof live);
    }
    pthread_mutex_unlock(&lock);
}

static void seen_free(void *p)
{
    if (!p || !keys)
        return;
    pthread_mutex_lock(&lock);
    size_t i = find((uintptr_t)p), j = i, bytes;
    if (keys[i]) {
        unsigned c = class_of(sizes[i], &bytes);
        live[c] -= bytes;
        total -= bytes;
        keys[i] = 0; /* and the entries after it moved back over the hole */
        for (;;) {
            j = (j + 1) & (TABLE - 1);
            if (!keys[j])
                break;
            size_t k = home(keys[j]);
            if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
                keys[i] = keys[j];
                sizes[i] = sizes[j];
                keys[j] = 0;
                i = j;
            }
        }
    }
    pthread_mutex_unlock(&lock);
}

/* dlsym may calloc before real_calloc is known: a few bytes from here */
static char early[4096];
static size_t early_used;

static void init(void)
{
    if (real_malloc)
        return;
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    void *k = mmap(NULL, TABLE * sizeof *keys, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *s = mmap(NULL, TABLE * sizeof *sizes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (k != MAP_FAILED && s != MAP_FAILED)
        keys = k, sizes = s;
}

void *malloc(size_t n)
{
    init();
    void *p = real_malloc(n);
    seen_alloc(p, n);
    return p;
}

void *calloc(size_t a, size_t b)
{
    if (!real_calloc) { /* inside init's dlsym */
        size_t n = (a * b + 15) & ~(size_t)15;
        if (early_used + n > sizeof early)
            return NULL;
        early_used += n;
        return early + early_used - n; /* static: zeroed */
    }
    void *p = real_calloc(a, b);
    seen_alloc(p, a * b);
    return p;
}

void free(void *p)
{
    if ((char *)p >= early && (char *)p < early + sizeof early)
        return;
    init();
    seen_free(p);
    real_free(p);
}

void *realloc(void *p, size_t n)
{
    init();
    void *q = real_realloc(p, n);
    if (q || !n) { /* moved or resized: the old block is gone */
        seen_free(p);
        seen_alloc(q, n);
    }
    return q;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("CLASS_PEAKS_OUT");
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : 2;
    if (fd < 0)
        return;
    size_t sum = 0, sum_pages = 0;
    dprintf(fd, "class bytes_or_pages peak_KiB at_peak_of_sum_KiB\n");
    for (unsigned c = 0; c < NCLS; c++) {
        if (!peak[c])
            continue;
        sum += peak[c];
        sum_pages += (peak[c] + 4095) / 4096 * 4096;
        size_t bytes;
        if (c < NSMALL) {
            size_t lo = c < 8 ? 16 * (c + 1) : 0;
            for (size_t n = 129; !lo && n <= SMALL_MAX; n += 16) /* the class's size */
                if (class_of(n, &bytes) == c)
                    lo = bytes;
            dprintf(fd, "small %zu %.1f %.1f\n", lo, peak[c] / 1024.0, at_peak[c] / 1024.0);
        } else
            dprintf(fd, "run %u %.1f %.1f\n", c - NSMALL + 1, peak[c] / 1024.0, at_peak[c] / 1024.0);
    }
    dprintf(fd, "peak of the sum %zu KiB; sum of the peaks %zu KiB (each rounded up to pages: %zu KiB)\n",
            total_peak >> 10, sum >> 10, sum_pages >> 10);
    if (path)
        close(fd);
}
