/* Randomised stress under injected failures (fault.h): several threads run
 * the whole malloc family, the bulk calls and object caches while mmap,
 * mremap, madvise and mprotect fail by rule (probability, every Nth, exhaustion),
 * with cross-thread frees, thread exits between phases and fork. Every
 * live block carries a pattern derived from its address and size, checked
 * before every free and realloc and at the end; every failure must be
 * NULL with errno ENOMEM and leave the old block intact; sl_check runs
 * between phases; at the end everything is freed and nothing may be left.
 *
 * Runs each purge mode, and the checked mode, in a child of its own
 * (re-executing itself).
 * FAULT_STRESS_SECONDS sets the time per mode (default 4).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/os/fault.h"
#include "sluice.h"
#include "t.h"

#define THREADS 3
#define SLOTS   384
#define MAILBOX 64

struct blk {
    uint8_t *p;
    size_t size;
    int cache; /* -1: malloc family, else index into caches[] */
    size_t align; /* aligned allocations: freed with sl_free_aligned_sized */
};

static struct blk tables[THREADS][SLOTS];
static sl_cache_t *caches[3];
static const size_t cache_size[3] = { 24, 200, 3000 };
static _Atomic(struct blk *) mailbox[MAILBOX];
static struct blk mail_store[MAILBOX];
static _Atomic int mail_lock;
static _Atomic long failures, ops, forks;
static double phase_end;
static int mode_fork;
static int in_child; /* a fork child: the mailbox lock may be held by a thread gone */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- patterns ------------------------------------------------------------ */

static uint8_t pat(uintptr_t base, size_t size, size_t i)
{
    uint64_t x = (base >> 4) * 0x9e3779b97f4a7c15ull ^ size * 0xbf58476d1ce4e5b9ull ^ (i >> 3) * 0x94d049bb133111ebull;
    return (uint8_t)((x >> 32) + i);
}

/* Positions patterned: every byte of the first and last 4 KiB, one byte per
 * 512 between (a huge block stays cheap to fill and check). */
#define FOR_POSITIONS(size, i)                                                      \
    for (size_t i = 0; i < (size); i = (i < 4096 || i + 4096 >= (size)) ? i + 1 \
                                         : (i + 512 < (size) - 4096 ? i + 512 : (size) - 4096))

static void fill(uint8_t *p, size_t size)
{
    FOR_POSITIONS(size, i) p[i] = pat((uintptr_t)p, size, i);
}

/* Check the first `upto` bytes of p against the pattern block (base, size). */
static void verify_as(const uint8_t *p, uintptr_t base, size_t size, size_t upto, const char *when)
{
    FOR_POSITIONS(size, i) if (i < upto && p[i] != pat(base, size, i))
    {
        fprintf(stderr, "fault_stress: %s: block %p (%zu bytes) corrupt at byte %zu\n", when, (void *)p, size, i);
        abort();
    }
}

static void verify(const struct blk *b, const char *when) { verify_as(b->p, (uintptr_t)b->p, b->size, b->size, when); }

static void failed(void)
{
    if (errno != ENOMEM) {
        fprintf(stderr, "fault_stress: a failure with errno %d, not ENOMEM\n", errno);
        abort();
    }
    failures++;
}

/* ---- operations ---------------------------------------------------------- */

static size_t rand_size(unsigned long long *s)
{
    unsigned r = (unsigned)(t_rand(s) % 100);
    if (r < 70)
        return 1 + t_rand(s) % 1024;
    if (r < 90)
        return 1024 + t_rand(s) % (64 << 10);
    if (r < 98)
        return (64 << 10) + t_rand(s) % (1 << 20);
    return (1 << 20) + t_rand(s) % (6 << 20);
}

static void release(struct blk *b)
{
    verify(b, "before free");
    if (b->cache >= 0)
        sl_cache_free(caches[b->cache], b->p);
    else if (b->align)
        sl_free_aligned_sized(b->p, b->align, b->size);
    else if (b->size & 1)
        sl_free_sized(b->p, b->size);
    else
        sl_free(b->p);
    b->p = NULL;
}

