/* asan_cache.c — a program built with -fsanitize=address that links
 * libsluice.a: ASan serves its malloc, sluice its object caches, and a
 * freed cache object is poisoned (base/annotate.h), so that touching it
 * is reported.
 *   clean   caches (one with a constructor), bulk, objects reused: runs
 *           to its end
 *   uaf     reads a freed cache object: ASan reports a use after poison */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

static void ctor(void *p) { memset(p, 0x5a, 32); }

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "clean";
    sl_cache_t *c = sl_cache_create("asan", 40, 0, 0, NULL);
    sl_cache_t *k = sl_cache_create("asan.ctor", 32, 0, 0, ctor);
    char *s = strdup("ASan's malloc serves the program"); /* and free takes it back */
    free(s);
    if (!strcmp(what, "uaf")) {
        char *p = sl_cache_alloc(c);
        memset(p, 1, 40);
        sl_cache_free(c, p);
        printf("read after free: %d\n", ((volatile char *)p)[5]);
        return 0;
    }
    void *v[100];
    for (int round = 0; round < 3; round++) {
        if (sl_cache_alloc_bulk(c, 100, v) != 100)
            return 1;
        for (int i = 0; i < 100; i++)
            memset(v[i], i, 40);
        sl_cache_free_bulk(c, 50, v);
        for (int i = 50; i < 100; i++)
            sl_cache_free(c, v[i]);
        unsigned char *o = sl_cache_alloc(k);
        if (o[31] != 0x5a)
            return 1;
        sl_cache_free(k, o);
    }
    sl_cache_destroy(k);
    sl_cache_destroy(c);
    puts("clean done");
    return 0;
}
