/* A thread with no heap whose first call frees an object of an exited
 * thread's heap takes that heap over (slab/heaps.c: orphan_pick), not the
 * last heap orphaned: it was handed the exited thread's objects (larson's
 * workers, each replacing one that exits), and its frees of them are then
 * its own, their room reused by its mallocs, instead of remote frees into
 * a heap that waits for someone else.
 *
 * Two threads allocate and exit, the second last (its heap heads the
 * orphans); a third frees the first one's objects, then allocates. With
 * the pick, its first malloc comes from the first thread's slab (whose
 * heap it took: heap_reuse + 1, no heap_new); without, from the second's.
 * A thread whose first call is a malloc still takes an orphan. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "sluice.h"
#include "t.h"

#define N    64
#define SIZE 48 /* both rows one class: with a class of its own, row 0's slab would come to
                 * the taker anyway (orphan_adopt, when the heap it took has no slab of it) */

static void *objs[2][N];
static _Atomic int ready, go;

static uint64_t stat_of(const char *name)
{
    uint64_t v = 0;
    size_t len = sizeof v;
    CHECK_EQ(sl_ctl(name, &v, &len, NULL, 0), 0);
    return v;
}

/* Allocate its row, say so, exit when told. */
static void *owner(void *arg)
{
    intptr_t i = (intptr_t)arg;
    for (int k = 0; k < N; k++)
        objs[i][k] = malloc(SIZE);
    ready++;
    T_WAIT_EVERY(atomic_load(&go) > i, 10000, 100); /* checked by main: the join order */
    return NULL;
}

/* Which row's slab a pointer is in: 0, 1, or -1 for neither. */
static int row_of(void *p)
{
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < N; k++)
            if ((uintptr_t)objs[i][k] >> 12 == (uintptr_t)p >> 12)
                return i;
    return -1;
}

static int taker_row = -2;
/* First call: a free of row 0's object, then a malloc of its class: from
 * the heap it took (its slab of that class is row 0's or row 1's). Then
 * the rest of row 0 freed, and what it allocated. */
static void *taker(void *arg)
{
    (void)arg;
    free(objs[0][0]);
    void *p = malloc(SIZE);
    taker_row = row_of(p);
    for (int k = 1; k < N; k++)
        free(objs[0][k]);
    free(p);
    return NULL;
}

static void *volatile kept;
static void *mallocer(void *arg)
{
    (void)arg;
    kept = malloc(SIZE);
    free(kept);
    return NULL;
}

static void run(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fn, arg), 0);
    pthread_join(t, NULL);
}

int main(void)
{
    kept = malloc(SIZE); /* this thread's heap first */
    free(kept);
    pthread_t t[2];
    for (intptr_t i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, owner, (void *)i), 0);
    CHECK(T_WAIT(atomic_load(&ready) == 2, 10000));
    for (int i = 0; i < 2; i++) { /* row 0's thread exits first: row 1's heap heads the orphans */
        go++;
        pthread_join(t[i], NULL);
    }
    uint64_t reuse = stat_of("stat.heap_reuse"), made = stat_of("stat.heap_new");
    run(taker, NULL);
    CHECK_EQ(taker_row, 0); /* row 0's heap: the last orphaned was row 1's */
    CHECK_EQ(stat_of("stat.heap_reuse") - reuse, 1);
    CHECK_EQ(stat_of("stat.heap_new") - made, 0);

    /* no object to go by: the last orphaned, as before */
    reuse = stat_of("stat.heap_reuse");
    run(mallocer, NULL);
    CHECK_EQ(stat_of("stat.heap_reuse") - reuse, 1);
    CHECK_EQ(stat_of("stat.heap_new") - made, 0);

    /* row 1's objects, freed by this thread: remote, into whichever heap has them */
    for (int k = 0; k < N; k++)
        free(objs[1][k]);
    CHECK_EQ(sl_ctl("check", NULL, NULL, NULL, 0), 0);
    return t_done("orphan_pick");
}
