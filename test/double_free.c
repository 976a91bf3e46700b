/* The free-path contract (src/slab/free_state.c): a second free of a
 * pointer is reported whatever state its first free left it in, and by
 * whichever thread, through whichever call; and a free that only looks like
 * a double free (a live block holding a freed one's bytes) is never
 * reported. One case per row of the table: the parent re-runs itself with
 * the case's name and expects SIGABRT and the line, or (the false-report
 * rows) a clean exit.
 *
 * Rows: first-free state x who frees second:
 *   magazine      the owner freed it into its magazine
 *   batch         thread U freed it, U's remote batch not yet flushed
 *   remote_bit    thread U freed it and exited: its bit is set, not taken
 *   free_list     the owner's magazine went back to the slab (sl_purge)
 *   slab_gone     its slab went back to the page layer
 * second by: owner (the allocating thread), self (U itself), other (W).
 * malloc_usable_size of a freed pointer is a misuse too, reported the
 * same way from every row (its fast path, heap_usable_fast, answers
 * only for an object that is live by its live bit and cookie; a live
 * block holding a freed one's bytes gets its size).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#define SZ 48

static void *victim;

/* ---- threads ------------------------------------------------------------ */

static void *free_victim(void *arg)
{
    (void)arg;
    sl_free(victim);
    return NULL;
}

static void *usable_victim(void *arg)
{
    (void)arg;
    (void)sl_usable_size(victim);
    return NULL;
}

/* run fn(arg) in a new thread and join it */
static void in_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) || pthread_join(t, NULL))
        abort();
}

static void wait_sem(sem_t *s)
{
    struct timespec d;
    clock_gettime(CLOCK_REALTIME, &d);
    d.tv_sec += 10;
    while (sem_timedwait(s, &d))
        if (errno != EINTR) {
            fprintf(stderr, "double_free: a thread did not answer in 10 s\n");
            _exit(4);
        }
}

/* U: frees the victim (into U's remote batch), then, if asked, frees it
 * again itself; it stays alive, so its batch is not flushed. */
static sem_t u_freed, u_again;
static int u_second;
static void *u_thread(void *arg)
{
    (void)arg;
    sl_free(victim);
    sem_post(&u_freed);
    wait_sem(&u_again);
    if (u_second) {
        if (u_second == 2)
            (void)sl_usable_size(victim);
        else
            sl_free(victim);
        sem_post(&u_freed); /* not reported */
    }
    for (;;)
        pause();
    return NULL;
}
static void start_u(void)
{
    pthread_t t;
    sem_init(&u_freed, 0, 0);
    sem_init(&u_again, 0, 0);
    if (pthread_create(&t, NULL, u_thread, NULL))
        abort();
    wait_sem(&u_freed);
}

/* a victim whose slab keeps a live neighbour (the slab is not released) */
void *double_free_keep;
static void *alloc_victim(void)
{
    double_free_keep = sl_malloc(SZ);
    return victim = sl_malloc(SZ);
}

/* ---- the cases ----------------------------------------------------------- */

