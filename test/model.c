/* model.c — a model-based tester of sluice under threads.
 *
 * 2 to 8 worker threads (the number from the seed) run random sequences of
 * the sl_ API: malloc, calloc, realloc, reallocarray, aligned_alloc,
 * posix_memalign, memalign, valloc, pvalloc, free, free_sized,
 * free_aligned_sized, realloc(p, 0), alloc_bulk, free_bulk, object caches
 * (four shared ones, and a private one that a thread creates, shrinks and
 * destroys, with or without live objects), cache_shrink, purge and flush.
 * Sizes are mostly small (1 to 1024), some medium (4 KiB to 512 KiB), a
 * few large (1 to 8 MiB) and some 0. Blocks travel between threads through
 * a shared pool (freed or reallocated by another thread); threads exit with
 * live blocks, which they hand to the pool, and new ones are spawned; a
 * thread forks now and then, and its child checks its blocks, frees,
 * allocates and checks in turn, and must exit 0.
 *
 * The model: every live block's address, size asked, usable size and id.
 * Its bytes hold a pattern of the id, checked before every free and
 * realloc (the kept prefix after it), and at pauses, where the main thread
 * checks every live block of every thread and of the pool and runs
 * sl_check(). An interval set of [p, p + usable size) of every live block
 * says no two overlap (checked as each block comes). Also: usable size >=
 * size asked and unchanged while live, 16-byte and asked alignment, errno
 * left alone by a success, calloc's zeroes, all-or-none bulk allocations,
 * and a constructed cache's objects handed out in their constructed state.
 *
 * Misuse is injected in forked children (of a worker, on one of its live
 * blocks, in the heap as the run has made it), which must abort with the
 * line that names it, its address included, before the misusing calls
 * return (another thread's part joined, so its remote batch flushed): a
 * double free whose first free was by the same thread, by another thread
 * (the second by the owner, or by a third thread), by the owner before
 * another thread's, before an sl_purge, or of a block whose thread has
 * exited, each with free, free_sized, free_bulk, sl_cache_free(_bulk) or
 * realloc(p, 0), the other threads exiting at once or staying while the
 * owner allocates on; frees of stack, static and mmap memory; of an
 * interior pointer; sl_cache_free to the wrong cache, and of a malloc
 * block. Only where the owner's free is a bulk free (it writes nothing into
 * the object) may the report wait for the owner's collect. The threads of
 * a death child that free are started before the first free of a double
 * free (pthread_create allocates: see struct helper). Each kind is
 * injected twice in a run (MODEL_MISUSE=N: N times), and a thread injects
 * the missing ones at the end; every injection must be reported.
 *
 * Built against the fault-injection library (sluice_fault, SL_FAULT_INJECT
 * =1, SL_OVERRIDE=0) with SLUICE_FAULT set (src/os/fault.h), an allocation
 * may fail: NULL with errno ENOMEM (posix_memalign's ENOMEM, nothing from
 * a bulk allocation, a failed realloc's block intact) is accepted, and
 * everything else is checked as without it, misuse reports included.
 *
 * MODEL_SEED=N (or argv[1]) replays a seed (the operations of each thread,
 * not their interleaving); STRESS_SECONDS (default 3) sets the duration.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#ifndef SL_FAULT_INJECT
#define SL_FAULT_INJECT 0
#endif
#if SL_FAULT_INJECT
#include "../src/os/fault.h"
#endif

#if defined(__SANITIZE_THREAD__)
#define MODEL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MODEL_TSAN 1
#endif
#endif
#ifndef MODEL_TSAN
#define MODEL_TSAN 0
#endif

enum {
    MAX_WORKERS = 8,
    LIVE_CAP = 256,               /* a thread's live blocks, beyond which it frees */
    LIVE_MAX = LIVE_CAP + 160,    /* room for a bulk allocation past the cap */
    POOL_CAP = 1024,              /* blocks passed between threads */
    ISET_CAP = 1 << 16,           /* live blocks of the process */
    CSET_CAP = 1 << 13,           /* live blocks of a fork child */
    MAX_SERIAL = 1 << 16,         /* threads whose exit is remembered */
    NSHARED = 4,                  /* caches shared by every thread */
    NPRIV_CTOR = 5,               /* sizes of private caches with a constructor */
    MAX_SAY = 40,                 /* failure lines printed */
    CHILD_MS = 60000,             /* a child that runs longer has hung */
    STUCK_MS = 120000,            /* a pause or a stop that takes longer has hung */
};
#define LARGE_MIN    ((size_t)1 << 20)
#define LARGE_BUDGET ((size_t)160 << 20) /* bytes of large blocks live at most */
#define ERRNO_MARK   0x5e5e

/* ---- failures ---------------------------------------------------------- */

enum cat { F_CONTENT, F_OVERLAP, F_USABLE, F_ALIGN, F_NULL, F_ERRNO, F_CALLOC, F_CTOR, F_BULK, F_FORK, F_MODEL,
           F_STUCK, NCAT };
static const char *const cat_name[NCAT] = { "contents",  "overlap",    "usable size", "alignment",
                                            "NULL",      "errno",      "calloc zero", "constructed state",
                                            "bulk",      "fork child", "model",       "stuck" };
static _Atomic long fails[NCAT];
static _Atomic int said;
static unsigned long long seed;
static int faulting;     /* a fault-injection build with SLUICE_FAULT set: allocations may fail */
static _Atomic long refused; /* allocations that failed, NULL and ENOMEM, under fault injection */
static int in_child;     /* a fork child: no lock of the parent's, its own set */
static long child_fails; /* a fork child's failures: its exit status */

/* One line on stderr with one write: no stdio lock, so also in a child
 * forked while another thread held it. */
static void say(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 1)
        n = (int)sizeof buf - 1;
    if (n > 0) {
        ssize_t r = write(2, buf, (size_t)n);
        (void)r;
    }
}

/* ---- blocks ------------------------------------------------------------ */

enum src { S_HEAP, S_SHARED, S_PRIV }; /* malloc family; a shared cache; the holder's private cache */
struct blk {
    char *p;
    size_t size;   /* asked for: the pattern's length */
    size_t usable; /* sl_usable_size when it came */
    uint64_t id;
    sl_cache_t *c;  /* S_SHARED, S_PRIV */
    uint32_t align; /* asked for, 0: none (a sized free is sl_free_aligned_sized with it) */
    uint32_t tid;   /* serial of the thread that allocated it */
    uint8_t src;
    uint8_t cache; /* S_SHARED: index in shared[] */
    uint8_t ctor;  /* the byte a constructor fills the object with, 0: no constructor */
};

struct priv {
    sl_cache_t *c;
    size_t size, align;
    uint8_t ctor;
    unsigned gen;
    char name[48];
};

struct worker {
    pthread_t th;
    uint32_t serial;
    int finisher; /* injects the kinds of misuse no worker got to, then exits */
    int done, joined;
    unsigned long long rng;
    long ops, nops;
    uint64_t next_id;
    struct priv priv;
    size_t nlive;
    struct blk live[LIVE_MAX];
    long n_alloc, n_free, n_realloc, n_bulk, n_cache, n_cross, n_purge, n_flush, n_fork, n_priv;
};

static unsigned long long splitmix(unsigned long long x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ x >> 30) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ x >> 27) * 0x94D049BB133111EBull;
    return x ^ x >> 31;
}
static uint64_t rnd(struct worker *w) { return t_rand(&w->rng); }
static size_t below(struct worker *w, size_t n) { return n ? (size_t)(rnd(w) % n) : 0; }

static void fail(struct worker *w, enum cat c, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    int n;
    if (in_child)
        n = (int)child_fails++;
    else {
        atomic_fetch_add(&fails[c], 1);
        n = atomic_fetch_add(&said, 1);
    }
    if (n < MAX_SAY)
        say("model: FAIL (%s) seed %llu%s thread %u op %ld: %s\n", cat_name[c], seed,
            in_child ? " (fork child)" : "", w ? w->serial : 0, w ? w->ops : 0, buf);
}

/* The pattern: word k of block id, position-dependent so that a copy to
 * the wrong offset shows. */
static inline uint64_t pat(uint64_t id, size_t k)
{
    uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(k + 1) * 0xC2B2AE3D27D4EB4Full;
    return x ^ x >> 31;
}
static inline unsigned char pat_byte(uint64_t id, size_t i)
{
    uint64_t v = pat(id, i >> 3);
    unsigned char b[8];
    memcpy(b, &v, 8);
    return b[i & 7];
}
/* Under ThreadSanitizer the word loops over the middle of a big block run
 * uninstrumented (a shadow check for every word would make big blocks the
 * whole run); the first and last 4 KiB stay instrumented, so that a block
 * that comes to another thread without the happens-before that its free
 * and its allocation owe is still reported. */
#if MODEL_TSAN
#define QUIET __attribute__((no_sanitize("thread"), noinline))
#else
#define QUIET
#endif
#define WORD_LOOPS(suffix, attr)                                                               \
    static attr void fill_words##suffix(char *p, uint64_t id, size_t i, size_t to)            \
    {                                                                                          \
        for (; i < to; i += 8) {                                                               \
            uint64_t v = pat(id, i >> 3);                                                      \
            memcpy(p + i, &v, 8);                                                              \
        }                                                                                      \
    }                                                                                          \
    static attr size_t verify_words##suffix(const char *p, uint64_t id, size_t i, size_t to)   \
    {                                                                                          \
        for (; i < to; i += 8) {                                                               \
            uint64_t v;                                                                        \
            memcpy(&v, p + i, 8);                                                              \
            if (v != pat(id, i >> 3))                                                          \
                return i;                                                                      \
        }                                                                                      \
        return SIZE_MAX;                                                                       \
    }                                                                                          \
    static attr size_t verify_const##suffix(const char *p, uint64_t w8, size_t i, size_t to)   \
    {                                                                                          \
        for (; i < to; i += 8) {                                                               \
            uint64_t v;                                                                        \
            memcpy(&v, p + i, 8);                                                              \
            if (v != w8)                                                                       \
                return i;                                                                      \
        }                                                                                      \
        return SIZE_MAX;                                                                       \
    }