static void set(struct blk *b, void *p, size_t size, int cache, size_t align)
{
    b->p = p;
    b->size = size;
    b->cache = cache;
    b->align = align;
    fill(b->p, size);
}

static void one_op(struct blk *tab, unsigned long long *s)
{
    struct blk *b = &tab[t_rand(s) % SLOTS];
    unsigned op = (unsigned)(t_rand(s) % 16);
    errno = 0;
    ops++;
    if (b->p && op < 9) {
        if (op == 0 && b->cache < 0) { /* realloc: a huge block mostly stays huge (mremap) */
            size_t n = rand_size(s);
            if (b->size > (1 << 20) && t_rand(s) % 2)
                n = (1 << 20) + t_rand(s) % (8 << 20);
            uint8_t *old = b->p;
            size_t old_size = b->size;
            uint8_t *q = sl_realloc(old, n);
            if (!q) {
                failed();
                verify(b, "after a failed realloc");
                return;
            }
            verify_as(q, (uintptr_t)old, old_size, old_size < n ? old_size : n, "after realloc");
            set(b, q, n, -1, 0);
            return;
        }
        if (op == 1 && !in_child) { /* hand it to another thread through the mailbox */
            unsigned k = (unsigned)(t_rand(s) % MAILBOX);
            while (atomic_exchange(&mail_lock, 1))
                ;
            if (!atomic_load(&mailbox[k])) {
                mail_store[k] = *b;
                atomic_store(&mailbox[k], &mail_store[k]);
                b->p = NULL;
            }
            atomic_store(&mail_lock, 0);
            if (!b->p)
                return;
        }
        release(b);
        return;
    }
    if (b->p)
        return;
    size_t n = rand_size(s);
    void *p = NULL;
    int cache = -1;
    size_t align = 0;
    switch (op) {
    case 9:
    case 10:
        p = sl_malloc(n);
        break;
    case 11: {
        uint8_t *z = sl_calloc(1, n);
        if (z)
            for (size_t i = 0; i < n; i += 61)
                if (z[i]) {
                    fprintf(stderr, "fault_stress: calloc of %zu not zero at %zu\n", n, i);
                    abort();
                }
        p = z;
        break;
    }
    case 12: {
        align = (size_t)16 << (t_rand(s) % 9); /* 16 .. 4096, and 2 MiB below */
        if (n > (1 << 20) && t_rand(s) % 2)
            align = 2 << 20;
        if (t_rand(s) % 2)
            p = sl_aligned_alloc(align, n);
        else if (sl_posix_memalign(&p, align, n))
            p = NULL, errno = ENOMEM;
        if (p && ((uintptr_t)p & (align - 1))) {
            fprintf(stderr, "fault_stress: misaligned %p for %zu\n", p, align);
            abort();
        }
        break;
    }
    case 13: { /* bulk: fill the free slots of a stretch of the table */
        void *v[32];
        size_t size = 1 + t_rand(s) % 512, k = 1 + t_rand(s) % 32;
        if (!sl_alloc_bulk(size, k, v)) {
            failed();
            return;
        }
        for (size_t i = 0; i < k; i++) {
            fill(v[i], size);
            struct blk tmp = { v[i], size, -1, 0 };
            if (i == 0 && !b->p) {
                *b = tmp;
                continue;
            }
            verify(&tmp, "bulk");
        }
        sl_free_bulk(v + 1, k - 1);
        return;
    }
    default: { /* object caches */
        cache = (int)(t_rand(s) % 3);
        n = cache_size[cache];
        if (op == 14) {
            void *v[16];
            size_t k = 1 + t_rand(s) % 16;
            if (!sl_cache_alloc_bulk(caches[cache], k, v)) {
                failed();
                return;
            }
            p = v[0];
            sl_cache_free_bulk(caches[cache], k - 1, v + 1);
        } else {
            p = sl_cache_alloc(caches[cache]);
        }
    }
    }
    if (!p) {
        failed();
        return;
    }
    set(b, p, n, cache, align);
}

