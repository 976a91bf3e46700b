/* A thread's exit gives back what it held, whatever way its heap came to
 * hold it, though it visits only the cache ids and magazines it used
 * (slab/heap.h: ids_held, mags_held):
 *   - objects of several malloc classes freed into its magazines, in both
 *     words of the bitmaps (classes below 64 and above);
 *   - FULL malloc slabs left behind by an earlier thread of the same heap
 *     record (taken over whole), whose objects another thread frees: they
 *     come back through the notify stack, onto a class the heap no longer
 *     marks;
 *   - an object cache's slabs, one by one and on its full list (woken by
 *     remote frees after the owner left).
 * After each exit the class's or cache's slabs are gone and its counts add
 * up (allocations - frees == objects_active == 0); sl_check passes (it
 * checks that every slab a heap holds is of a marked id). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sluice.h"
#include "t.h"

/* The workers check nothing themselves (t.h's counts are the main
 * thread's): what they see is kept and checked after the join. */
static _Atomic int ctl_errors;
static uint64_t field(const char *cache, const char *name)
{
    char key[96];
    uint64_t v = 0;
    size_t len = sizeof v;
    snprintf(key, sizeof key, "cache.%s.%s", cache, name);
    int err = sl_ctl(key, &v, &len, NULL, 0);
    if (err) {
        fprintf(stderr, "sl_ctl(%s): %d\n", key, err);
        ctl_errors++;
    }
    return v;
}

/* The row's counts when a thread began with it: what it must add. */
struct base {
    char name[48];
    uint64_t allocations, frees;
};
/* Name the malloc class of p (just allocated, the class's first use by
 * this thread) and take its counts less that allocation. */
static void base_of_class(struct base *b, void *p)
{
    snprintf(b->name, sizeof b->name, "malloc-%zu", sl_usable_size(p));
    b->allocations = field(b->name, "allocations") - 1;
    b->frees = field(b->name, "frees");
}

/* Nothing of the row is held: no slab, nothing active, and n objects more
 * handed out and given back since b. */
static void check_gone(const struct base *b, uint64_t n)
{
    uint64_t slabs = field(b->name, "slabs_total"), active = field(b->name, "objects_active");
    uint64_t a = field(b->name, "allocations") - b->allocations, f = field(b->name, "frees") - b->frees;
    if (slabs || active || a != n || f != n)
        fprintf(stderr, "%s: %llu slabs, %llu active, %llu allocated, %llu freed (expected %llu)\n", b->name,
                (unsigned long long)slabs, (unsigned long long)active, (unsigned long long)a,
                (unsigned long long)f, (unsigned long long)n);
    CHECK_EQ(slabs, 0);
    CHECK_EQ(active, 0);
    CHECK_EQ(a, n);
    CHECK_EQ(f, n);
}

static void run(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fn, arg), 0);
    pthread_join(t, NULL);
}

/* ---- magazines of several classes ------------------------------------- */

#define NSIZES 6
static const size_t sizes[NSIZES] = { 1200, 1700, 2400, 4700, 11000, 28000 };
#define PER_SIZE 3
static struct base mag_base[NSIZES];

static void *use_magazines(void *arg)
{
    (void)arg;
    void *p[NSIZES][PER_SIZE];
    for (int i = 0; i < NSIZES; i++) {
        for (int j = 0; j < PER_SIZE; j++) {
            p[i][j] = sl_malloc(sizes[i]);
            memset(p[i][j], 1, sizes[i]);
        }
        base_of_class(&mag_base[i], p[i][0]);
        mag_base[i].allocations -= PER_SIZE - 1;
    }
    for (int i = 0; i < NSIZES; i++)
        for (int j = 0; j < PER_SIZE; j++)
            sl_free(p[i][j]); /* into its magazine: live bit kept, its slab not empty */
    return NULL;
}

static void test_magazines(void)
{
    run(use_magazines, NULL);
    for (int i = 0; i < NSIZES; i++) {
        for (int j = 0; j < i; j++)
            CHECK(strcmp(mag_base[i].name, mag_base[j].name) != 0); /* six classes */
        check_gone(&mag_base[i], PER_SIZE);
    }
}

/* ---- FULL slabs of a heap taken over, freed by another thread ---------- */

#define FULL_SLABS 3
static void **objs;
static size_t nobjs;
static struct base full_base;
static uint64_t slabs_while_filled;

/* Fill FULL_SLABS slabs of one class and one object of the next slab,
 * which it frees: at its exit the heap holds the class's FULL slabs only,
 * on no list, so the class is no longer marked. */