WORD_LOOPS(, )
#if MODEL_TSAN
WORD_LOOPS(_quiet, QUIET)
enum { EDGE = 4096 };
#else
#define fill_words_quiet    fill_words
#define verify_words_quiet  verify_words
#define verify_const_quiet  verify_const
enum { EDGE = 1 << 30 };
#endif

static void fill(char *p, uint64_t id, size_t from, size_t to)
{
    size_t i = from;
    for (; i < to && (i & 7); i++)
        p[i] = (char)pat_byte(id, i);
    size_t end = i + ((to - i) & ~(size_t)7);
    if (end - i > 3 * (size_t)EDGE) {
        fill_words(p, id, i, i + EDGE);
        fill_words_quiet(p, id, i + EDGE, end - EDGE);
        fill_words(p, id, end - EDGE, end);
    } else
        fill_words(p, id, i, end);
    for (i = end; i < to; i++)
        p[i] = (char)pat_byte(id, i);
}
/* The first byte of [from, to) that is not the pattern, or SIZE_MAX. */
static size_t verify(const char *p, uint64_t id, size_t from, size_t to)
{
    size_t i = from;
    for (; i < to && (i & 7); i++)
        if ((unsigned char)p[i] != pat_byte(id, i))
            return i;
    size_t end = i + ((to - i) & ~(size_t)7), bad;
    if (end - i > 3 * (size_t)EDGE) {
        if ((bad = verify_words(p, id, i, i + EDGE)) != SIZE_MAX ||
            (bad = verify_words_quiet(p, id, i + EDGE, end - EDGE)) != SIZE_MAX ||
            (bad = verify_words(p, id, end - EDGE, end)) != SIZE_MAX)
            i = bad & ~(size_t)7;
        else
            i = end;
    } else if ((bad = verify_words(p, id, i, end)) != SIZE_MAX)
        i = bad;
    else
        i = end;
    for (; i < to; i++)
        if ((unsigned char)p[i] != pat_byte(id, i))
            return i;
    return SIZE_MAX;
}
/* The first byte of [0, n) that is not c, or SIZE_MAX. */
static size_t verify_byte(const char *p, unsigned char c, size_t n)
{
    uint64_t w8 = 0x0101010101010101ull * c;
    size_t end = n & ~(size_t)7, i, bad;
    if (end > 3 * (size_t)EDGE) {
        if ((bad = verify_const(p, w8, 0, EDGE)) != SIZE_MAX ||
            (bad = verify_const_quiet(p, w8, EDGE, end - EDGE)) != SIZE_MAX ||
            (bad = verify_const(p, w8, end - EDGE, end)) != SIZE_MAX)
            i = bad;
        else
            i = end;
    } else if ((bad = verify_const(p, w8, 0, end)) != SIZE_MAX)
        i = bad;
    else
        i = end;
    for (; i < n; i++)
        if ((unsigned char)p[i] != c)
            return i;
    return SIZE_MAX;
}

static void *map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        say("model: mmap of %zu bytes failed\n", n);
        exit(2);
    }
    return p;
}

/* ---- the interval set: no two live blocks overlap ----------------------- */

struct ival {
    uintptr_t lo, hi;
    uint64_t id;
};
struct iset {
    struct ival *v;
    size_t n, cap;
    pthread_mutex_t lock;
};
static struct iset gset = { .lock = PTHREAD_MUTEX_INITIALIZER }; /* the process's */
static struct iset cset;                                           /* a fork child's */