static void take_mail(unsigned long long *s)
{
    unsigned k = (unsigned)(t_rand(s) % MAILBOX);
    struct blk b = { NULL, 0, -1, 0 };
    while (atomic_exchange(&mail_lock, 1))
        ;
    struct blk *m = atomic_exchange(&mailbox[k], NULL);
    if (m)
        b = *m;
    atomic_store(&mail_lock, 0);
    if (b.p)
        release(&b); /* often another thread's object: a remote free */
}

static void child_after_fork(struct blk *tab, unsigned long long *s)
{
    in_child = 1;
    alarm(60); /* a hang fails the test instead of spinning */
    for (int i = 0; i < SLOTS; i++)
        if (tab[i].p)
            verify(&tab[i], "in a fork child");
    for (int i = 0; i < 2000; i++)
        one_op(tab, s);
    sl_check(); /* the other threads' heaps are orphans here */
    _exit(0);
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    unsigned long long seed = 0x1234567ull * (unsigned long long)(me + 1) + (unsigned long long)time(NULL);
    struct blk *tab = tables[me];
    while (now_s() < phase_end) {
        for (int i = 0; i < 64; i++)
            one_op(tab, &seed);
        take_mail(&seed);
        if (mode_fork && me == 0 && t_rand(&seed) % 64 == 0) {
            pid_t pid = fork();
            if (pid == 0)
                child_after_fork(tab, &seed);
            int status = 0;
            if (pid > 0 && (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))) {
                fprintf(stderr, "fault_stress: fork child failed (status %d)\n", status);
                abort();
            }
            forks++;
        }
    }
    return NULL;
}

/* With every mmap refused, exhaustion must end in NULL and ENOMEM. The
 * workers may not reach it: the fallbacks (parked runs given back before a
 * retry, a piece of another type's block, memory kept free with purging
 * off) can absorb every refusal a phase meets. So keep allocating, and hold
 * what comes back, until malloc fails; then give it all back. */
static void exhaust_until_enomem(void)
{
    static const size_t sizes[] = { 3 << 20, 300000, 5000, 48 };
    void *held = NULL; /* a list threaded through the blocks themselves */
    size_t bytes = 0;
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (;;) {
            CHECK(bytes < (64ull << 30)); /* far more than a phase maps */
            errno = 0;
            void **p = sl_malloc(sizes[s]);
            if (!p) {
                CHECK(errno == ENOMEM);
                break;
            }
            *p = held;
            held = p;
            bytes += sizes[s];
        }
    }
    while (held) {
        void *next = *(void **)held;
        sl_free(held);
        held = next;
    }
}

static void phase(const char *rule, double seconds, int with_fork)
{
    fault_config(rule);
    mode_fork = with_fork;
    phase_end = now_s() + seconds;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL); /* the heaps become orphans, the next phase adopts */
    if (rule && *rule && strstr(rule, "mmap") && strstr(rule, "after"))
        exhaust_until_enomem();
    uint64_t failed_calls = fault_failed(FAULT_MMAP) + fault_failed(FAULT_MREMAP) + fault_failed(FAULT_MADVISE) +
                            fault_failed(FAULT_MPROTECT);
    fault_config(NULL);
    CHECK(sl_check() == 0);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < SLOTS; i++)
            if (tables[t][i].p)
                verify(&tables[t][i], "between phases");
    printf("  %-28s %8ld ops %6ld failures %6llu injected\n", rule && *rule ? rule : "(none)", (long)ops,
           (long)failures, (unsigned long long)failed_calls);
    fflush(stdout);
    ops = failures = 0;
}

/* The first malloc(0) makes a zone of zero-size slots (a PROT_NONE
 * reservation): with mmap refused it must fail cleanly, NULL and ENOMEM,
 * and work once mmap works again. */
