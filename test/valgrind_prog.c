/* valgrind_prog.c — run by valgrind.sh under valgrind's memcheck:
 *   clean        caches (one with a constructor, bulk, a remote free,
 *                destroy with live objects) and the
 *                malloc family (calloc, realloc, aligned, sized, bulk,
 *                medium and huge sizes): no error
 *   cache-uaf    reads a freed cache object: memcheck reports it
 *   malloc-uaf   writes a freed malloc block: memcheck reports it
 * The program is linked with libsluice (-lsluice), or not at all and given
 * it by LD_PRELOAD (then only malloc-uaf and the malloc part of clean). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef WITH_SLUICE
#include "sluice.h"

struct node {
    int magic;
    char name[20];
};
static void ctor(void *p)
{
    struct node *n = p;
    n->magic = 42;
    strcpy(n->name, "constructed");
}

static sl_cache_t *plain;
static void *remote_free(void *p)
{
    sl_cache_free(plain, p);
    return NULL;
}

static int caches(void)
{
    int sum = 0;
    sl_cache_t *c = plain = sl_cache_create("plain", 24, 0, 0, NULL);
    sl_cache_t *k = sl_cache_create("ctor", sizeof(struct node), 0, 0, ctor);
    void *objs[64];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 64; i++) {
            objs[i] = sl_cache_alloc(c);
            memset(objs[i], i, 24);
        }
        for (int i = 0; i < 64; i++)
            sum += ((char *)objs[i])[23];
        sl_cache_free_bulk(c, 32, objs);
        for (int i = 32; i < 64; i++)
            sl_cache_free(c, objs[i]);
    }
    if (sl_cache_alloc_bulk(c, 40, objs) != 40)
        return -1;
    for (int i = 0; i < 40; i++)
        memset(objs[i], 1, 24);
    pthread_t t;
    pthread_create(&t, NULL, remote_free, objs[0]); /* by another thread */
    pthread_join(t, NULL);
    sl_cache_free_bulk(c, 39, objs + 1);
    struct node *n = sl_cache_alloc(k); /* its bytes are the constructor's: defined */
    sum += n->magic + n->name[0];
    n->magic = 43;
    sl_cache_free(k, n);
    n = sl_cache_alloc(k); /* the same object, as freed */
    sum += n->magic;
    sl_cache_alloc(k); /* live at destroy */
    sl_cache_destroy(k);
    sl_cache_destroy(c);
    return sum;
}

static int cache_uaf(void)
{
    sl_cache_t *c = sl_cache_create("uaf", 40, 0, 0, NULL);
    char *p = sl_cache_alloc(c);
    memset(p, 7, 40);
    sl_cache_free(c, p);
    return ((volatile char *)p)[3]; /* use after free */
}
#endif

static int malloc_family(void)
{
    int sum = 0;
    for (size_t n = 1; n < (4u << 20); n = n * 3 + 5) {
        char *p = malloc(n), *z = calloc(1, n);
        memset(p, 1, n);
        sum += p[n - 1] + z[n / 2];
        p = realloc(p, n * 2);
        sum += p[n - 1];
        p = realloc(p, n / 2 + 1);
        sum += p[n / 2];
        free(p);
        free(z);
    }
    void *a = aligned_alloc(256, 1000), *b;
    if (posix_memalign(&b, 4096, 5000))
        return -1;
    memset(a, 2, 1000);
    memset(b, 3, 5000);
    sum += ((char *)a)[999] + ((char *)b)[4999];
    free(a);
    free(b);
#ifdef WITH_SLUICE
    void *v[100];
    if (sl_alloc_bulk(48, 100, v) != 100)
        return -1;
    for (int i = 0; i < 100; i++)
        memset(v[i], i, 48);
    sl_free_bulk(v, 100);
    char *s = sl_malloc(100);
    s[99] = 1;
    sum += s[99];
    sl_free_sized(s, 100);
#endif
    return sum;
}

static char *volatile kept; /* the compiler loses track of p through it */

static int malloc_uaf(void)
{
    char *p = malloc(64);
    memset(p, 1, 64);
    kept = p;
    free(p);
    kept[10] = 5; /* use after free */
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "clean";
    int r = 0;
    if (!strcmp(what, "clean")) {
        r = malloc_family();
#ifdef WITH_SLUICE
        r += caches();
#endif
    } else if (!strcmp(what, "malloc-uaf")) {
        r = malloc_uaf();
#ifdef WITH_SLUICE
    } else if (!strcmp(what, "cache-uaf")) {
        r = cache_uaf();
#endif
    } else {
        fprintf(stderr, "unknown case %s\n", what);
        return 2;
    }
    printf("%s done (%d)\n", what, r != 0);
    return 0;
}