static struct iset *set_lock(void)
{
    if (in_child)
        return &cset;
    pthread_mutex_lock(&gset.lock);
    return &gset;
}
static void set_unlock(struct iset *s)
{
    if (s == &gset)
        pthread_mutex_unlock(&gset.lock);
}
static size_t set_lb(struct iset *s, uintptr_t lo)
{
    size_t a = 0, b = s->n;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (s->v[m].lo < lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}
static uintptr_t blk_end(const struct blk *b) { return (uintptr_t)b->p + (b->usable ? b->usable : 1); }

static void set_add(struct worker *w, const struct blk *b)
{
    uintptr_t lo = (uintptr_t)b->p, hi = blk_end(b);
    struct iset *s = set_lock();
    size_t i = set_lb(s, lo);
    struct ival bad = { 0, 0, 0 };
    if (i > 0 && s->v[i - 1].hi > lo)
        bad = s->v[i - 1];
    else if (i < s->n && s->v[i].lo < hi)
        bad = s->v[i];
    int full = s->n == s->cap;
    if (!full) {
        memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
        s->v[i] = (struct ival){ lo, hi, b->id };
        s->n++;
    }
    set_unlock(s);
    if (bad.hi)
        fail(w, F_OVERLAP, "new block %p..%p (size %zu, id %llx) overlaps live block %p..%p (id %llx, thread %u)",
             (void *)lo, (void *)hi, b->size, (unsigned long long)b->id, (void *)bad.lo, (void *)bad.hi,
             (unsigned long long)bad.id, (unsigned)(bad.id >> 40));
    if (full)
        fail(w, F_MODEL, "interval set full");
}
static void set_del(struct worker *w, const struct blk *b)
{
    uintptr_t lo = (uintptr_t)b->p;
    struct iset *s = set_lock();
    size_t i = set_lb(s, lo);
    while (i < s->n && s->v[i].lo == lo && s->v[i].id != b->id)
        i++;
    int found = i < s->n && s->v[i].lo == lo;
    if (found) {
        memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
        s->n--;
    }
    set_unlock(s);
    if (!found)
        fail(w, F_MODEL, "block %p (id %llx) is not in the interval set", (void *)b->p, (unsigned long long)b->id);
}

/* ---- shared state ------------------------------------------------------- */

struct scache {
    sl_cache_t *c;
    size_t size, align; /* align: what every object must have */
    unsigned flags;
    uint8_t ctor;
    char name[16];
};
static struct scache shared[NSHARED];
#define SHARED_CTOR(k) \
    static void ctor_s##k(void *p) { memset(p, shared[k].ctor, shared[k].size); }
SHARED_CTOR(0)
SHARED_CTOR(1)
SHARED_CTOR(2)
SHARED_CTOR(3)
static void (*const shared_ctor[NSHARED])(void *) = { ctor_s0, ctor_s1, ctor_s2, ctor_s3 };
static const size_t priv_ctor_size[NPRIV_CTOR] = { 24, 100, 777, 5000, 40000 };
#define PRIV_CTOR(k) \
    static void ctor_p##k(void *p) { memset(p, 0xD0 + k, priv_ctor_size[k]); }
PRIV_CTOR(0)
PRIV_CTOR(1)
PRIV_CTOR(2)
PRIV_CTOR(3)
PRIV_CTOR(4)
static void (*const priv_ctor[NPRIV_CTOR])(void *) = { ctor_p0, ctor_p1, ctor_p2, ctor_p3, ctor_p4 };

static struct blk *pool;
static size_t pool_n;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic unsigned char exited[MAX_SERIAL]; /* set once the thread is joined */
static _Atomic uint32_t next_serial = 1;
static _Atomic size_t large_live;
static _Atomic long cache_dropped; /* objects released by sl_cache_destroy, by the model's count */

static _Atomic int stop, pause_flag;
static pthread_mutex_t ctl = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t main_cond, work_cond; /* CLOCK_MONOTONIC */
static int running, paused, ndone;          /* under ctl */
static long tot_ops, tot_alloc, tot_free, tot_realloc, tot_bulk, tot_cache, tot_cross, tot_purge, tot_flush,
    tot_fork, tot_priv, tot_threads, npauses;

static unsigned long long t_start, t_end, inject_period, fork_period;
static _Atomic unsigned long long next_inject, next_fork;
static _Atomic unsigned inject_seq;

static struct timespec ts_at(unsigned long long ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
    return ts;
}
static int exited_thread(uint32_t serial) { return serial < MAX_SERIAL && atomic_load(&exited[serial]); }
static void mark_exited(uint32_t serial)
{
    if (serial < MAX_SERIAL)
        atomic_store(&exited[serial], 1);
}

/* ---- blocks of a thread -------------------------------------------------- */

static size_t pick_size(struct worker *w)
{
    size_t r = below(w, 1000);
    if (r < 8)
        return 0;
    if (r < 10 && atomic_load_explicit(&large_live, memory_order_relaxed) + (8u << 20) <= LARGE_BUDGET)
        return 1 + below(w, 8u << 20);
    if (r < 50)
        return 4096 + below(w, (512u << 10) - 4096 + 1);
    return 1 + below(w, 1024);
}

/* Record a block that just came (p not NULL), check what a new block must
 * satisfy and fill it with its pattern. */
static struct blk *add_blk(struct worker *w, char *p, size_t n, size_t align, int src, sl_cache_t *c, int cache,
                           uint8_t ctor)
{
    struct blk *b = &w->live[w->nlive++];
    *b = (struct blk){ .p = p, .size = n, .id = ((uint64_t)w->serial << 40) | w->next_id++, .c = c,
                       .align = (uint32_t)align, .tid = w->serial, .src = (uint8_t)src, .cache = (uint8_t)cache,
                       .ctor = ctor };
    b->usable = sl_usable_size(p);
    if (b->usable < n)
        fail(w, F_USABLE, "block %p: usable size %zu below the %zu asked", (void *)p, b->usable, n);
    if ((uintptr_t)p % 16 || (align && (uintptr_t)p % align))
        fail(w, F_ALIGN, "block %p (size %zu) not aligned to %zu", (void *)p, n, align > 16 ? align : 16);
    set_add(w, b);
    fill(p, b->id, 0, n);
    w->n_alloc++;
    if (n >= LARGE_MIN)
        atomic_fetch_add_explicit(&large_live, n, memory_order_relaxed);
    return b;
}
static struct blk take(struct worker *w, size_t i)
{
    struct blk b = w->live[i];
    w->live[i] = w->live[--w->nlive];
    return b;
}
static void check_blk(struct worker *w, const struct blk *b, const char *when)
{
    size_t bad = verify(b->p, b->id, 0, b->size);
    if (bad != SIZE_MAX)
        fail(w, F_CONTENT, "%s: block %p (size %zu, id %llx, from thread %u) byte %zu changed", when, (void *)b->p,
             b->size, (unsigned long long)b->id, b->tid, bad);
}
/* Before a free: contents, usable size, back to its constructed state;
 * out of the set before sluice may hand the memory to another thread. */
static void release(struct worker *w, const struct blk *b)
{
    check_blk(w, b, "before its free");
    size_t u = sl_usable_size(b->p);
    if (u != b->usable)
        fail(w, F_USABLE, "block %p (size %zu): usable size %zu, was %zu", (void *)b->p, b->size, u, b->usable);
    if (b->ctor)
        memset(b->p, b->ctor, b->size);
    set_del(w, b);
    if (b->size >= LARGE_MIN)
        atomic_fetch_sub_explicit(&large_live, b->size, memory_order_relaxed);
}

enum fm { FM_FREE, FM_SIZED, FM_BULK1, FM_CACHE, FM_CACHE_BULK1, FM_REALLOC0 };
static int pick_method(struct worker *w, const struct blk *b, int second)
{
    size_t r = below(w, 100);
    if (b->src == S_HEAP) {
        if (r < 45)
            return FM_FREE;
        if (r < 75)
            return FM_SIZED;
        if (r < 87 || second) /* realloc of freed memory says so, not "double free" */
            return FM_BULK1;
        return FM_REALLOC0;
    }
    if (r < 50)
        return FM_CACHE;
    if (r < 70)
        return FM_FREE;
    if (r < 85)
        return FM_BULK1;
    return FM_CACHE_BULK1;
}
/* The free itself, nothing else (a death child's too). */
static void apply_free(const struct blk *b, int m)
{
    void *v[1] = { b->p };
    switch (m) {
    case FM_SIZED:
        if (b->align)
            sl_free_aligned_sized(b->p, b->align, b->size);
        else
            sl_free_sized(b->p, b->size);
        break;
    case FM_BULK1:
        sl_free_bulk(v, 1);
        break;
    case FM_CACHE:
        sl_cache_free(b->c, b->p);
        break;
    case FM_CACHE_BULK1:
        sl_cache_free_bulk(b->c, 1, v);
        break;
    case FM_REALLOC0:
        if (sl_realloc(b->p, 0) != NULL)
            say("model: FAIL seed %llu: realloc(%p, 0) did not return NULL\n", seed, (void *)b->p);
        break;
    default:
        sl_free(b->p);
    }
}
static void do_free(struct worker *w, struct blk b, int m)
{
    release(w, &b);
    errno = ERRNO_MARK;
    apply_free(&b, m);
    if (errno != ERRNO_MARK)
        fail(w, F_ERRNO, "free (method %d) of %p set errno to %d", m, (void *)b.p, errno);
    w->n_free++;
}

/* ---- operations ---------------------------------------------------------- */

static void op_free(struct worker *w);

/* A failed allocation (err its errno): allowed under fault injection if
 * err is ENOMEM (1), a failure otherwise (0). */
static int may_fail(int err)
{
    if (!faulting || err != ENOMEM)
        return 0;
    atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
    return 1;
}

static int after_alloc(struct worker *w, void *p, size_t n, const char *what)
{
    if (!p) {
        int e = errno;
        if (!may_fail(e))
            fail(w, F_NULL, "%s(%zu) returned NULL (errno %d)", what, n, e);
        return 0;
    }
    if (errno != ERRNO_MARK)
        fail(w, F_ERRNO, "%s(%zu) succeeded and set errno to %d", what, n, errno);
    return 1;
}

static void op_malloc(struct worker *w)
{
    if (w->nlive >= LIVE_CAP)
        return op_free(w);
    size_t n = pick_size(w);
    errno = ERRNO_MARK;
    char *p = below(w, 20) ? sl_malloc(n) : sl_realloc(NULL, n);
    if (after_alloc(w, p, n, "malloc"))
        add_blk(w, p, n, 0, S_HEAP, NULL, 0, 0);
}

static void op_calloc(struct worker *w)
{
    if (w->nlive >= LIVE_CAP)
        return op_free(w);
    size_t total = pick_size(w), k = 1 + below(w, 8), each = total / k;
    errno = ERRNO_MARK;
    char *p = below(w, 2) ? sl_calloc(k, each) : sl_calloc(each, k);
    if (!after_alloc(w, p, k * each, "calloc"))
        return;
    size_t bad = verify_byte(p, 0, k * each);
    if (bad != SIZE_MAX)
        fail(w, F_CALLOC, "calloc(%zu, %zu) = %p: byte %zu not zero", k, each, (void *)p, bad);
    add_blk(w, p, k * each, 0, S_HEAP, NULL, 0, 0);
}

static void op_aligned(struct worker *w)
{
    if (w->nlive >= LIVE_CAP)
        return op_free(w);
    size_t align = (size_t)1 << (3 + below(w, 14)); /* 8 to 64 KiB */
    size_t n = pick_size(w), rec = n;
    char *p = NULL;
    const char *what = "aligned_alloc";
    errno = ERRNO_MARK;
    switch (below(w, 6)) {
    case 0:
    case 1:
        p = sl_aligned_alloc(align, n);
        break;
    case 2: {
        void *v = NULL;
        int rc = sl_posix_memalign(&v, align, n);
        what = "posix_memalign";
        if (rc) {
            int e = errno;
            if (rc != ENOMEM || e != ENOMEM || !may_fail(rc))
                fail(w, F_NULL, "posix_memalign(%zu, %zu) returned %d (errno %d)", align, n, rc, e);
            return;
        }
        p = v;
        break;
    }
    case 3:
        what = "memalign";
        p = sl_memalign(align, n);
        break;
    case 4:
        what = "valloc";
        align = 4096;
        p = sl_valloc(n);
        break;
    default:
        what = "pvalloc";
        align = 4096;
        rec = n ? (n + 4095) & ~(size_t)4095 : 4096;
        p = sl_pvalloc(n);
    }
    if (after_alloc(w, p, n, what))
        add_blk(w, p, rec, align, S_HEAP, NULL, 0, 0);
}

static size_t pick_heap(struct worker *w)
{
    for (int t = 0; t < 8 && w->nlive; t++) {
        size_t i = below(w, w->nlive);
        if (w->live[i].src == S_HEAP)
            return i;
    }
    return SIZE_MAX;
}

static void realloc_at(struct worker *w, size_t i)
{
    struct blk *b = &w->live[i];
    size_t n;
    if (below(w, 10) < 4)
        n = pick_size(w);
    else
        n = b->size / 2 + below(w, b->size + 64);
    if (n == 0)
        n = 1;
    if (n >= LARGE_MIN && atomic_load_explicit(&large_live, memory_order_relaxed) + n > LARGE_BUDGET)
        n = 1 + below(w, 1024);
    check_blk(w, b, "before realloc");
    set_del(w, b);
    if (b->size >= LARGE_MIN)
        atomic_fetch_sub_explicit(&large_live, b->size, memory_order_relaxed);
    errno = ERRNO_MARK;
    char *q;
    if (below(w, 6) == 0)
        q = n % 4 == 0 ? sl_reallocarray(b->p, n / 4, 4) : sl_reallocarray(b->p, 1, n);
    else
        q = sl_realloc(b->p, n);
    w->n_realloc++;
    if (!q) {
        int e = errno;
        if (!may_fail(e))
            fail(w, F_NULL, "realloc(%p, %zu) returned NULL (errno %d)", (void *)b->p, n, e);
        /* the block stays as it was */
        check_blk(w, b, "after a failed realloc");
        size_t u = sl_usable_size(b->p);
        if (u != b->usable)
            fail(w, F_USABLE, "block %p (size %zu): usable size %zu after a failed realloc, was %zu", (void *)b->p,
                 b->size, u, b->usable);
        set_add(w, b);
        if (b->size >= LARGE_MIN)
            atomic_fetch_add_explicit(&large_live, b->size, memory_order_relaxed);
        return;
    }
    if (errno != ERRNO_MARK)
        fail(w, F_ERRNO, "realloc(%p, %zu) succeeded and set errno to %d", (void *)b->p, n, errno);
    size_t keep = b->size < n ? b->size : n;
    size_t bad = verify(q, b->id, 0, keep);
    if (bad != SIZE_MAX)
        fail(w, F_CONTENT, "realloc(%p, %zu) from %zu bytes = %p: kept byte %zu changed", (void *)b->p, n, b->size,
             (void *)q, bad);
    b->p = q;
    b->size = n;
    b->align = 0;
    b->usable = sl_usable_size(q);
    if (b->usable < n)
        fail(w, F_USABLE, "realloc to %zu = %p: usable size %zu", n, (void *)q, b->usable);
    if ((uintptr_t)q % 16)
        fail(w, F_ALIGN, "realloc to %zu = %p: not 16-byte aligned", n, (void *)q);
    set_add(w, b);
    if (n > keep)
        fill(q, b->id, keep, n);
    if (n >= LARGE_MIN)
        atomic_fetch_add_explicit(&large_live, n, memory_order_relaxed);
}

static void op_realloc(struct worker *w)
{
    size_t i = pick_heap(w);
    if (i == SIZE_MAX)
        return op_malloc(w);
    realloc_at(w, i);
}

static void op_free(struct worker *w)
{
    if (!w->nlive)
        return;
    struct blk b = take(w, below(w, w->nlive));
    do_free(w, b, pick_method(w, &b, 0));
}

static void op_alloc_bulk(struct worker *w)
{
    if (w->nlive >= LIVE_CAP)
        return op_free(w);
    size_t r = below(w, 10), size;
    if (r < 6)
        size = 1 + below(w, 1024);
    else if (r < 8)
        size = below(w, 33);
    else if (r < 9)
        size = 1025 + below(w, 16384 - 1024);
    else
        size = 16384 + below(w, 200000);
    size_t k = 1 + below(w, 64);
    void *v[64];
    errno = ERRNO_MARK;
    size_t got = sl_alloc_bulk(size, k, v);
    if (got != k) {
        int e = errno;
        if (got || !may_fail(e))
            fail(w, F_BULK, "sl_alloc_bulk(%zu, %zu) gave %zu (errno %d)", size, k, got, e);
        if (got > k)
            return;
    } else if (errno != ERRNO_MARK)
        fail(w, F_ERRNO, "sl_alloc_bulk(%zu, %zu) succeeded and set errno to %d", size, k, errno);
    for (size_t i = 0; i < got; i++) {
        if (!v[i]) {
            fail(w, F_BULK, "sl_alloc_bulk(%zu, %zu): entry %zu NULL", size, k, i);
            continue;
        }
        add_blk(w, v[i], size, 0, S_HEAP, NULL, 0, 0);
    }
    w->n_bulk += (long)got;
}

static void op_free_bulk(struct worker *w)
{
    size_t k = 1 + below(w, 32);
    if (k > w->nlive)
        k = w->nlive;
    if (!k)
        return op_malloc(w);
    void *v[64]; /* 32 blocks, a NULL after each at most */
    size_t n = 0;
    for (size_t i = 0; i < k; i++) {
        struct blk b = take(w, below(w, w->nlive));
        release(w, &b);
        v[n++] = b.p;
        if (below(w, 10) == 0)
            v[n++] = NULL;
    }
    errno = ERRNO_MARK;
    sl_free_bulk(v, n);
    if (errno != ERRNO_MARK)
        fail(w, F_ERRNO, "sl_free_bulk of %zu set errno to %d", n, errno);
    w->n_bulk += (long)k;
    w->n_free += (long)k;
}

/* a cache to allocate from: the private one now and then */
static int pick_cache(struct worker *w, sl_cache_t **c, size_t *size, size_t *align, uint8_t *ctor)
{
    if (w->priv.c && below(w, 4) == 0) {
        *c = w->priv.c;
        *size = w->priv.size;
        *align = w->priv.align;
        *ctor = w->priv.ctor;
        return -1;
    }
    int k = (int)below(w, NSHARED);
    *c = shared[k].c;
    *size = shared[k].size;
    *align = shared[k].align;
    *ctor = shared[k].ctor;
    return k;
}
static void add_cache_obj(struct worker *w, char *p, int k, sl_cache_t *c, size_t size, size_t align, uint8_t ctor)
{
    if (ctor) {
        size_t bad = verify_byte(p, ctor, size);
        if (bad != SIZE_MAX)
            fail(w, F_CTOR, "object %p of cache '%s' (size %zu): byte %zu not in its constructed state (%#x, not %#x)",
                 (void *)p, k >= 0 ? shared[k].name : w->priv.name, size, bad, (unsigned char)p[bad], ctor);
    }
    add_blk(w, p, size, align, k >= 0 ? S_SHARED : S_PRIV, c, k >= 0 ? k : 0, ctor);
    w->n_cache++;
}

static void cache_alloc_one(struct worker *w)
{
    sl_cache_t *c;
    size_t size, align;
    uint8_t ctor;
    int k = pick_cache(w, &c, &size, &align, &ctor);
    errno = ERRNO_MARK;
    char *p = sl_cache_alloc(c);
    if (!p) {
        int e = errno;
        if (!may_fail(e))
            fail(w, F_NULL, "sl_cache_alloc of cache '%s' returned NULL (errno %d)",
                 k >= 0 ? shared[k].name : w->priv.name, e);
        return;
    }
    if (errno != ERRNO_MARK)
        fail(w, F_ERRNO, "sl_cache_alloc succeeded and set errno to %d", errno);
    add_cache_obj(w, p, k, c, size, align, ctor);
}
static void op_cache_alloc(struct worker *w)
{
    if (w->nlive >= LIVE_CAP)
        return op_free(w);
    cache_alloc_one(w);
}

static void op_cache_bulk(struct worker *w)
{
    if (below(w, 2) && w->nlive < LIVE_CAP) {
        sl_cache_t *c;
        size_t size, align;
        uint8_t ctor;
        int k = pick_cache(w, &c, &size, &align, &ctor);
        size_t n = 1 + below(w, 48);
        void *v[48];
        errno = ERRNO_MARK;
        size_t got = sl_cache_alloc_bulk(c, n, v);
        if (got != n) {
            int e = errno;
            if (got || !may_fail(e))
                fail(w, F_BULK, "sl_cache_alloc_bulk(%zu) gave %zu (errno %d)", n, got, e);
            if (got > n)
                return;
        } else if (errno != ERRNO_MARK)
            fail(w, F_ERRNO, "sl_cache_alloc_bulk succeeded and set errno to %d", errno);
        for (size_t i = 0; i < got; i++)
            add_cache_obj(w, v[i], k, c, size, align, ctor);
        return;
    }
    /* free up to 32 objects of one cache, the cache of a random one */
    size_t first = SIZE_MAX;
    for (int t = 0; t < 8 && w->nlive && first == SIZE_MAX; t++) {
        size_t i = below(w, w->nlive);
        if (w->live[i].src != S_HEAP)
            first = i;
    }
    if (first == SIZE_MAX)
        return op_cache_alloc(w);
    sl_cache_t *c = w->live[first].c;
    void *v[32];
    size_t n = 0, want = 1 + below(w, 32);
    struct blk b = take(w, first);
    release(w, &b);
    v[n++] = b.p;
    for (size_t i = w->nlive; i-- > 0 && n < want;)
        if (w->live[i].src != S_HEAP && w->live[i].c == c) {
            b = take(w, i);
            release(w, &b);
            v[n++] = b.p;
        }
    errno = ERRNO_MARK;
    sl_cache_free_bulk(c, n, v);
    if (errno != ERRNO_MARK)
        fail(w, F_ERRNO, "sl_cache_free_bulk set errno to %d", errno);
    w->n_free += (long)n;
    w->n_bulk += (long)n;
}

static void pool_put(struct worker *w, struct blk b)
{
    pthread_mutex_lock(&pool_lock);
    int room = pool_n < POOL_CAP;
    if (room)
        pool[pool_n++] = b;
    pthread_mutex_unlock(&pool_lock);
    if (!room)
        do_free(w, b, pick_method(w, &b, 0));
}

static void op_pool_push(struct worker *w)
{
    for (int t = 0; t < 4 && w->nlive; t++) {
        size_t i = below(w, w->nlive);
        if (w->live[i].src != S_PRIV)
            return pool_put(w, take(w, i));
    }
}

/* A block of another thread: freed here, reallocated here, or kept. */
static void op_pool_pop(struct worker *w)
{
    struct blk b;
    int got = 0;
    size_t r = rnd(w);
    pthread_mutex_lock(&pool_lock);
    if (pool_n) {
        size_t i = r % pool_n;
        b = pool[i];
        pool[i] = pool[--pool_n];
        got = 1;
    }
    pthread_mutex_unlock(&pool_lock);
    if (!got)
        return op_malloc(w);
    w->n_cross++;
    r = below(w, 10);
    if (r < 5 || w->nlive >= LIVE_CAP)
        return do_free(w, b, pick_method(w, &b, 0));
    w->live[w->nlive++] = b;
    if (r < 7 && b.src == S_HEAP)
        realloc_at(w, w->nlive - 1);
}

static void op_touch(struct worker *w)
{
    if (!w->nlive)
        return op_malloc(w);
    struct blk *b = &w->live[below(w, w->nlive)];
    size_t u = sl_usable_size(b->p);
    if (u != b->usable)
        fail(w, F_USABLE, "block %p (size %zu): usable size %zu, was %zu", (void *)b->p, b->size, u, b->usable);
    check_blk(w, b, "while live");
}

static void priv_destroy(struct worker *w, int free_first)
{
    for (size_t i = w->nlive; i-- > 0;) {
        if (w->live[i].src != S_PRIV)
            continue;
        struct blk b = take(w, i);
        if (free_first)
            do_free(w, b, pick_method(w, &b, 0));
        else {
            release(w, &b); /* dropped with the cache */
            atomic_fetch_add_explicit(&cache_dropped, 1, memory_order_relaxed);
        }
    }
    sl_cache_destroy(w->priv.c);
    w->priv.c = NULL;
}

static void op_priv(struct worker *w)
{
    if (w->priv.c) {
        if (below(w, 3) == 0)
            sl_cache_shrink(w->priv.c);
        else
            priv_destroy(w, (int)below(w, 2));
        return;
    }
    static const size_t aligns[] = { 0, 16, 32, 64, 256, 1024, 4096 };
    struct priv *pv = &w->priv;
    void (*ctor)(void *) = NULL;
    pv->align = aligns[below(w, 7)];
    unsigned flags = (unsigned)below(w, 4);
    pv->ctor = 0;
    if (below(w, 2)) {
        size_t j = below(w, NPRIV_CTOR);
        pv->size = priv_ctor_size[j];
        pv->ctor = (uint8_t)(0xD0 + j);
        ctor = priv_ctor[j];
    } else
        pv->size = below(w, 10) ? 1 + below(w, 8192) : 1 + below(w, 120u << 10);
    snprintf(pv->name, sizeof pv->name, "model-t%u.%u", w->serial, pv->gen++);
    errno = ERRNO_MARK;
    pv->c = sl_cache_create(pv->name, pv->size, pv->align, flags, ctor);
    if (!pv->c) {
        int e = errno;
        if (!may_fail(e))
            fail(w, F_NULL, "sl_cache_create(%zu, %zu, %#x) returned NULL (errno %d)", pv->size, pv->align, flags,
                 e);
        return;
    }
    if (pv->align < 16)
        pv->align = 16;
    if ((flags & SL_CACHE_HWCACHE_ALIGN) && pv->align < 64)
        pv->align = 64;
    w->n_priv++;
}

static void op_shrink(struct worker *w)
{
    if (w->priv.c && below(w, 2))
        sl_cache_shrink(w->priv.c);
    else
        sl_cache_shrink(shared[below(w, NSHARED)].c);
}

static void one_op(struct worker *w, int child)
{
    size_t r = below(w, 1000);
    if (r < 270)
        op_malloc(w);
    else if (r < 320)
        op_calloc(w);
    else if (r < 370)
        op_aligned(w);
    else if (r < 470)
        op_realloc(w);
    else if (r < 700)
        op_free(w);
    else if (r < 720)
        op_alloc_bulk(w);
    else if (r < 740)
        op_free_bulk(w);
    else if (r < 800)
        op_cache_alloc(w);
    else if (r < 840)
        op_cache_bulk(w);
    else if (r < 900)
        child ? op_free(w) : op_pool_push(w);
    else if (r < 960)
        child ? op_malloc(w) : op_pool_pop(w);
    else if (r < 985)
        op_touch(w);
    else if (r < 990)
        op_priv(w);
    else if (r < 995)
        op_shrink(w);
    else if (r < 998) {
        if (below(w, 4) == 0) {
            sl_purge();
            w->n_purge++;
        }
    } else {
        sl_flush();
        w->n_flush++;
    }
}

/* ---- children ------------------------------------------------------------ */

/* One fork at a time. glibc runs the fork handlers of concurrent forks
 * one fork after the other already, under a lock ThreadSanitizer does not
 * see (it would report sluice's handlers racing with themselves). */
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t fork_locked(void)
{
    pthread_mutex_lock(&fork_mu);
    pid_t pid = fork();
    if (pid != 0)
        pthread_mutex_unlock(&fork_mu);
    return pid;
}

/* Wait for a child at most ms; -1 if it hung (then it is killed). */
static int wait_child(pid_t pid, int ms)
{
    int status = -1;
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int r;
        do
            r = poll(&pfd, 1, ms);
        while (r < 0 && errno == EINTR);
        close(fd);
        if (r == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        return status;
    }
#endif
    unsigned long long dl = t_now_ms() + (unsigned long long)ms;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        if (t_now_ms() >= dl) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
    }
}