static void *fill_full_slabs(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void *first = sl_malloc(size);
    base_of_class(&full_base, first);
    uint64_t per = field(full_base.name, "objects_total"); /* one slab so far */
    nobjs = FULL_SLABS * per;
    objs = sl_malloc(nobjs * sizeof *objs);
    objs[0] = first;
    for (size_t i = 1; i < nobjs; i++)
        objs[i] = sl_malloc(size);
    void *next = sl_malloc(size); /* the first of a new slab: the others are FULL */
    slabs_while_filled = field(full_base.name, "slabs_total");
    sl_free(next);
    return NULL;
}

static void *free_all(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < nobjs; i++)
        sl_free(objs[i]); /* batched; the batch goes at this thread's exit */
    return NULL;
}

static struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int stage; /* 1: the heir has a heap; 2: it may go */
} heir = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static void heir_set(int s)
{
    pthread_mutex_lock(&heir.m);
    heir.stage = s;
    pthread_cond_broadcast(&heir.cv);
    pthread_mutex_unlock(&heir.m);
}
static void heir_wait(int s)
{
    pthread_mutex_lock(&heir.m);
    while (heir.stage < s)
        pthread_cond_wait(&heir.cv, &heir.m);
    pthread_mutex_unlock(&heir.m);
}

/* Takes over the last exited thread's heap whole (its first allocation,
 * of another class), and waits. */
static void *heir_thread(void *arg)
{
    (void)arg;
    sl_free(sl_malloc(48));
    heir_set(1);
    heir_wait(2);
    return NULL;
}

static void test_full_slabs_of_heir(void)
{
    uint64_t reused = sl_stat("heap_reuse");
    run(fill_full_slabs, (void *)(uintptr_t)3000);
    CHECK_EQ(slabs_while_filled, FULL_SLABS + 1);
    CHECK_EQ(field(full_base.name, "slabs_total"), FULL_SLABS); /* the new slab went back */
    CHECK_EQ(field(full_base.name, "objects_active"), nobjs);
    pthread_t t;
    heir.stage = 0;
    CHECK_EQ(pthread_create(&t, NULL, heir_thread, NULL), 0);
    heir_wait(1);
    CHECK(sl_stat("heap_reuse") > reused);
    run(free_all, NULL); /* the FULL slabs go onto the heir's notify stack */
    CHECK_EQ(field(full_base.name, "objects_active"), 0);
    heir_set(2);
    pthread_join(t, NULL); /* its exit takes them, and they are empty */
    check_gone(&full_base, nobjs + 1);
    sl_free(objs);
}

/* ---- an object cache ------------------------------------------------------ */

static sl_cache_t *cache;
#define CACHE_OBJ 512

/* Allocate n objects of the cache, keeping them in objs, and free the
 * last `freed` of them. */
static void *use_cache(void *arg)
{
    size_t freed = (size_t)(uintptr_t)arg;
    for (size_t i = 0; i < nobjs; i++)
        objs[i] = sl_cache_alloc(cache);
    for (size_t i = nobjs - freed; i < nobjs; i++)
        sl_cache_free(cache, objs[i]);
    return NULL;
}

static void test_cache(void)
{
    cache = sl_cache_create("thread_exit", CACHE_OBJ, 0, 0, NULL);
    CHECK(cache != NULL);
    struct base b = { "thread_exit", 0, 0 };
    void *one = sl_cache_alloc(cache);
    uint64_t per = field(b.name, "objects_total");
    sl_cache_free(cache, one);
    sl_cache_shrink(cache);
    CHECK_EQ(field(b.name, "slabs_total"), 0);
    b.allocations = field(b.name, "allocations");
    b.frees = field(b.name, "frees");

    /* all freed by the thread itself */
    nobjs = 2 * per + 1;
    objs = sl_malloc(nobjs * sizeof *objs);
    run(use_cache, (void *)(uintptr_t)nobjs);
    check_gone(&b, nobjs);

    /* FULL slabs on the full list at its exit, woken by remote frees
     * afterwards (this thread's: it has a heap of its own, so they are
     * remote); an exited thread's are given back by sl_purge */
    b.allocations += nobjs;
    b.frees += nobjs;
    run(use_cache, (void *)(uintptr_t)1);
    CHECK_EQ(field(b.name, "slabs_total"), 2);
    for (size_t i = 0; i < nobjs - 1; i++)
        sl_cache_free(cache, objs[i]);
    CHECK_EQ(field(b.name, "objects_active"), 0);
    sl_purge();
    check_gone(&b, nobjs);
    sl_free(objs);
    sl_cache_destroy(cache);
}

int main(void)
{
    test_magazines();
    test_full_slabs_of_heir();
    test_cache();
    CHECK(sl_check() == 0);
    CHECK_EQ(ctl_errors, 0);
    return t_done("thread_exit");
}