static void run_case(const char *name)
{
    /* magazine */
    if (!strcmp(name, "magazine_owner")) {
        alloc_victim();
        sl_free(victim);
        sl_free(victim);
    } else if (!strcmp(name, "magazine_other")) {
        alloc_victim();
        memset(victim, 1, SZ);
        sl_free(victim);
        in_thread(free_victim, NULL);
    }
    /* batch */
    else if (!strcmp(name, "batch_owner")) {
        alloc_victim();
        start_u();
        sl_free(victim);
    } else if (!strcmp(name, "batch_self")) {
        alloc_victim();
        start_u();
        u_second = 1;
        sem_post(&u_again);
        wait_sem(&u_freed);
    } else if (!strcmp(name, "batch_other")) {
        alloc_victim();
        start_u();
        in_thread(free_victim, NULL);
    }
    /* remote bit */
    else if (!strcmp(name, "remote_bit_owner")) {
        alloc_victim();
        in_thread(free_victim, NULL); /* its exit flushes the batch */
        sl_free(victim);
    } else if (!strcmp(name, "remote_bit_other")) {
        alloc_victim();
        in_thread(free_victim, NULL);
        in_thread(free_victim, NULL);
    }
    /* free list */
    else if (!strcmp(name, "free_list_owner")) {
        alloc_victim();
        sl_free(victim);
        sl_purge(); /* the magazine goes back to the slab */
        sl_free(victim);
    } else if (!strcmp(name, "free_list_other")) {
        alloc_victim();
        sl_free(victim);
        sl_purge();
        in_thread(free_victim, NULL);
    }
    /* slab gone */
    else if (!strcmp(name, "slab_gone_owner")) {
        victim = sl_malloc(3000); /* a class of its own here: its slab empties */
        sl_free(victim);
        sl_purge();
        sl_free(victim);
    } else if (!strcmp(name, "slab_gone_other")) {
        victim = sl_malloc(3000);
        sl_free(victim);
        sl_purge();
        in_thread(free_victim, NULL);
    }
    /* the other ways back */
    else if (0) {
    } else if (!strcmp(name, "bulk_after_magazine_other")) {
        alloc_victim();
        sl_free(victim);
        void *v[1] = { victim };
        extern void *bulk_thread(void *);
        in_thread(bulk_thread, v);
    } else if (!strcmp(name, "bulk_remote_then_owner")) {
        alloc_victim();
        void *v[1] = { victim };
        extern void *bulk_thread(void *);
        in_thread(bulk_thread, v); /* its bit set at once */
        sl_free(victim);
    } else if (!strcmp(name, "realloc_after_batch")) {
        alloc_victim();
        start_u();
        (void)!sl_realloc(victim, SZ + 1);
    } else if (!strcmp(name, "usable_after_magazine")) {
        alloc_victim();
        sl_free(victim);
        (void)sl_usable_size(victim);
    } else if (!strcmp(name, "usable_after_magazine_other")) {
        alloc_victim();
        sl_free(victim);
        in_thread(usable_victim, NULL);
    } else if (!strcmp(name, "usable_after_batch_owner")) {
        alloc_victim();
        start_u();
        (void)sl_usable_size(victim);
    } else if (!strcmp(name, "usable_after_batch_self")) {
        alloc_victim();
        start_u();
        u_second = 2;
        sem_post(&u_again);
        wait_sem(&u_freed);
    } else if (!strcmp(name, "usable_after_batch_other")) {
        alloc_victim();
        start_u();
        in_thread(usable_victim, NULL);
    } else if (!strcmp(name, "usable_after_remote_bit")) {
        alloc_victim();
        in_thread(free_victim, NULL); /* its exit flushes the batch */
        (void)sl_usable_size(victim);
    } else if (!strcmp(name, "usable_after_free_list")) {
        alloc_victim();
        sl_free(victim);
        sl_purge();
        (void)sl_usable_size(victim);
    } else if (!strcmp(name, "usable_after_owner_bulk")) {
        alloc_victim(); /* no mark: the live bit tells */
        void *v[1] = { victim };
        sl_free_bulk(v, 1);
        (void)sl_usable_size(victim);
    } else if (!strcmp(name, "usable_after_slab_gone")) {
        victim = sl_malloc(3000);
        sl_free(victim);
        sl_purge();
        (void)sl_usable_size(victim);
    } else if (!strcmp(name, "usable_interior_grain")) {
        alloc_victim(); /* 16-byte aligned, in a live object, not its start */
        (void)sl_usable_size((char *)victim + 16);
    } else if (!strcmp(name, "owner_bulk_then_other")) {
        /* the owner's bulk free writes nothing into the object (no mark):
         * the other thread's free is caught by the owner's collect */
        alloc_victim();
        void *v[1] = { victim };
        sl_free_bulk(v, 1);
        in_thread(free_victim, NULL);
        sl_purge();
    }
    /* no false report: a live block that holds a freed block's bytes */
    else if (!strcmp(name, "copied_owner")) {
        char *a = sl_malloc(32), *b = sl_malloc(32);
        sl_free(a);
        memcpy(b, a, 32); /* glibc's tst-tcfree3 */
        sl_free(b);
        char *c = sl_malloc(32), *d = sl_malloc(32);
        CHECK(c != d);
        sl_free(c);
        sl_free(d);
        sl_purge();
        exit(t_fail ? 1 : 0);
    } else if (!strcmp(name, "copied_other")) {
        char *a = sl_malloc(32), *b = sl_malloc(32);
        sl_free(a);
        memcpy(b, a, 32);
        victim = b;
        in_thread(free_victim, NULL);
        sl_purge();
        exit(0);
    } else if (!strcmp(name, "copied_bulk_other")) {
        char *a = sl_malloc(32), *b = sl_malloc(32);
        sl_free(a);
        memcpy(b, a, 32);
        void *v[1] = { b };
        extern void *bulk_thread(void *);
        in_thread(bulk_thread, v);
        sl_purge();
        exit(0);
    } else if (!strcmp(name, "copied_usable")) {
        char *a = sl_malloc(32), *b = sl_malloc(32);
        sl_free(a);
        memcpy(b, a, 32); /* b's second word is the cookie: the full check finds it live */
        CHECK_EQ(sl_usable_size(b), 32);
        victim = b;
        in_thread(usable_victim, NULL); /* and so does another thread */
        sl_free(b);
        exit(t_fail ? 1 : 0);
    } else if (!strcmp(name, "copied_realloc")) {
        char *a = sl_malloc(32), *b = sl_malloc(32);
        sl_free(a);
        memcpy(b, a, 32);
        b = sl_realloc(b, 30);
        CHECK(sl_usable_size(b) >= 30);
        sl_free(b);
        exit(t_fail ? 1 : 0);
    } else {
        fprintf(stderr, "double_free: no case %s\n", name);
        exit(2);
    }
    exit(0); /* not reported */
}