/* The fork child: this thread's blocks checked (and no two overlap), some
 * work on them and new ones, everything freed, sl_check. */
static _Noreturn void fork_child(struct worker *w)
{
    in_child = 1;
    cset.v = map(CSET_CAP * sizeof *cset.v);
    cset.cap = CSET_CAP;
    for (size_t i = 0; i < w->nlive; i++) {
        check_blk(w, &w->live[i], "in a fork child");
        set_add(w, &w->live[i]);
    }
    for (int i = 0; i < 400; i++)
        one_op(w, 1);
    while (w->nlive) {
        struct blk b = take(w, below(w, w->nlive));
        do_free(w, b, pick_method(w, &b, 0));
    }
    if (w->priv.c)
        priv_destroy(w, 1);
    sl_purge();
    sl_flush();
    sl_check();
    if (cset.n)
        fail(w, F_MODEL, "%zu blocks left in the child's set", cset.n);
    _exit(child_fails ? 1 : 0);
}

static void fork_op(struct worker *w)
{
    w->n_fork++;
    pid_t pid = fork_locked();
    if (pid == 0)
        fork_child(w);
    if (pid < 0) {
        fail(w, F_FORK, "fork: errno %d", errno);
        return;
    }
    int st = wait_child(pid, CHILD_MS);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail(w, F_FORK, "fork child with %zu blocks of this thread: %s %d", w->nlive,
             st == -1 ? "hung, killed" : WIFSIGNALED(st) ? "killed by signal" : "exit status",
             st == -1 ? 0 : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* ---- misuse -------------------------------------------------------------- */

enum kind { M_DF_SAME, M_DF_REMOTE_OWNER, M_DF_REMOTE_THIRD, M_DF_OWNER_REMOTE, M_DF_PURGE, M_DF_EXITED,
            M_FOREIGN_STACK, M_FOREIGN_STATIC, M_FOREIGN_MMAP, M_INTERIOR, M_CACHE_WRONG, M_CACHE_MALLOC,
            NKINDS };
static const char *const kind_name[NKINDS] = {
    "double free, both by one thread",
    "double free, first by another thread, then by the owner",
    "double free by two other threads",
    "double free, first by the owner, then by another thread",
    "double free, sl_purge between",
    "double free of a block whose thread exited",
    "free of a stack pointer",
    "free of a static pointer",
    "free of an mmap pointer",
    "free of an interior pointer",
    "sl_cache_free to the wrong cache",
    "sl_cache_free of a malloc block",
};
static _Atomic long injected[NKINDS], reported[NKINDS], reported_late[NKINDS];
static _Alignas(64) char static_buf[256];

/* What a death child writes once the misuse has returned unreported. */
#define LATE_MARK "model: the misuse returned"

struct misuse {
    int kind, m1, m2, variant;
    int at_once; /* must be reported before the misusing calls return */
    struct blk b;
    char *q;         /* the pointer misused (b.p, or interior, or foreign) */
    sl_cache_t *to;  /* the cache freed to */
    char expect[3][200]; /* any of them */
};

struct in_thread_arg {
    const struct blk *b;
    int m;
    void *q;
};
static void thread_free(struct in_thread_arg *a)
{
    if (a->b)
        apply_free(a->b, a->m);
    else
        sl_free(a->q);
}
/* A thread of a death child, on a stack of its own: glibc would give it
 * the stack, and so the id, of one of the parent's threads, which
 * ThreadSanitizer, still counting that thread, refuses ("dup thread"). */
static void child_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    size_t size = (size_t)4 << 20;
    void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (stack == MAP_FAILED || pthread_attr_setstack(&a, stack, size) || pthread_create(t, &a, fn, arg)) {
        say("model: no thread in a death child\n");
        _exit(4);
    }
    pthread_attr_destroy(&a);
}

/* A thread of a death child that frees when it is told to. It is started
 * before the first free of a double free, never between the two:
 * pthread_create allocates (glibc's thread structures, with malloc, in the
 * creating thread), which may take the page the first free released for a
 * slab of another class, the pointer then the start of a live object that
 * the second free frees legitimately as far as any allocator can tell.
 * Between helper_start and helper_go nothing of the death child allocates.
 * stay 0: it exits after its free (its remote batch flushed by the exit)
 * and helper_go joins it; 1: it stays until helper_end. */
struct helper {
    pthread_t t;
    struct in_thread_arg a;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stay;
    int state; /* 1: may free, 2: freed, 3: may exit */
};
static void helper_wait(struct helper *h, int state)
{
    struct timespec dl = ts_at(t_now_ms() + CHILD_MS / 2);
    while (h->state < state)
        if (pthread_cond_timedwait(&h->cv, &h->mu, &dl) == ETIMEDOUT) {
            say("model: a death child's thread waited %d ms\n", CHILD_MS / 2);
            _exit(5);
        }
}
static void helper_set(struct helper *h, int state)
{
    pthread_mutex_lock(&h->mu);
    h->state = state;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}
static void *helper_main(void *arg)
{
    struct helper *h = arg;
    pthread_mutex_lock(&h->mu);
    helper_wait(h, 1);
    pthread_mutex_unlock(&h->mu);
    thread_free(&h->a);
    pthread_mutex_lock(&h->mu);
    h->state = 2;
    pthread_cond_broadcast(&h->cv);
    if (h->stay)
        helper_wait(h, 3);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}
/* Start it (it waits): b freed with method m, or q with sl_free. */
static void helper_start(struct helper *h, const struct blk *b, int m, void *q, int stay)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&h->mu, NULL);
    h->a = (struct in_thread_arg){ b, m, q };
    h->stay = stay;
    h->state = 0;
    child_thread(&h->t, helper_main, h);
}
/* Let it free and wait until it has (and, stay 0, has exited). */
static void helper_go(struct helper *h)
{
    helper_set(h, 1);
    pthread_mutex_lock(&h->mu);
    helper_wait(h, 2);
    pthread_mutex_unlock(&h->mu);
    if (!h->stay)
        pthread_join(h->t, NULL);
}
static void helper_end(struct helper *h)
{
    if (!h->stay)
        return;
    helper_set(h, 3);
    pthread_join(h->t, NULL);
}
/* A single free by another thread, which exits after it. */
static void in_thread(const struct blk *b, int m, void *q)
{
    static struct helper h;
    helper_start(&h, b, m, q, 0);
    helper_go(&h);
}
/* Allocate and write objects of b's size (or cache): a magazine hands
 * b's memory out again, its words overwritten. */
