/* Death tests: each misuse prints one line naming the problem and the
 * address, then aborts. The parent re-runs itself with a case name, catches
 * stderr, and expects SIGABRT and the message. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

static char static_buf[64];
static void *shared_p;

/* Frees shared_p once the other freer is ready too (a run freed on two
 * threads at once: run_take's exchange lets one through). */
static pthread_barrier_t both_ready;
static void *free_at_once(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&both_ready);
    sl_free(shared_p);
    return NULL;
}
static void *nothing(void *arg) { return arg; }

static void *free_twice(void *arg)
{
    (void)arg;
    sl_free(shared_p);
    sl_free(shared_p);
    return NULL;
}

/* Remote frees from another thread: the NULL-ended list at arg, one by one
 * or (bulk) as one sl_free_bulk of the first three. */
static void *free_list(void *arg)
{
    void **v = arg;
    for (size_t i = 0; v[i]; i++)
        sl_free(v[i]);
    return NULL;
}
/* One batch of v[0], v[1], v[0] freed by another thread, v[0]'s second
 * word (the remote-free mark) cleared by a write after its first free, so
 * that its second free is not caught by the mark but by the batch's flush
 * (src/slab/remote_batch.c) at the thread's exit. */
static void *free_scribbled(void *arg)
{
    void **v = arg;
    sl_free(v[0]);
    sl_free(v[1]);
    ((volatile uint64_t *)v[0])[1] = 0;
    sl_free(v[0]);
    return NULL;
}
static sl_cache_t *free_cache;
static void *free_cache_list(void *arg)
{
    void **v = arg;
    for (size_t i = 0; v[i]; i++)
        sl_cache_free(free_cache, v[i]);
    return NULL;
}
/* The last object of a slab of size-byte objects whose tail (past that
 * object, to the slab's end) is in the same 1 KiB bitmap word: objects are
 * taken until the next one does not follow the last. */
static char *slab_last(size_t size)
{
    char *prev = sl_malloc(size);
    for (;;) {
        char *q = sl_malloc(size);
        if (q != prev + size) {
            if (((uintptr_t)prev >> 10) == ((uintptr_t)(prev + size) >> 10))
                return prev;
            fprintf(stderr, "death: no slab tail in the last object's bitmap word\n");
            exit(3);
        }
        prev = q;
    }
}
static void *free_two_bulk(void *arg)
{
    sl_free_bulk(arg, 2);
    return NULL;
}
static void *free_three_bulk(void *arg)
{
    sl_free_bulk(arg, 3);
    return NULL;
}
static void *free_twice_flushed(void *arg)
{
    sl_free(arg);
    sl_purge(); /* the batch's bit is set in the remote-free bitmap */
    sl_free(arg); /* still live until the owner collects: set twice */
    sl_purge();
    return NULL;
}
/* Free a fresh 64-byte object into this thread's magazine, hand it over
 * (shared_p) and stay alive, so it stays there. */
static sem_t handed;
static void *free_and_stay(void *arg)
{
    (void)arg;
    void *p = sl_malloc(64);
    sl_free(p);
    shared_p = p;
    sem_post(&handed);
    for (;;)
        pause();
    return NULL;
}
/* Allocate an object of an otherwise unused size class and exit: its slab
 * goes to the orphan list, with the object live. */
static void *alloc_and_exit(void *arg)
{
    (void)arg;
    shared_p = sl_malloc(9000);
    return NULL;
}
static void in_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_create(&t, NULL, fn, arg);
    pthread_join(t, NULL);
}
/* Two objects of `size` in different bitmap words (1 KiB apart or more). */
static void two_apart(size_t size, void **a, void **b)
{
    *a = sl_malloc(size);
    do
        *b = sl_malloc(size);
    while ((uintptr_t)*b >> 10 == (uintptr_t)*a >> 10);
}
static void ctor_none(void *p) { (void)p; }

/* free_in_handler_same_slab: another thread's 16-byte objects; this thread
 * frees the even ones in one sl_free_bulk, holding each slab's remote lock
 * for most of it, while a 20 us timer's handler frees, in bulk, one odd
 * object of every slab: it reaches the slab whose lock it interrupted.
 * Rounds of fresh objects until it lands inside (most first rounds do). */