void *bulk_thread(void *arg)
{
    sl_free_bulk(arg, 1);
    return NULL;
}

static void *sized_thread(void *arg)
{
    (void)arg;
    sl_free_sized(victim, SZ);
    return NULL;
}

struct expect {
    const char *name, *msg; /* msg NULL: must exit 0 */
};
static const struct expect cases[] = {
    { "magazine_owner", "sluice: double free of 0x" },
    { "magazine_other", "sluice: double free of 0x" },
    { "batch_owner", "sluice: double free of 0x" },
    { "batch_self", "sluice: double free of 0x" },
    { "batch_other", "sluice: double free of 0x" },
    { "remote_bit_owner", "sluice: double free of 0x" },
    { "remote_bit_other", "sluice: double free of 0x" },
    { "free_list_owner", "sluice: double free of 0x" },
    { "free_list_other", "sluice: double free of 0x" },
    { "slab_gone_owner", "sluice: double free of 0x" },
    { "slab_gone_other", "sluice: double free of 0x" },
    { "sized_after_magazine_other", "sluice: double free of 0x" },
    { "bulk_after_magazine_other", "sluice: double free of 0x" },
    { "bulk_remote_then_owner", "sluice: double free of 0x" },
    { "realloc_after_batch", "sluice: realloc of freed memory at 0x" },
    { "usable_after_magazine", "sluice: double free of 0x" },
    { "usable_after_magazine_other", "sluice: double free of 0x" },
    { "usable_after_batch_owner", "sluice: double free of 0x" },
    { "usable_after_batch_self", "sluice: double free of 0x" },
    { "usable_after_batch_other", "sluice: double free of 0x" },
    { "usable_after_remote_bit", "sluice: double free of 0x" },
    { "usable_after_free_list", "sluice: double free of 0x" },
    { "usable_after_owner_bulk", "sluice: double free of 0x" },
    { "usable_after_slab_gone", "sluice: double free of 0x" },
    { "usable_interior_grain", "sluice: free of an interior pointer 0x" },
    { "owner_bulk_then_other", "sluice: double free" },
    { "copied_owner", NULL },
    { "copied_other", NULL },
    { "copied_bulk_other", NULL },
    { "copied_realloc", NULL },
    { "copied_usable", NULL },
};

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (!strcmp(argv[1], "sized_after_magazine_other")) { /* the thread frees with its size */
            alloc_victim();
            sl_free(victim);
            in_thread(sized_thread, NULL);
            exit(0);
        }
        run_case(argv[1]);
    }
    char out[4096];
    size_t len;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct expect *c = &cases[i];
        int st = t_run_self(argv[0], c->name, "", out, sizeof out, &len);
        bool ok;
        if (c->msg)
            ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(out, c->msg) == out &&
                 !strchr(out, '\n')[1];
        else
            ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && len == 0;
        printf("%-28s %s%s", c->name, ok ? "ok" : "FAILED: ", ok ? "\n" : "");
        if (!ok)
            printf("status %d, stderr: %s\n", st, len ? out : "(nothing)\n");
        CHECK(ok);
    }
    return t_done("double_free");
}