static void reuse(const struct blk *b)
{
    size_t n = b->p ? b->size : 64;
    for (int i = 0; i < 64; i++) {
        char *p = b->p && b->src != S_HEAP ? sl_cache_alloc(b->c) : sl_malloc(n);
        if (p)
            memset(p, 0x5a, n);
    }
}

static _Noreturn void misuse_child(struct misuse *m)
{
    const struct blk *b = &m->b;
    void *v[3];
    static struct helper h1, h2;
    switch (m->kind) {
    case M_DF_SAME:
    case M_DF_EXITED:
        apply_free(b, m->m1);
        apply_free(b, m->m2);
        break;
    /* variant 0: the other threads exit after their free (their batches
     * flushed); 1: they stay until the owner has done its part. Every
     * thread is started before the first free (struct helper). */
    case M_DF_REMOTE_OWNER:
        helper_start(&h1, b, m->m1, NULL, m->variant);
        helper_go(&h1);
        apply_free(b, m->m2);
        if (m->variant)
            reuse(b);
        helper_end(&h1);
        break;
    case M_DF_REMOTE_THIRD:
        helper_start(&h1, b, m->m1, NULL, m->variant);
        helper_start(&h2, b, m->m2, NULL, m->variant);
        helper_go(&h1);
        helper_go(&h2);
        if (m->variant)
            reuse(b);
        helper_end(&h1);
        helper_end(&h2);
        break;
    case M_DF_OWNER_REMOTE:
        helper_start(&h1, b, m->m2, NULL, m->variant);
        apply_free(b, m->m1);
        helper_go(&h1);
        if (m->variant)
            reuse(b);
        helper_end(&h1);
        break;
    case M_DF_PURGE:
        apply_free(b, m->m1);
        sl_purge();
        apply_free(b, m->m2);
        break;
    case M_FOREIGN_STACK:
    case M_FOREIGN_STATIC:
    case M_FOREIGN_MMAP:
        switch (m->variant) {
        case 0:
            sl_free(m->q);
            break;
        case 1:
            v[0] = m->q;
            sl_free_bulk(v, 1);
            break;
        case 2:
            sl_free_sized(m->q, 64);
            break;
        case 3:
            sl_cache_free(m->to, m->q);
            break;
        default:
            if (sl_realloc(m->q, 100))
                say("model: realloc of a foreign pointer returned\n");
        }
        break;
    case M_INTERIOR:
        v[0] = m->q;
        if (m->variant == 0)
            sl_free(m->q);
        else if (m->variant == 1)
            sl_free_bulk(v, 1);
        else
            in_thread(NULL, 0, m->q); /* reported when its batch is flushed */
        break;
    case M_CACHE_WRONG:
    case M_CACHE_MALLOC:
        v[0] = m->q;
        if (m->variant == 0)
            sl_cache_free(m->to, m->q);
        else
            sl_cache_free_bulk(m->to, 1, v);
        break;
    }
    /* not reported at once (the misusing threads are joined, so their
     * batches are flushed); a deferred check's chances: the owner's
     * collect, magazines emptied and filled again */
    say("%s\n", LATE_MARK);
    sl_purge();
    sl_flush();
    reuse(b);
    size_t n = b->p ? b->size : 64;
    static void *out[4096];
    sl_alloc_bulk(n < 1024 ? n : 64, 4096, out);
    sl_purge();
    _exit(0); /* unnoticed */
}

