/* An owner that idles while another thread frees its objects (redis's main
 * thread and its lazy-free thread after FLUSHALL): the slabs those frees
 * empty whole are taken back by the reclaimer (slab/notify.c) within a few
 * ticks, with no allocation by the owner, and their memory decays; a slab
 * with one object still live stays the owner's, whose objects free and
 * allocate as before; a second free of an object of a slab taken back is
 * reported; an owner's refills of another class leave the freed slabs to
 * the reclaimer (a refill takes its own class's notified slabs only). The policy (decay_owner_idle) is unit-tested in unit_decay
 * with a fake clock; here the mechanism carries it out. The main thread
 * waits with T_WAIT, which calls no malloc: a slow path of its own would
 * take the slabs back itself. Without the reclaimer's take, the first case
 * waits in vain (its slabs stay resident). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#include "sluice.h"
#include "t.h"

#define MiB (1024u * 1024u)
#define N   (120000 + 7500) /* 120,000 of 16 B and 7,500 of 1 KiB: about 9 MiB */

static void *obj[N];
static size_t nfree, keep_every; /* the freer frees obj[0, nfree) but every keep_every-th (0: none kept) */

static void *freer(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < nfree; i++)
        if (!keep_every || i % keep_every)
            sl_free(obj[i]);
    return NULL; /* its exit flushes its batch; no sl_purge: that would ask the owner to drain on its next slow path */
}

static size_t size_of(size_t i) { return i < 120000 ? 16 : 1024; }

/* 16 B objects (many to a slab) and 1 KiB ones, touched. */
static void fill(void)
{
    for (size_t i = 0; i < N; i++) {
        size_t z = size_of(i);
        obj[i] = sl_malloc(z);
        memset(obj[i], 7, z);
    }
}

static void free_elsewhere(size_t every)
{
    pthread_t t;
    nfree = N;
    keep_every = every;
    pthread_create(&t, NULL, freer, NULL);
    pthread_join(t, NULL);
}

static bool sanitized(void)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
    return true;
#endif
#endif
    return false;
}

/* Every object freed by another thread: taken back, and the memory goes. */
static void emptied(void)
{
    uint64_t base = proc_held(), taken0 = sl_stat("slab_taken_idle"), active0 = sl_stat("active_bytes");
    fill();
    uint64_t full = proc_held(), active = sl_stat("active_bytes");
    free_elsewhere(0);
    /* the owner allocates another class meanwhile: its refills take that
     * class's notified slabs only, and leave the freed ones to the reclaimer */
    static void *other[256];
    for (int i = 0; i < 256; i++)
        other[i] = sl_malloc(3000);
    /* sluice's own view: the pages in use back to about where they were;
     * sl_check all the while, back to back, while the reclaimer takes the
     * slabs and gives them to the page layer (it must never see one in
     * between: slab/notify.c) */
    CHECK(T_WAIT_EVERY(sl_check() == 0 && sl_stat("active_bytes") <= active0 + (active - active0) / 8 + (1u << 20),
                       20000, 0));
    CHECK(sl_stat("slab_taken_idle") > taken0);
    if (!sanitized()) /* the kernel's view; a sanitizer's own memory would swamp it */
        CHECK(T_WAIT(proc_held() <= base + (full - base) / 4, 20000));
    printf("emptied: %.1f MiB held before, %.1f MiB filled, %.1f MiB after; %llu slabs taken back\n",
           base / (double)MiB, full / (double)MiB, proc_held() / (double)MiB,
           (unsigned long long)(sl_stat("slab_taken_idle") - taken0));
    CHECK_EQ(sl_check(), 0);
    for (int i = 0; i < 256; i++)
        sl_free(other[i]);
}

/* One object in every 4 still live (a slab holds 4 or more): every slab
 * stays the owner's. */
static void pinned(void)
{
    fill();
    uint64_t taken0 = sl_stat("slab_taken_idle"), runs0 = sl_stat("reclaimer_runs");
    free_elsewhere(4);
    /* the reclaimer looks once a tick, and judges after one: let it look a few times */
    CHECK(T_WAIT(sl_stat("reclaimer_runs") >= runs0 + 6, 20000));
    CHECK_EQ(sl_stat("slab_taken_idle"), taken0);
    for (size_t i = 0; i < N; i += 4) { /* the owner's own, still intact */
        size_t z = size_of(i);
        CHECK(((unsigned char *)obj[i])[z - 1] == 7);
        sl_free(obj[i]);
    }
    fill(); /* the slabs come back to the owner's refills */
    for (size_t i = 0; i < N; i++)
        sl_free(obj[i]);
    CHECK_EQ(sl_check(), 0);
}

/* Child: a slab taken back, then one of its objects freed again. */
static int double_free_child(void)
{
    fill();
    free_elsewhere(0);
    if (!T_WAIT(sl_stat("slab_taken_idle") > 0, 20000))
        return 2;
    sl_free(obj[0]);
    return 0;
}

static void double_free_reported(const char *argv0)
{
    char out[4096];
    size_t len;
    int st = t_run_self(argv0, "double-free", "", out, sizeof out, &len);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(strstr(out, "sluice: ") != NULL);
    printf("a second free after the take: %s", out);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "double-free"))
        return double_free_child();
    emptied();
    pinned();
    double_free_reported(argv[0]);
    return t_done("idle_owner");
}