static void zero_size_zone_refused(void)
{
    fault_config("mmap:after=0");
    errno = 0;
    void *p = sl_malloc(0);
    CHECK(p == NULL && errno == ENOMEM);
    fault_config(NULL);
    p = sl_malloc(0);
    CHECK(p != NULL);
    sl_free(p);
}

/* A thread that can get no heap (mmap refused and the metadata arena
 * full: no orphan heap to take over) frees another thread's objects, one
 * by one and in bulk: each goes to its slab's remote-free bitmap under
 * the lock fork takes for heapless threads (heap.c), and the owner takes
 * them back: once it has exited and sl_purge ran, every page is given
 * back (had a bit been lost, its slab would stay). Holder threads keep
 * their heaps until one is refused. */
enum { HOLDERS_MAX = 64, HEAPLESS_OBJS = 64 };
static sem_t holder_done, holder_go;
static void *heapless_objs[HEAPLESS_OBJS];
static void *holder(void *arg)
{
    (void)arg;
    void *p = sl_malloc(16); /* gets a heap if it can */
    sem_post(&holder_done);
    sem_wait(&holder_go);
    sl_free(p);
    return NULL;
}
static void *heapless_owner(void *arg)
{
    (void)arg;
    for (int i = 0; i < HEAPLESS_OBJS; i++)
        heapless_objs[i] = sl_malloc(48);
    return NULL;
}
static _Atomic int heapless_errno_changed;
static void *heapless_free(void *arg)
{
    (void)arg;
    for (int i = 0; i < HEAPLESS_OBJS / 2; i++) {
        errno = EDOM; /* a free leaves errno alone, even where it could get no heap */
        if (i % 2)
            sl_free_sized(heapless_objs[i], 48);
        else
            sl_free(heapless_objs[i]);
        if (errno != EDOM)
            atomic_store(&heapless_errno_changed, 1);
    }
    errno = EDOM;
    sl_free_bulk(heapless_objs + HEAPLESS_OBJS / 2, HEAPLESS_OBJS / 2);
    if (errno != EDOM)
        atomic_store(&heapless_errno_changed, 1);
    return NULL;
}
static void heapless_remote_free(void)
{
    sl_purge();
    uint64_t active = sl_stat("active_bytes");
    pthread_t owner, t, h[HOLDERS_MAX];
    pthread_create(&owner, NULL, heapless_owner, NULL);
    pthread_join(owner, NULL); /* its heap is an orphan: the objects stay in its slab */
    sem_init(&holder_done, 0, 0);
    sem_init(&holder_go, 0, 0);
    fault_config("mmap:after=0");
    int n = 0;
    uint64_t heaps = sl_stat("heap_new") + sl_stat("heap_reuse");
    for (; n < HOLDERS_MAX; n++) {
        pthread_create(&h[n], NULL, holder, NULL);
        sem_wait(&holder_done);
        if (sl_stat("heap_new") + sl_stat("heap_reuse") == heaps)
            break; /* this one has no heap */
        heaps = sl_stat("heap_new") + sl_stat("heap_reuse");
    }
    CHECK(n < HOLDERS_MAX);
    uint64_t remote = sl_stat("free_remote");
    pthread_create(&t, NULL, heapless_free, NULL); /* no heap either */
    pthread_join(t, NULL);
    CHECK(!atomic_load(&heapless_errno_changed));
    CHECK_EQ(sl_stat("heap_new") + sl_stat("heap_reuse"), heaps);
    const char *checked = getenv("SLUICE_CHECK"), *prof = getenv("SLUICE_PROF");
    /* the checked mode holds frees back in quarantine; a sampled object is
     * a page run of its own, whose free is no remote free */
    if ((!checked || strcmp(checked, "1")) && !(prof && *prof))
        CHECK_EQ(sl_stat("free_remote") - remote, HEAPLESS_OBJS);
    for (int i = 0; i <= n && i < HOLDERS_MAX; i++)
        sem_post(&holder_go);
    for (int i = 0; i <= n && i < HOLDERS_MAX; i++)
        pthread_join(h[i], NULL);
    fault_config(NULL);
    CHECK(sl_check() == 0);
    sl_purge();
    CHECK_EQ(sl_stat("active_bytes"), active);
}