/* Where line (the address ending there) is in out, or NULL. */
static const char *find_line(const char *out, const char *line)
{
    size_t n = strlen(line);
    if (!n)
        return NULL;
    for (const char *s = strstr(out, line); s; s = strstr(s + 1, line)) {
        char c = s[n];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return s;
    }
    return NULL;
}

static void run_misuse(struct worker *w, struct misuse *m)
{
    int fd = memfd_create("model-misuse", 0);
    if (fd < 0) {
        fail(w, F_MODEL, "memfd_create: errno %d", errno);
        return;
    }
    atomic_fetch_add(&injected[m->kind], 1);
    pid_t pid = fork_locked();
    if (pid == 0) {
        in_child = 1;
        dup2(fd, 2);
        misuse_child(m);
    }
    if (pid < 0) {
        close(fd);
        fail(w, F_FORK, "fork: errno %d", errno);
        return;
    }
    int st = wait_child(pid, CHILD_MS);
    static _Thread_local char out[16384];
    ssize_t n = pread(fd, out, sizeof out - 1, 0);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    int aborted = st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
    const char *line = NULL, *mark = strstr(out, LATE_MARK);
    for (int e = 0; e < 3 && !line; e++)
        line = find_line(out, m->expect[e]);
    int late = line && mark && mark < line;
    if (aborted && line && (!late || !m->at_once)) {
        atomic_fetch_add(&reported[m->kind], 1);
        if (late)
            atomic_fetch_add(&reported_late[m->kind], 1);
        return;
    }
    char *first = line ? (char *)line : out; /* the line, or the first */
    char *nl = strchr(first, '\n');
    if (nl && nl[1])
        nl[1] = 0;
    if (atomic_fetch_add(&said, 1) < MAX_SAY)
        say("model: MISUSE NOT REPORTED seed %llu thread %u: %s (block %p size %zu from thread %u%s, src %d, "
            "methods %d/%d, variant %d): %s, expected \"%s\", stderr: %s%s",
            seed, w->serial, kind_name[m->kind], (void *)m->b.p, m->b.size, m->b.tid,
            exited_thread(m->b.tid) ? " (exited)" : "", m->b.src, m->m1, m->m2, m->variant,
            st == -1          ? "hung"
            : late            ? "reported only later, by a collect or a purge"
            : WIFSIGNALED(st) ? (WTERMSIG(st) == SIGABRT ? "aborted" : "killed by another signal")
            : WEXITSTATUS(st) ? "exited nonzero"
                              : "exited 0",
            m->expect[0], first[0] ? first : "(nothing)\n", first[0] && !strchr(first, '\n') ? "\n" : "");
}

/* A heap block for misuse, from the thread's own blocks if pred finds one. */
static struct blk *find_blk(struct worker *w, int (*pred)(struct worker *, const struct blk *))
{
    size_t n = w->nlive, at = below(w, n ? n : 1);
    for (size_t k = 0; k < n; k++) {
        struct blk *b = &w->live[(at + k) % n];
        if (pred(w, b))
            return b;
    }
    return NULL;
}
static int any_blk(struct worker *w, const struct blk *b) { return (void)w, (void)b, 1; }
static int own_blk(struct worker *w, const struct blk *b) { return b->tid == w->serial; }
static int exited_blk(struct worker *w, const struct blk *b) { return (void)w, exited_thread(b->tid); }
static int heap_blk(struct worker *w, const struct blk *b) { return (void)w, b->src == S_HEAP; }
static int shared_blk(struct worker *w, const struct blk *b) { return (void)w, b->src == S_SHARED; }
static struct blk *new_heap_blk(struct worker *w)
{
    size_t n = pick_size(w);
    errno = ERRNO_MARK;
    char *p = sl_malloc(n);
    return after_alloc(w, p, n, "malloc") ? add_blk(w, p, n, 0, S_HEAP, NULL, 0, 0) : NULL;
}

/* A block whose thread has exited: one of the pool's, or one a thread made
 * for it. */
static void *helper_alloc(void *arg)
{
    struct worker *w = arg;
    uint32_t mine = w->serial;
    w->serial = atomic_fetch_add(&next_serial, 1);
    if (below(w, 4) == 0)
        cache_alloc_one(w);
    else
        new_heap_blk(w);
    uint32_t s = w->serial;
    w->serial = mine;
    return (void *)(uintptr_t)s;
}
static struct blk *exited_block(struct worker *w)
{
    struct blk *b = find_blk(w, exited_blk);
    if (b && below(w, 2))
        return b;
    if (below(w, 2)) {
        size_t r = rnd(w);
        int got = 0;
        struct blk x;
        pthread_mutex_lock(&pool_lock);
        for (size_t k = 0; k < pool_n; k++) {
            size_t i = (r + k) % pool_n;
            if (exited_thread(pool[i].tid)) {
                x = pool[i];
                pool[i] = pool[--pool_n];
                got = 1;
                break;
            }
        }
        pthread_mutex_unlock(&pool_lock);
        if (got) { /* room: inject() made sure */
            w->live[w->nlive++] = x;
            return &w->live[w->nlive - 1];
        }
    }
    size_t before = w->nlive;
    pthread_t t;
    void *ret;
    if (pthread_create(&t, NULL, helper_alloc, w)) {
        fail(w, F_MODEL, "pthread_create failed");
        return NULL;
    }
    pthread_join(t, &ret);
    mark_exited((uint32_t)(uintptr_t)ret);
    return w->nlive > before ? &w->live[w->nlive - 1] : NULL;
}

static void expect_double_free(struct misuse *m)
{
    snprintf(m->expect[0], sizeof m->expect[0], "sluice: double free of %p", (void *)m->q);
    snprintf(m->expect[1], sizeof m->expect[1], "sluice: double free (or write after free) of %p", (void *)m->q);
    /* memory given back to the kernel (a purge's unmapped pageblock, a
     * huge mapping unmapped at its free) is a pointer sluice does not
     * know: slab/free_state.c's last row */
    if (m->kind == M_DF_PURGE || m->b.size > ((size_t)1 << 20))
        snprintf(m->expect[2], sizeof m->expect[2], "sluice: free of a pointer sluice did not allocate: %p",
                 (void *)m->q);
}
static const char *cache_name(struct worker *w, const struct blk *b)
{
    return b->src == S_SHARED ? shared[b->cache].name : w->priv.name;
}