enum { HANDLER_OBJS = 1 << 17, HANDLER_SLABS_MAX = 4096, HANDLER_ROUNDS = 1000 };
static void **handler_objs;
static void *handler_pick[HANDLER_SLABS_MAX][64];
static size_t handler_nslabs, handler_round;
static sem_t handler_req, handler_go;
static void *alloc_for_handler(void *arg)
{
    (void)arg;
    for (;;) { /* the owner stays: its slabs are remote to the main thread */
        sem_wait(&handler_req);
        for (size_t i = 0; i < HANDLER_OBJS; i++)
            handler_objs[i] = sl_malloc(16);
        sem_post(&handler_go);
    }
    return NULL;
}
static void handler_free_odd(int sig)
{
    (void)sig;
    void *v[HANDLER_SLABS_MAX];
    size_t n = 0;
    if (handler_round >= 64)
        return;
    for (size_t k = 0; k < handler_nslabs; k++)
        if (handler_pick[k][handler_round])
            v[n++] = handler_pick[k][handler_round];
    handler_round++;
    sl_free_bulk(v, n);
}
static void free_in_handler_same_slab(void)
{
    handler_objs = sl_malloc(HANDLER_OBJS * sizeof *handler_objs);
    sem_init(&handler_req, 0, 0);
    sem_init(&handler_go, 0, 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the owner never takes it */
    pthread_t t;
    pthread_create(&t, NULL, alloc_for_handler, NULL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler_free_odd;
    sigaction(SIGALRM, &sa, NULL);
    for (int round = 0; round < HANDLER_ROUNDS; round++) {
        sem_post(&handler_req);
        sem_wait(&handler_go);
        /* odd objects by page, so every slab has some: a group ends
         * where the page changes */
        memset(handler_pick, 0, sizeof handler_pick);
        handler_nslabs = handler_round = 0;
        size_t used = 0;
        for (size_t i = 1; i < HANDLER_OBJS; i += 2) {
            if (i > 1 && (uintptr_t)handler_objs[i] >> 12 != (uintptr_t)handler_objs[i - 2] >> 12) {
                if (++handler_nslabs == HANDLER_SLABS_MAX)
                    break;
                used = 0;
            }
            if (used < 64)
                handler_pick[handler_nslabs][used++] = handler_objs[i];
        }
        if (handler_nslabs < HANDLER_SLABS_MAX)
            handler_nslabs++;
        void **odd = sl_malloc(HANDLER_OBJS / 2 * sizeof *odd);
        size_t neven = 0;
        for (size_t i = 0; i < HANDLER_OBJS; i += 2) {
            odd[neven] = handler_objs[i + 1];
            handler_objs[neven++] = handler_objs[i];
        }
        struct itimerval it = { { 0, 20 }, { 0, 20 } };
        setitimer(ITIMER_REAL, &it, NULL);
        sl_free_bulk(handler_objs, neven); /* long: the handler lands inside */
        struct itimerval off = { { 0, 0 }, { 0, 0 } };
        setitimer(ITIMER_REAL, &off, NULL);
        /* the odd objects the handler did not free (the first ones of
         * each slab's run of odd objects) */
        for (size_t k = 0, i = 0; k < handler_nslabs; k++) {
            while (i < neven && odd[i] != handler_pick[k][0])
                i++;
            for (size_t r = 0; r < handler_round && i < neven && odd[i] == handler_pick[k][r]; r++)
                odd[i++] = NULL;
        }
        sl_free_bulk(odd, neven);
        sl_free(odd);
    }
}

#if SL_OVERRIDE
extern void _ZdlPvm(void *, size_t); /* operator delete(void *, size_t) */
#endif

static void run_case(const char *name)
{
    volatile char stack_buf[64];
    char *p;
    if (!strcmp(name, "free_in_handler_same_slab")) {
        free_in_handler_same_slab();
    } else if (!strcmp(name, "double_free_small")) {
        p = sl_malloc(64);
        sl_free(p);
        sl_free(p);
    } else if (!strcmp(name, "double_free_medium")) {
        p = sl_malloc(100000);
        sl_free(p);
        sl_free(p);
    } else if (!strcmp(name, "double_free_medium_threaded")) {
        /* a program that has started a thread frees runs with an exchange
         * (slab/heap_free.c run_take), one that has not with a load and a
         * store: each path reports a second free */
        pthread_t t;
        pthread_create(&t, NULL, nothing, NULL);
        pthread_join(t, NULL);
        p = sl_malloc(100000);
        sl_free(p);
        sl_free(p);
    } else if (!strcmp(name, "double_free_medium_racing")) {
        pthread_t t;
        shared_p = sl_malloc(100000);
        pthread_barrier_init(&both_ready, NULL, 2);
        pthread_create(&t, NULL, free_at_once, NULL);
        free_at_once(NULL);
        pthread_join(t, NULL);
    } else if (!strcmp(name, "realloc_freed_medium")) {
        p = sl_malloc(100000); /* a run: its liveness is its head's recorded size */
        sl_free(p);
        sl_realloc(p, 100);
    } else if (!strcmp(name, "usable_size_freed_medium")) {
        p = sl_malloc(100000);
        sl_free(p);
        sl_usable_size(p);
    } else if (!strcmp(name, "free_medium_grown_over")) {
        /* a freed run's pages taken over by a live run that grew in
         * place: freeing b again must be reported, not taken for a run */
        char *a = sl_malloc(64 << 10), *b = sl_malloc(64 << 10);
        for (int i = 0; i < 64 && b != a + (64 << 10); i++) {
            a = b; /* the others stay live, so the block stays in use */
            b = sl_malloc(64 << 10);
        }
        sl_free(b);
        sl_purge(); /* the page cache back to the shared heap: b's pages free */
        if (sl_realloc(a, 128 << 10) != a) {
            fprintf(stderr, "precondition: run %p did not grow in place over %p\n", (void *)a, (void *)b);
            _exit(3);
        }
        sl_free(b);
    } else if (!strcmp(name, "double_free_huge")) {
        p = sl_malloc(5u << 20);
        sl_free(p);
        sl_free(p);
    } else if (!strcmp(name, "double_free_huge_split")) {
        /* SLUICE_PURGE=off: nothing advised, the cached mapping stays resident */
        char *big = sl_malloc(20u << 20);
        memset(big, 1, 20u << 20);
        sl_free(big);
        p = sl_malloc(6u << 20); /* its head: the tail stays cached */
        char *tail = sl_malloc(14u << 20);
        if (p != big || tail != big + (6u << 20)) {
            fprintf(stderr, "precondition: %p and %p are not the head and tail of %p\n", p, (void *)tail, (void *)big);
            _exit(3);
        }
        sl_free(p);
        sl_free(tail);
        sl_free(tail);
    } else if (!strcmp(name, "double_free_huge_gathered")) {
        char *a = sl_malloc(4u << 20), *spacer = sl_malloc(2u << 20), *b = sl_malloc(6u << 20);
        (void)spacer; /* live: a and b are not neighbours, which would join */
        memset(a, 1, 4u << 20);
        memset(b, 2, 6u << 20);
        sl_free(a);
        sl_free(b);
        uint64_t gathers = sl_stat("huge_gather");
        p = sl_malloc(10u << 20); /* the two moved together */
        if (sl_stat("huge_gather") != gathers + 1) {
            fprintf(stderr, "precondition: %p not gathered\n", p);
            _exit(3);
        }
        sl_free(p);
        sl_free(p);
    } else if (!strcmp(name, "double_free_remote")) {
        shared_p = sl_malloc(32);
        pthread_t t;
        pthread_create(&t, NULL, free_twice, NULL);
        pthread_join(t, NULL);
        sl_purge(); /* the owner collects the remote list */
    } else if (!strcmp(name, "double_free_remote_runs")) {
        void *v[4] = { 0 };
        two_apart(32, &v[0], &v[1]);
        v[2] = v[0]; /* one batch, p twice in its word's run */
        in_thread(free_list, v);
        sl_purge();
    } else if (!strcmp(name, "double_free_remote_flush_runs")) {
        void *v[2];
        two_apart(32, &v[0], &v[1]); /* one class: the batch as it came, three runs */
        in_thread(free_scribbled, v);
        sl_purge();
    } else if (!strcmp(name, "double_free_remote_flush_classes")) {
        void *v[2] = { sl_malloc(32), sl_malloc(256) }; /* two classes: grouped, p twice in one run */
        in_thread(free_scribbled, v);
        sl_purge();
    } else if (!strcmp(name, "double_free_remote_batches")) {
        in_thread(free_twice_flushed, sl_malloc(48));
        sl_purge(); /* the second flush finds p's remote-free bit set */
    } else if (!strcmp(name, "remote_interior")) {
        void *v[2] = { (char *)sl_malloc(64) + 16, NULL };
        in_thread(free_list, v);
    } else if (!strcmp(name, "remote_interior_grain")) {
        void *v[2] = { (char *)sl_malloc(64) + 8, NULL };
        in_thread(free_list, v);
    } else if (!strcmp(name, "double_free_remote_owner")) {
        void *v[2] = { sl_malloc(64), NULL };
        in_thread(free_list, v); /* its bit waits in the remote-free bitmap */
        sl_free(v[0]);           /* still live: taken, as a double free can be */
        sl_purge();              /* the owner collects: the bit is not live */
    } else if (!strcmp(name, "double_free_remote_magazine_reused")) {
        /* p in its owner's magazine, freed again by another thread: that
         * free finds the mark, and p in the owner's magazine
         * (slab/free_state.c), and reports it there. Without the check
         * the magazine would hand p out again and the owner's collect
         * take the bit as a free of p, live under its new user. */
        void *v[2] = { sl_malloc(64), NULL };
        sl_free(v[0]);
        in_thread(free_list, v);
        sl_malloc(64);
        sl_purge();
    } else if (!strcmp(name, "double_free_bulk_remote_magazine_reused")) {
        void *v[2] = { sl_malloc(64), sl_malloc(64) };
        sl_free(v[0]); /* in the owner's magazine */
        in_thread(free_two_bulk, v);
        sl_malloc(64);
        sl_purge();
    } else if (!strcmp(name, "cache_double_free_remote_then_owner")) {
        /* a user cache's object freed by another thread (its bit set at
         * once, live until the owner takes it), then by its owner: without
         * the check the owner's free took it, it was handed out again and
         * the remote bit then freed it under its new user */
        sl_cache_t *c = sl_cache_create("then_owner", 64, 0, 0, NULL);
        void *v[2] = { sl_cache_alloc(c), NULL };
        free_cache = c;
        in_thread(free_cache_list, v);
        sl_cache_free(c, v[0]);
    } else if (!strcmp(name, "cache_double_free_remote_then_bulk")) {
        sl_cache_t *c = sl_cache_create("then_bulk", 64, 0, 0, NULL);
        void *v[2] = { sl_cache_alloc(c), NULL };
        void *w[2] = { sl_cache_alloc(c), v[0] };
        free_cache = c;
        in_thread(free_cache_list, v);
        sl_cache_free_bulk(c, 2, w);
    } else if (!strcmp(name, "double_free_remote_then_bulk")) {
        /* freed by another thread (its bit waits), then by its owner in
         * bulk (no object read), handed out again from the slab: the
         * owner's collect finds the remote bit on an object without its
         * freer's mark */
        void *v[2] = { sl_malloc(64), NULL };
        in_thread(free_list, v);
        void *w[1] = { v[0] };
        sl_free_bulk(w, 1);
        for (int i = 0; i < 200; i++)
            sl_malloc(64);
        sl_purge();
    } else if (!strcmp(name, "remote_mark_overwritten")) {
        void *v[2] = { sl_malloc(64), NULL };
        sl_malloc(64);
        in_thread(free_list, v);
        ((volatile uint64_t *)v[0])[1] = 0; /* a write after free */
        sl_purge();
    } else if (!strcmp(name, "remote_mark_overwritten_fill")) {
        /* the same, found by the collect that fills the owner's magazine
         * (its malloc's slow path: the check made as each object goes in,
         * slab.c collect_word), not by a drain's: a slab's worth freed by
         * another thread, the first one the fill takes written after its
         * free, then mallocs until the slab comes back */
        enum { N = 64 };
        static void *v[N + 1];
        uint64_t *first = NULL;
        for (int i = 0; i < N; i++) {
            v[i] = sl_malloc(64);
            if (!first || (uintptr_t)v[i] < (uintptr_t)first)
                first = v[i];
        }
        in_thread(free_list, v);
        ((volatile uint64_t *)first)[1] = 0; /* a write after free */
        for (int i = 0; i < 16 * N; i++)
            sl_malloc(64);
    } else if (!strcmp(name, "double_free_remote_owner_again")) {
        /* freed by another thread, then by the owner, handed out again,
         * and only then the remote bit taken: the owner's free sees the
         * mark at once */
        void *v[2] = { sl_malloc(64), NULL };
        in_thread(free_list, v);
        sl_free(v[0]);
        sl_malloc(64);
        sl_purge();
    } else if (!strcmp(name, "double_free_remote_release")) {
        /* a user cache (no magazine): p freed by another thread and by its
         * owner; its slab empties while another is partial, stays as a
         * spare (heap.c slab_spare_room) and is released by sl_purge before
         * the owner collects: the release takes the bit, not live */
        sl_cache_t *c = sl_cache_create("rel", 256, 0, 0, NULL);
        enum { N = 200 };
        static void *o[N];
        for (int i = 0; i < N; i++)
            o[i] = sl_cache_alloc(c);
        int k = 1; /* o[0, k): the first slab, carved in address order */
        while (k < N && (char *)o[k] == (char *)o[k - 1] + 256)
            k++;
        void *v[2] = { o[0], NULL };
        free_cache = c;
        in_thread(free_cache_list, v);
        sl_cache_free(c, o[k]); /* a second slab partial */
        sl_cache_free(c, o[0]);
        for (int i = 1; i < k; i++)
            sl_cache_free(c, o[i]);
        sl_purge();
    } else if (!strcmp(name, "bulk_remote_interior")) {
        /* an interior pointer joins the remote chain that b opens (the
         * chain checks the span and the alignment, not the live bitmap):
         * its grain's bit is set, and the owner's collect finds it not live */
        char *a = sl_malloc(64), *b = sl_malloc(64);
        void *v[2] = { a + 16, b };
        in_thread(free_two_bulk, v);
        sl_purge();
    } else if (!strcmp(name, "cache_double_free_remote")) {
        sl_cache_t *c = sl_cache_create("twice", 48, 0, 0, NULL);
        void *v[3] = { sl_cache_alloc(c), NULL, NULL };
        v[1] = v[0];
        free_cache = c;
        in_thread(free_cache_list, v); /* the second finds its remote-free bit set */
    } else if (!strcmp(name, "free_sized_double_free")) {
        p = sl_malloc(64);
        sl_free(p);
        sl_free_sized(p, 64); /* the class matches the page tag: free's own check reports it */
    } else if (!strcmp(name, "bulk_remote_revisit")) {
        void *v[3];
        two_apart(48, &v[0], &v[1]);
        v[2] = v[0]; /* back to the first word after the second */
        in_thread(free_three_bulk, v);
    } else if (!strcmp(name, "cache_bulk_remote_revisit")) {
        sl_cache_t *a = sl_cache_create("alpha", 40, 0, 0, ctor_none); /* a record per object */
        void *v[3];
        v[0] = sl_cache_alloc(a);
        do
            v[1] = sl_cache_alloc(a);
        while ((uintptr_t)v[1] >> 10 == (uintptr_t)v[0] >> 10);
        v[2] = v[0];
        in_thread(free_three_bulk, v);
    } else if (!strcmp(name, "free_stack")) {
        sl_free((void *)stack_buf);
    } else if (!strcmp(name, "free_static")) {
        sl_free(static_buf);
    } else if (!strcmp(name, "free_interior_small")) {
        p = sl_malloc(64);
        sl_free(p + 16);
    } else if (!strcmp(name, "free_interior_grain")) {
        p = sl_malloc(64);
        sl_free(p + 8); /* inside the first 16-byte grain of the object */
    } else if (!strcmp(name, "free_interior_medium")) {
        p = sl_malloc(100000);
        sl_free(p + 8192);
    } else if (!strcmp(name, "free_interior_huge")) {
        p = sl_malloc(5u << 20);
        sl_free(p + 4096);
    } else if (!strcmp(name, "free_random")) {
        sl_free((void *)(uintptr_t)0x123456789a0ull);
    } else if (!strcmp(name, "free_block_header")) {
        p = sl_malloc(64);
        sl_free((void *)((uintptr_t)p & ~(uintptr_t)((2u << 20) - 1)));
    } else if (!strcmp(name, "free_block_header_page")) {
        /* the header's pages: their descriptor slots hold the block's own
         * record, which must never be read as a run's head */
        p = sl_malloc(64);
        sl_free((void *)(((uintptr_t)p & ~(uintptr_t)((2u << 20) - 1)) + 16 * 4096));
    } else if (!strcmp(name, "realloc_stack")) {
        sl_realloc((void *)stack_buf, 100);
    } else if (!strcmp(name, "realloc_freed")) {
        p = sl_malloc(64);
        sl_free(p);
        sl_realloc(p, 100);
    } else if (!strcmp(name, "realloc_freed_other_thread")) {
        /* freed into another, live thread's magazine: its cookie tells */
        pthread_t t;
        sem_init(&handed, 0, 0);
        pthread_create(&t, NULL, free_and_stay, NULL);
        sem_wait(&handed);
        sl_realloc(shared_p, 100);
    } else if (!strcmp(name, "usable_size_freed")) {
        p = sl_malloc(64);
        sl_free(p); /* into the magazine, its live bit kept */
        sl_usable_size(p);
    } else if (!strcmp(name, "magazine_written_after_free")) {
        p = sl_malloc(64);
        sl_free(p);
        ((volatile uint64_t *)p)[1] = 0; /* the cookie */
        sl_check();
    } else if (!strcmp(name, "bulk_magazine_object")) {
        /* one freed into the magazine (live bit kept), then in a bulk free
         * behind a live one of its slab: the chain's check must see it free */
        void *v[2] = { sl_malloc(64), sl_malloc(64) };
        sl_free(v[0]);
        sl_free_bulk(v, 2);
    } else if (!strcmp(name, "bulk_magazine_opener")) {
        void *v[2] = { sl_malloc(64), sl_malloc(64) };
        sl_free(v[1]); /* the chain's first object */
        sl_free_bulk(v, 2);
    } else if (!strcmp(name, "double_free_remote_magazine")) {
        /* freed by its owner (into the magazine), then by another thread;
         * the owner's bulk allocation collects the remote frees while the
         * magazine still holds the object */
        void *v[2] = { sl_malloc(64), NULL };
        sl_free(v[0]);
        in_thread(free_list, v); /* flushed when the thread exits */
        static void *out[20000];
        sl_alloc_bulk(64, 20000, out);
    } else if (!strcmp(name, "double_free_adopted")) {
        /* p's slab is another thread's, orphaned: the free is batched; then
         * this thread adopts the slab, frees p again (its own object now,
         * into the magazine), and the batch's flush frees it as the owner */
        in_thread(alloc_and_exit, NULL);
        p = shared_p;
        sl_free(p);       /* batched: another heap's slab */
        sl_malloc(9000);  /* no slab of its own: adopts the orphan's */
        sl_free(p);       /* still live: into the magazine */
        sl_purge();       /* the flush */
    } else if (!strcmp(name, "bulk_double_free")) {
        void *objs[8];
        sl_alloc_bulk(32, 4, objs);
        objs[4] = objs[1];
        sl_free_bulk(objs, 5);
    } else if (!strcmp(name, "bulk_unlinked_double_free")) {
        void *objs[16];
        sl_alloc_bulk(64, 16, objs);
        void *p3 = objs[3];
        sl_free_bulk(objs, 16); /* unlinked: on no list, no live bit */
        sl_free(p3);
    } else if (!strcmp(name, "bulk_slab_tail") || !strcmp(name, "bulk_remote_slab_tail")) {
        /* a pointer past a slab's last object, in the same bitmap word:
         * the chain that the last object opens takes it without testing
         * the slab's span (same word, same page, same slab), and the
         * live bitmap refuses it, here or at the owner's collect */
        char *v[2] = { NULL, slab_last(48) };
        v[0] = v[1] + 48;
        if (name[5] == 'r') {
            in_thread(free_two_bulk, v);
            sl_purge();
        } else
            sl_free_bulk((void **)v, 2);
    } else if (!strcmp(name, "bulk_interior")) {
        void *objs[4];
        sl_alloc_bulk(64, 3, objs);
        objs[3] = (char *)objs[2] + 8;
        sl_free_bulk(objs, 4);
    } else if (!strcmp(name, "bulk_not_object_start")) {
        char *objs[4];
        sl_alloc_bulk(64, 3, (void **)objs);
        objs[3] = objs[0];
        objs[0] = objs[2] + 16; /* 16-aligned, inside a live object */
        sl_free_bulk((void **)objs, 4);
    } else if (!strcmp(name, "cache_wrong_cache")) {
        sl_cache_t *a = sl_cache_create("alpha", 48, 0, 0, NULL);
        sl_cache_t *b = sl_cache_create("beta", 48, 0, 0, NULL);
        sl_cache_free(b, sl_cache_alloc(a));
    } else if (!strcmp(name, "cache_malloc_object")) {
        sl_cache_t *a = sl_cache_create("alpha", 64, 0, 0, NULL);
        sl_cache_free(a, sl_malloc(64));
    } else if (!strcmp(name, "cache_huge_object")) {
        sl_cache_t *a = sl_cache_create("alpha", 64, 0, 0, NULL);
        sl_cache_free(a, sl_malloc(5u << 20));
    } else if (!strcmp(name, "cache_double_free")) {
        sl_cache_t *a = sl_cache_create("alpha", 100, 0, 0, NULL);
        p = sl_cache_alloc(a);
        sl_cache_free(a, p);
        sl_cache_free(a, p);
    } else if (!strcmp(name, "cache_foreign")) {
        sl_cache_t *a = sl_cache_create("alpha", 100, 0, 0, NULL);
        sl_cache_free(a, static_buf);
    } else if (!strcmp(name, "cache_bulk_wrong_cache")) {
        sl_cache_t *a = sl_cache_create("alpha", 40, 0, 0, NULL);
        sl_cache_t *b = sl_cache_create("beta", 40, 0, 0, NULL);
        void *objs[6];
        sl_cache_alloc_bulk(a, 5, objs);
        objs[5] = sl_cache_alloc(b);
        sl_cache_free_bulk(a, 6, objs);
    } else if (!strcmp(name, "cache_use_after_destroy")) {
        sl_cache_t *a = sl_cache_create("alpha", 40, 0, 0, NULL);
        p = sl_cache_alloc(a);
        sl_cache_destroy(a);
        sl_free(p); /* its memory went with the cache */
    } else if (!strcmp(name, "free_sized_wrong")) {
        p = sl_malloc(100);
        sl_free_sized(p, 4000);
    } else if (!strcmp(name, "free_sized_run_off_by_ten")) {
        p = sl_malloc(40000); /* a page run records the size asked for */
        sl_free_sized(p, 39990);
    } else if (!strcmp(name, "free_sized_after_realloc")) {
        p = sl_malloc(40000);
        p = sl_realloc(p, 50000); /* grown in place or moved: 50000 now */
        sl_free_sized(p, 40000);
    } else if (!strcmp(name, "free_sized_huge_off_by_one")) {
        p = sl_malloc(3u << 20);
        sl_free_sized(p, (3u << 20) - 1);
    } else if (!strcmp(name, "zero_double_free")) {
        p = sl_malloc(0);
        sl_free(p);
        sl_free(p);
    } else if (!strcmp(name, "zero_interior")) {
        p = sl_calloc(3, 0);
        sl_free(p + 8);
    } else if (!strcmp(name, "zero_realloc_freed")) {
        p = sl_malloc(0);
        sl_free(p);
        sl_realloc(p, 10);
    } else if (!strcmp(name, "zero_free_sized_wrong")) {
        sl_free_sized(sl_malloc(0), 1);
    } else if (!strcmp(name, "cache_zero_object")) {
        sl_cache_t *a = sl_cache_create("alpha", 64, 0, 0, NULL);
        sl_cache_free(a, sl_malloc(0));
    } else if (!strcmp(name, "zero_read")) {
        p = sl_malloc(0);
        stack_buf[0] = *(volatile char *)p;
    } else if (!strcmp(name, "zero_write_after_free")) {
        p = sl_malloc(0);
        sl_free(p);
        *(volatile char *)p = 1;
#if SL_OVERRIDE
    } else if (!strcmp(name, "delete_sized_wrong")) {
        p = sl_malloc(24);
        _ZdlPvm(p, 200);
#endif
    }
    _exit(0); /* reaching here means the misuse went unnoticed */
}

struct expect {
    const char *name, *message; /* message NULL: a fault (SIGSEGV), no line */
};

/* Settings for a case's process: the huge cases that need freed mappings
 * kept resident (no drop advises them), so that they are split and
 * gathered. */
static const char *case_env(const char *name)
{
    return !strcmp(name, "double_free_huge_split") || !strcmp(name, "double_free_huge_gathered") ? "SLUICE_PURGE=off"
                                                                                                 : "";
}

static const struct expect cases[] = {
    { "double_free_small", "sluice: double free of 0x" },
    { "double_free_medium", "sluice: double free of 0x" },
    { "double_free_medium_threaded", "sluice: double free of 0x" },
    { "double_free_medium_racing", "sluice: double free of 0x" },
    { "double_free_huge", "sluice: double free of 0x" },
    { "double_free_huge_split", "sluice: double free of 0x" },
    { "double_free_huge_gathered", "sluice: double free of 0x" },
    { "realloc_freed_medium", "sluice: realloc of freed memory at 0x" },
    { "usable_size_freed_medium", "sluice: double free of 0x" },
    { "free_medium_grown_over", "sluice: free of an interior pointer 0x" },
    { "double_free_remote", "sluice: double free of 0x" },
    { "double_free_remote_runs", "sluice: double free of 0x" },
    { "double_free_remote_flush_runs", "sluice: double free of 0x" },
    { "double_free_remote_flush_classes", "sluice: double free of 0x" },
    { "double_free_remote_batches", "sluice: double free of 0x" },
    { "remote_interior", "sluice: free of an interior pointer 0x" },
    { "remote_interior_grain", "sluice: free of an interior pointer 0x" },
    { "double_free_remote_owner", "sluice: double free of 0x" },
    { "double_free_remote_magazine_reused", "sluice: double free of 0x" },
    { "double_free_bulk_remote_magazine_reused", "sluice: double free of 0x" },
    { "double_free_remote_owner_again", "sluice: double free of 0x" },
    { "double_free_remote_then_bulk", "sluice: double free (or write after free) of 0x" },
    { "cache_double_free_remote_then_owner", "sluice: double free of 0x" },
    { "cache_double_free_remote_then_bulk", "sluice: double free of 0x" },
    { "remote_mark_overwritten", "sluice: double free (or write after free) of 0x" },
    { "remote_mark_overwritten_fill", "sluice: double free (or write after free) of 0x" },
    { "double_free_remote_release", "sluice: double free of 0x" },
    { "bulk_remote_interior", "sluice: free of an interior pointer 0x" },
    { "cache_double_free_remote", "sluice: double free of 0x" },
    { "free_sized_double_free", "sluice: double free of 0x" },
    { "bulk_remote_revisit", "sluice: double free of 0x" },
    { "cache_bulk_remote_revisit", "sluice: double free of 0x" },
    { "free_stack", "sluice: free of a pointer sluice did not allocate: 0x" },
    { "free_static", "sluice: free of a pointer sluice did not allocate: 0x" },
    { "free_interior_small", "sluice: free of an interior pointer 0x" },
    { "free_interior_grain", "sluice: free of an interior pointer 0x" },
    { "free_interior_medium", "sluice: free of an interior pointer 0x" },
    { "free_interior_huge", "sluice: free of an interior pointer 0x" },
    { "free_random", "sluice: free of a pointer sluice did not allocate: 0x123456789a0" },
    { "free_block_header", "sluice: free of a pointer sluice did not allocate: 0x" },
    { "free_block_header_page", "sluice: free of a pointer sluice did not allocate: 0x" },
    { "realloc_stack", "sluice: realloc of a pointer sluice did not allocate: 0x" },
    { "realloc_freed", "sluice: realloc of freed memory at 0x" },
    { "realloc_freed_other_thread", "sluice: realloc of freed memory at 0x" },
    { "usable_size_freed", "sluice: double free of 0x" },
    { "magazine_written_after_free", "sluice: sl_check: object in a magazine was written after its free: 0x" },
    { "bulk_magazine_object", "sluice: double free of 0x" },
    { "bulk_magazine_opener", "sluice: double free of 0x" },
    { "double_free_remote_magazine", "sluice: double free of 0x" },
    { "double_free_adopted", "sluice: double free of 0x" },
    { "bulk_double_free", "sluice: double free of 0x" },
    { "bulk_unlinked_double_free", "sluice: double free of 0x" },
    { "bulk_interior", "sluice: free of an interior pointer 0x" },
    { "bulk_slab_tail", "sluice: free of an interior pointer 0x" },
    { "bulk_remote_slab_tail", "sluice: free of an interior pointer 0x" },
    { "bulk_not_object_start", "sluice: free of an interior pointer 0x" },
    { "cache_wrong_cache", "sluice: sl_cache_free to cache 'beta' of 0x" },
    { "cache_malloc_object", "(a malloc object of size class 64)" },
    { "cache_huge_object", "sluice: sl_cache_free to cache 'alpha' of 0x" },
    { "cache_double_free", "sluice: double free of 0x" },
    { "cache_foreign", "sluice: free of a pointer sluice did not allocate: 0x" },
    { "cache_bulk_wrong_cache", "(an object of cache 'beta')" },
    { "cache_use_after_destroy", "sluice: double free of 0x" },
    { "free_sized_wrong", "sluice: sized free with the wrong size: 0x" },
    { "free_sized_run_off_by_ten", "sluice: sized free with the wrong size: 0x" },
    { "free_sized_after_realloc", "sluice: sized free with the wrong size: 0x" },
    { "free_sized_huge_off_by_one", "sluice: sized free with the wrong size: 0x" },
    { "zero_double_free", "sluice: double free of 0x" },
    { "zero_interior", "sluice: free of an interior pointer 0x" },
    { "zero_realloc_freed", "sluice: realloc of freed memory at 0x" },
    { "zero_free_sized_wrong", "sluice: sized free with the wrong size: 0x" },
    { "cache_zero_object", "sluice: sl_cache_free to cache 'alpha' of 0x" },
    { "free_in_handler_same_slab", "sluice: malloc or free from a signal handler that interrupted sluice inside the same slab: 0x" },
    { "zero_read", NULL },
    { "zero_write_after_free", NULL },
#if SL_OVERRIDE
    { "delete_sized_wrong", "sluice: sized free with the wrong size: 0x" },
#endif
};

int main(int argc, char **argv)
{
    if (argc > 1) {
        run_case(argv[1]);
        return 0;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[1024];
        size_t n;
        int status = t_run_self(argv[0], cases[i].name, case_env(cases[i].name), out, sizeof out, &n);
        const char *m = cases[i].message;
        int aborted = WIFSIGNALED(status) && WTERMSIG(status) == (m ? SIGABRT : SIGSEGV);
        int said = m ? strstr(out, m) != NULL : n == 0;
        int one_line = m ? n > 0 && strchr(out, '\n') == out + n - 1 : 1;
        if (!aborted || !said || !one_line)
            fprintf(stderr, "case %s: aborted=%d message=%d one_line=%d stderr: %s\n", cases[i].name, aborted,
                    said, one_line, out);
        CHECK(aborted && said && one_line);
    }
    return t_done("death");
}