static int run_mode(double seconds)
{
    zero_size_zone_refused();
    heapless_remote_free();
    for (int i = 0; i < 3; i++)
        caches[i] = sl_cache_create("stress", cache_size[i], 0, i == 2 ? SL_CACHE_RECLAIMABLE : 0, NULL);
    double each = seconds / 9;
    phase("", each, 0);
    phase("mmap:p=0.2:seed=7", each, 1);
    phase("madvise:p=0.5:seed=9", each, 0);
    phase("mremap:p=0.5:seed=11", each, 0);
    phase("mprotect:p=0.5:seed=17", each, 1); /* a block's lazy commit refused */
    phase("all:p=0.1:seed=13", each, 1);
    phase("mmap:every=3", each, 0);
    phase("mmap:after=40", each, 0); /* the address space is gone: ENOMEM everywhere */
    phase("", each, 1);             /* and it works again */
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < SLOTS; i++)
            if (tables[t][i].p)
                release(&tables[t][i]);
    for (int k = 0; k < MAILBOX; k++) {
        struct blk *m = atomic_exchange(&mailbox[k], NULL);
        if (m)
            release(m);
    }
    for (int i = 0; i < 3; i++)
        sl_cache_destroy(caches[i]);
    CHECK_EQ(sl_stat("cache_destroy_live"), 0); /* every cache object was freed */
    sl_purge();
    CHECK(sl_check() == 0);
    CHECK_EQ(sl_stat("huge_live_bytes"), 0);
    CHECK_EQ(sl_stat("active_bytes"), 0); /* nothing lost: every page came back */
    printf("  forks %ld\n", (long)forks);
    return t_done("fault_stress mode");
}

int main(int argc, char **argv)
{
    double seconds = getenv("FAULT_STRESS_SECONDS") ? atof(getenv("FAULT_STRESS_SECONDS")) : 4;
    if (argc > 1)
        return run_mode(seconds);
    /* purge mode, dirty decay, lazy decay, SLUICE_CHECK, SLUICE_PROF_SAMPLE (profiling on unless
     * empty: every malloc family's sampled path, sl_alloc_bulk's among them, meets the faults) */
    static const char *const modes[][5] = { { "free", "10", "100", "0", "" },
                                            { "dontneed", "10", "100", "0", "" },
                                            { "off", "1000", "10000", "0", "" },
                                            { "free", "0", "5", "0", "" },
                                            { "free", "10", "100", "1", "" },
                                            { "free", "10", "100", "0", "2048" } };
    for (unsigned m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        printf("SLUICE_PURGE=%s SLUICE_DIRTY_DECAY_MS=%s SLUICE_LAZY_DECAY_MS=%s SLUICE_CHECK=%s%s%s\n", modes[m][0],
               modes[m][1], modes[m][2], modes[m][3], *modes[m][4] ? " SLUICE_PROF=/dev/null SLUICE_PROF_SAMPLE=" : "",
               modes[m][4]);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("SLUICE_PURGE", modes[m][0], 1);
            setenv("SLUICE_DIRTY_DECAY_MS", modes[m][1], 1);
            setenv("SLUICE_LAZY_DECAY_MS", modes[m][2], 1);
            setenv("SLUICE_CHECK", modes[m][3], 1);
            if (*modes[m][4]) {
                setenv("SLUICE_PROF", "/dev/null", 1);
                setenv("SLUICE_PROF_SAMPLE", modes[m][4], 1);
            }
            execl(argv[0], argv[0], "mode", (char *)NULL);
            _exit(127);
        }
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return t_done("fault_stress");
}