static void inject(struct worker *w, int kind)
{
    _Alignas(16) char stack_buf[256];
    memset(stack_buf, 1, sizeof stack_buf);
    struct misuse m;
    memset(&m, 0, sizeof m);
    m.kind = kind;
    m.at_once = 1;
    struct blk *b = NULL;
    if (w->nlive > LIVE_MAX - 4)
        return; /* no room for the block it may take */
    switch (kind) {
    case M_DF_SAME:
    case M_DF_PURGE:
    case M_INTERIOR:
        b = find_blk(w, any_blk);
        break;
    case M_DF_REMOTE_OWNER:
    case M_DF_REMOTE_THIRD:
    case M_DF_OWNER_REMOTE:
        b = find_blk(w, own_blk);
        break;
    case M_DF_EXITED:
        if (!(b = exited_block(w)))
            return;
        break;
    case M_CACHE_WRONG:
        b = find_blk(w, shared_blk);
        if (!b || (w->priv.c && below(w, 3) == 0))
            b = find_blk(w, any_blk);
        if (b && b->src == S_HEAP)
            b = NULL;
        if (!b) {
            size_t before = w->nlive;
            cache_alloc_one(w);
            if (w->nlive <= before)
                return;
            b = &w->live[w->nlive - 1];
        }
        break;
    case M_CACHE_MALLOC:
        b = find_blk(w, heap_blk);
        break;
    default: /* foreign: no block */
        break;
    }
    if (!b && kind != M_FOREIGN_STACK && kind != M_FOREIGN_STATIC && kind != M_FOREIGN_MMAP &&
        !(b = new_heap_blk(w)))
        return;
    if (b) {
        m.b = *b;
        m.q = b->p;
        check_blk(w, b, "before a misuse");
    }
    switch (kind) {
    case M_DF_SAME:
    case M_DF_REMOTE_OWNER:
    case M_DF_REMOTE_THIRD:
    case M_DF_OWNER_REMOTE:
    case M_DF_PURGE:
    case M_DF_EXITED:
        m.m1 = pick_method(w, b, 0);
        m.m2 = pick_method(w, b, 1);
        m.variant = (int)below(w, 2);
        /* the owner's bulk free reads and writes nothing in the object:
         * a free by another thread before or after it is caught by the
         * owner's collect (death.c: double_free_remote_then_bulk;
         * double_free.c: owner_bulk_then_other) */
        if ((kind == M_DF_OWNER_REMOTE && (m.m1 == FM_BULK1 || m.m1 == FM_CACHE_BULK1)) ||
            (kind == M_DF_REMOTE_OWNER && (m.m2 == FM_BULK1 || m.m2 == FM_CACHE_BULK1)))
            m.at_once = 0;
        expect_double_free(&m);
        break;
    case M_FOREIGN_STACK:
    case M_FOREIGN_STATIC:
    case M_FOREIGN_MMAP:
        m.q = kind == M_FOREIGN_STACK    ? stack_buf + 16 * below(w, 8)
              : kind == M_FOREIGN_STATIC ? static_buf + 16 * below(w, 8)
                                         : (char *)gset.v + 4096 * below(w, 64) + 16 * below(w, 4);
        m.variant = (int)below(w, 5);
        m.to = shared[below(w, NSHARED)].c;
        snprintf(m.expect[0], sizeof m.expect[0], "sluice: %s of a pointer sluice did not allocate: %p",
                 m.variant == 4 ? "realloc" : "free", (void *)m.q);
        break;
    case M_INTERIOR: {
        size_t u = b->usable, off;
        if (u <= 16 || below(w, 3) == 0)
            off = 8;
        else
            off = 16 * (1 + below(w, ((u < (1u << 20) ? u : (1u << 20)) - 1) / 16));
        m.q = b->p + off;
        m.variant = (int)below(w, 3);
        snprintf(m.expect[0], sizeof m.expect[0], "sluice: free of an interior pointer %p", (void *)m.q);
        break;
    }
    case M_CACHE_WRONG: {
        /* another shared cache, or the private one for a shared object */
        int k = (int)below(w, NSHARED);
        if (b->src == S_SHARED && k == b->cache)
            k = (k + 1) % NSHARED;
        const char *to_name = shared[k].name;
        m.to = shared[k].c;
        if (b->src == S_SHARED && w->priv.c && below(w, 2)) {
            m.to = w->priv.c;
            to_name = w->priv.name;
        }
        m.variant = (int)below(w, 2);
        snprintf(m.expect[0], sizeof m.expect[0], "sluice: sl_cache_free to cache '%s' of %p (an object of cache '%s')",
                 to_name, (void *)m.q, cache_name(w, b));
        break;
    }
    case M_CACHE_MALLOC: {
        int k = (int)below(w, NSHARED);
        m.to = shared[k].c;
        m.variant = (int)below(w, 2);
        snprintf(m.expect[0], sizeof m.expect[0], "sluice: sl_cache_free to cache '%s' of %p", shared[k].name,
                 (void *)m.q);
        break;
    }
    }
    run_misuse(w, &m);
}

/* ---- threads ------------------------------------------------------------- */

static struct worker *workers; /* MAX_WORKERS slots */

static int claim(_Atomic unsigned long long *next, unsigned long long now, unsigned long long period)
{
    unsigned long long t = atomic_load(next);
    return now >= t && now + 100 < t_end && atomic_compare_exchange_strong(next, &t, now + period);
}

static void pause_here(struct worker *w)
{
    pthread_mutex_lock(&ctl);
    paused++;
    pthread_cond_broadcast(&main_cond);
    struct timespec dl = ts_at(t_now_ms() + STUCK_MS);
    while (atomic_load(&pause_flag))
        if (pthread_cond_timedwait(&work_cond, &ctl, &dl) == ETIMEDOUT) {
            fail(w, F_STUCK, "paused for %d ms", STUCK_MS);
            break;
        }
    paused--;
    pthread_mutex_unlock(&ctl);
}

/* Before the thread exits: its blocks to the pool (freed when it is full),
 * its private cache destroyed, with or without its objects. */
static void worker_exit(struct worker *w)
{
    if (w->priv.c)
        priv_destroy(w, (int)below(w, 2));
    while (w->nlive)
        pool_put(w, take(w, w->nlive - 1));
    pthread_mutex_lock(&ctl);
    tot_ops += w->ops;
    tot_alloc += w->n_alloc;
    tot_free += w->n_free;
    tot_realloc += w->n_realloc;
    tot_bulk += w->n_bulk;
    tot_cache += w->n_cache;
    tot_cross += w->n_cross;
    tot_purge += w->n_purge;
    tot_flush += w->n_flush;
    tot_fork += w->n_fork;
    tot_priv += w->n_priv;
    w->done = 1;
    running--;
    ndone++;
    pthread_cond_broadcast(&main_cond);
    pthread_mutex_unlock(&ctl);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    if (w->finisher) {
        for (long i = 0; i < 300; i++, w->ops++)
            one_op(w, 0);
        /* an injection gives up when an allocation it needs is refused
         * (fault injection): tried again */
        for (int k = 0; k < NKINDS; k++)
            for (int t = 0; t < 100 && !atomic_load(&injected[k]); t++)
                inject(w, k);
        worker_exit(w);
        return NULL;
    }
    while (w->ops < w->nops && !atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (atomic_load_explicit(&pause_flag, memory_order_relaxed))
            pause_here(w);
        if ((w->ops & 15) == 0) {
            unsigned long long now = t_now_ms();
            if (claim(&next_inject, now, inject_period))
                inject(w, (int)(atomic_fetch_add(&inject_seq, 1) % NKINDS));
            else if (claim(&next_fork, now, fork_period))
                fork_op(w);
        }
        one_op(w, 0);
        w->ops++;
    }
    worker_exit(w);
    return NULL;
}

static void spawn(int slot, int finisher)
{
    struct worker *w = &workers[slot];
    memset(w, 0, sizeof *w);
    w->serial = atomic_fetch_add(&next_serial, 1);
    w->rng = splitmix(seed ^ (uint64_t)w->serial * 0xD1B54A32D192ED03ull) | 1;
    w->nops = 500 + (long)below(w, MODEL_TSAN ? 3000 : 12000); /* a few generations a run */
    w->finisher = finisher;
    running++; /* under ctl or before any thread */
    tot_threads++;
    if (pthread_create(&w->th, NULL, worker_main, w)) {
        say("model: pthread_create failed\n");
        exit(2);
    }
}

static void join(int slot)
{
    struct worker *w = &workers[slot];
    pthread_join(w->th, NULL);
    w->joined = 1;
    mark_exited(w->serial);
}

/* Every thread paused between operations: every live block checked, the
 * set's count against the model's, sl_check. */
static void check_all(struct worker *mw, int nslots)
{
    size_t count = 0;
    for (int s = 0; s < nslots; s++) {
        struct worker *w = &workers[s];
        if (w->done)
            continue;
        for (size_t i = 0; i < w->nlive; i++)
            check_blk(mw, &w->live[i], "at a pause");
        count += w->nlive;
    }
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < pool_n; i++)
        check_blk(mw, &pool[i], "in the pool at a pause");
    count += pool_n;
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_lock(&gset.lock);
    size_t n = gset.n;
    pthread_mutex_unlock(&gset.lock);
    if (n != count)
        fail(mw, F_MODEL, "%zu blocks in the set, %zu in the model", n, count);
    sl_check();
}

static void pause_and_check(struct worker *mw, int nslots)
{
    pthread_mutex_lock(&ctl);
    atomic_store(&pause_flag, 1);
    struct timespec dl = ts_at(t_now_ms() + STUCK_MS);
    int ok = 1;
    while (paused < running)
        if (pthread_cond_timedwait(&main_cond, &ctl, &dl) == ETIMEDOUT) {
            fail(mw, F_STUCK, "%d of %d threads paused after %d ms", paused, running, STUCK_MS);
            ok = 0;
            break;
        }
    /* a worker that has left the count may still be in its exit (sluice's
     * thread-exit flush runs after worker_exit): joined before the check,
     * which needs every other thread quiet; the main loop respawns it */
    for (int s = 0; ok && s < nslots; s++)
        if (workers[s].done && !workers[s].joined)
            join(s);
    if (ok) {
        check_all(mw, nslots);
        npauses++;
    }
    atomic_store(&pause_flag, 0);
    pthread_cond_broadcast(&work_cond);
    pthread_mutex_unlock(&ctl);
}

/* Wait (deadline STUCK_MS) until no worker runs, then join them all. */
static int wait_all(struct worker *mw, int nslots)
{
    pthread_mutex_lock(&ctl);
    struct timespec dl = ts_at(t_now_ms() + STUCK_MS);
    int ok = 1;
    while (running > 0)
        if (pthread_cond_timedwait(&main_cond, &ctl, &dl) == ETIMEDOUT) {
            fail(mw, F_STUCK, "%d threads still running %d ms after the stop", running, STUCK_MS);
            ok = 0;
            break;
        }
    ndone = 0;
    pthread_mutex_unlock(&ctl);
    if (!ok)
        return 0;
    for (int s = 0; s < nslots; s++)
        if (!workers[s].joined)
            join(s);
    return 1;
}

int main(int argc, char **argv)
{
#if MODEL_TSAN
    /* the death children start threads after a multi-threaded fork */
    const char *to = getenv("TSAN_OPTIONS");
    if (!to || !strstr(to, "die_after_fork=0")) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s%sdie_after_fork=0", to ? to : "", to && *to ? " " : "");
        setenv("TSAN_OPTIONS", buf, 1);
        execv("/proc/self/exe", argv);
    }
#endif
    const char *s = argc > 1 ? argv[1] : getenv("MODEL_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 0);
    else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = splitmix((unsigned long long)ts.tv_sec * 1000000007ull ^ (unsigned long long)ts.tv_nsec ^
                        (unsigned long long)getpid() << 32) % 1000000000000ull;
    }
    printf("model: seed %llu\n", seed);
#if SL_FAULT_INJECT
    const char *rule = getenv("SLUICE_FAULT");
    faulting = rule && *rule;
    printf("model: fault injection %s%s\n", faulting ? "SLUICE_FAULT=" : "off (SLUICE_FAULT unset)",
           faulting ? rule : "");
#endif
    fflush(stdout);
    double secs = 3;
    const char *d = getenv("STRESS_SECONDS");
    if (d && *d && strtod(d, NULL) > 0)
        secs = strtod(d, NULL);
    int nthreads = 2 + (int)(seed % 7);
    unsigned long long per_kind = 2;
    const char *mu = getenv("MODEL_MISUSE");
    if (mu && *mu && strtoull(mu, NULL, 10) > 0)
        per_kind = strtoull(mu, NULL, 10);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&main_cond, &ca);
    pthread_cond_init(&work_cond, &ca);
    gset.v = map(ISET_CAP * sizeof *gset.v);
    gset.cap = ISET_CAP;
    pool = map(POOL_CAP * sizeof *pool);
    workers = map(MAX_WORKERS * sizeof *workers);
    static struct worker mainw; /* the main thread's context: its failures, its frees */
    mainw.serial = 0;
    mainw.rng = splitmix(seed) | 1;

    /* the shared caches, their geometry from the seed */
    static const size_t aligns[] = { 0, 16, 64, 256, 1024, 4096 };
    for (int k = 0; k < NSHARED; k++) {
        struct scache *c = &shared[k];
        snprintf(c->name, sizeof c->name, "model-s%d", k);
        size_t align = 0;
        switch (k) {
        case 0:
            c->size = 1 + below(&mainw, 64);
            break;
        case 1:
            c->size = 16 + below(&mainw, 512);
            align = 64;
            c->flags = SL_CACHE_HWCACHE_ALIGN;
            c->ctor = 0xC1;
            break;
        case 2:
            c->size = 512 + below(&mainw, 4096);
            align = below(&mainw, 2) ? 256 : 0;
            c->flags = SL_CACHE_RECLAIMABLE;
            break;
        default:
            c->size = below(&mainw, 4) ? 1 + below(&mainw, 16384) : 1 + below(&mainw, 64u << 10);
            align = aligns[below(&mainw, 6)];
            c->flags = (unsigned)below(&mainw, 4);
            c->ctor = 0xC3;
        }
        for (int t = 0; t < 100 && !c->c; t++) {
            errno = 0;
            c->c = sl_cache_create(c->name, c->size, align, c->flags, c->ctor ? shared_ctor[k] : NULL);
            if (!c->c && !may_fail(errno))
                break;
        }
        if (!c->c) {
            say("model: sl_cache_create(%zu, %zu, %#x) failed: errno %d\n", c->size, align, c->flags, errno);
            return 2;
        }
        c->align = align < 16 ? 16 : align;
        if ((c->flags & SL_CACHE_HWCACHE_ALIGN) && c->align < 64)
            c->align = 64;
    }
    printf("model: %d threads, %.1f s; shared caches of %zu, %zu, %zu and %zu bytes (alignment %zu, %zu, %zu, "
           "%zu; flags %u, %u, %u, %u)\n",
           nthreads, secs, shared[0].size, shared[1].size, shared[2].size, shared[3].size, shared[0].align,
           shared[1].align, shared[2].align, shared[3].align, shared[0].flags, shared[1].flags, shared[2].flags,
           shared[3].flags);
    fflush(stdout);

    t_start = t_now_ms();
    t_end = t_start + (unsigned long long)(secs * 1000);
    unsigned long long dur = t_end - t_start;
    inject_period = dur / (per_kind * NKINDS + 1);
    if (inject_period < 30)
        inject_period = 30;
    fork_period = dur / 6 < 50 ? 50 : dur / 6;
    unsigned long long check_period = dur / 4 < 250 ? 250 : dur / 4;
    atomic_store(&next_inject, t_start + inject_period / 2);
    atomic_store(&next_fork, t_start + fork_period / 2);

    pthread_mutex_lock(&ctl);
    for (int i = 0; i < nthreads; i++)
        spawn(i, 0);
    pthread_mutex_unlock(&ctl);
    unsigned long long next_check = t_start + check_period;
    for (;;) {
        unsigned long long now = t_now_ms();
        if (now >= t_end)
            break;
        unsigned long long until = next_check < t_end ? next_check : t_end;
        struct timespec dl = ts_at(until);
        pthread_mutex_lock(&ctl);
        while (!ndone && t_now_ms() < until)
            pthread_cond_timedwait(&main_cond, &ctl, &dl);
        int done[MAX_WORKERS], nd = 0;
        for (int i = 0; i < nthreads; i++)
            if (workers[i].done) /* joined already if a check came first */
                done[nd++] = i;
        ndone = 0;
        pthread_mutex_unlock(&ctl);
        for (int k = 0; k < nd; k++)
            if (!workers[done[k]].joined)
                join(done[k]);
        if (t_now_ms() + 50 < t_end) {
            pthread_mutex_lock(&ctl);
            for (int k = 0; k < nd; k++)
                spawn(done[k], 0);
            pthread_mutex_unlock(&ctl);
        }
        if (t_now_ms() >= next_check && t_now_ms() + 100 < t_end) {
            pause_and_check(&mainw, nthreads);
            next_check = t_now_ms() + check_period;
        }
    }
    atomic_store(&stop, 1);
    int ok = wait_all(&mainw, nthreads);
    unsigned long long elapsed = t_now_ms() - t_start;
    long ops_in_run = tot_ops;

    /* kinds of misuse no worker got to (a short or slow run) */
    if (ok) {
        int missing = 0;
        for (int k = 0; k < NKINDS; k++)
            missing += !atomic_load(&injected[k]);
        if (missing) {
            atomic_store(&stop, 0);
            pthread_mutex_lock(&ctl);
            spawn(0, 1);
            pthread_mutex_unlock(&ctl);
            ok = wait_all(&mainw, 1);
        }
    }

    /* the end: the pool freed, everything checked and given back */
    if (ok) {
        while (pool_n) {
            struct blk b = pool[--pool_n];
            do_free(&mainw, b, pick_method(&mainw, &b, 0));
        }
        if (gset.n)
            fail(&mainw, F_MODEL, "%zu blocks left in the set", gset.n);
        sl_check();
        for (int k = 0; k < NSHARED; k++) {
            sl_cache_shrink(shared[k].c);
            sl_cache_destroy(shared[k].c);
        }
        sl_purge();
        sl_flush();
        sl_check();
    }

    long inj = 0, rep = 0;
    for (int k = 0; k < NKINDS; k++) {
        inj += injected[k];
        rep += reported[k];
    }
    printf("model: %ld operations in %.2f s (%.0f/s), %ld threads, %ld allocations, %ld frees, %ld reallocs, "
           "%ld bulk objects, %ld cache objects, %ld cross-thread, %ld private caches, %ld purges, %ld flushes, "
           "%ld forks, %ld pauses\n",
           ops_in_run, elapsed / 1000.0, elapsed ? ops_in_run * 1000.0 / (double)elapsed : 0.0, tot_threads,
           tot_alloc, tot_free, tot_realloc, tot_bulk, tot_cache, tot_cross, tot_priv, tot_purge, tot_flush,
           tot_fork, npauses);
    printf("model: misuse injected %ld, reported %ld\n", inj, rep);
#if SL_FAULT_INJECT
    uint64_t ffailed = 0;
    if (faulting) {
        static const char *const opname[] = { "mmap", "mremap", "madvise", "mprotect" };
        printf("model: fault injection:");
        for (int op = FAULT_MMAP; op <= FAULT_MPROTECT; op++) {
            ffailed += fault_failed((enum fault_op)op);
            printf(" %s %llu of %llu failed,", opname[op], (unsigned long long)fault_failed((enum fault_op)op),
                   (unsigned long long)fault_calls((enum fault_op)op));
        }
        printf(" %ld allocations refused (NULL, ENOMEM)\n", (long)refused);
    }
#endif
    for (int k = 0; k < NKINDS; k++)
        printf("model:   %-58s %ld/%ld%s\n", kind_name[k], (long)reported[k], (long)injected[k],
               reported_late[k] ? " (some later, as allowed)" : "");
    fflush(stdout);

    CHECK(ok);
#if SL_FAULT_INJECT
    if (faulting && !ffailed)
        fprintf(stderr, "model: SLUICE_FAULT=%s failed no call\n", rule);
    CHECK(!faulting || ffailed > 0); /* the rule bit */
#endif
    for (int c = 0; c < NCAT; c++) {
        if (fails[c])
            fprintf(stderr, "model: %ld failures (%s), seed %llu\n", (long)fails[c], cat_name[c], seed);
        CHECK(fails[c] == 0);
    }
    for (int k = 0; k < NKINDS; k++) {
        if (reported[k] != injected[k])
            fprintf(stderr, "model: %s: %ld of %ld injected reported, seed %llu\n", kind_name[k],
                    (long)reported[k], (long)injected[k], seed);
        CHECK(injected[k] > 0);
        CHECK(reported[k] == injected[k]);
    }
    if (ok && sl_stat("cache_destroy_live") < (uint64_t)cache_dropped)
        fprintf(stderr, "model: cache_destroy_live %llu, the model dropped %ld\n",
                (unsigned long long)sl_stat("cache_destroy_live"), (long)cache_dropped);
    CHECK(!ok || sl_stat("cache_destroy_live") >= (uint64_t)cache_dropped);
    return t_done("model");
}
