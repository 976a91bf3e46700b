/* fuzz_alloc.c — libFuzzer harness: the input is decoded into a sequence
 * of allocator operations over a table of live blocks, each carrying a
 * pattern derived from a tag, checked before every free and realloc and at
 * the end of the input: the malloc family (malloc, calloc, realloc,
 * aligned_alloc, posix_memalign, memalign, free, free_sized), the bulk
 * calls, and object caches (create, alloc, free, bulk, shrink, destroy).
 * Every input ends with everything freed and sl_check().
 *
 * Built by `make fuzz` (clang, -fsanitize=fuzzer,undefined); the corpus
 * lives in test/fuzz/corpus. One byte picks an operation, the next ones
 * its arguments; a short input is a short program.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice.h"

#define SLOTS  64
#define CACHES 4

struct blk {
    uint8_t *p;
    size_t size;
    size_t align; /* nonzero: freed with sl_free_aligned_sized */
    int cache;    /* -1 malloc family, else the cache slot */
    uint8_t tag;
};

static struct blk tab[SLOTS];
static sl_cache_t *caches[CACHES];
static size_t cache_size[CACHES];
static uint8_t cache_ctor[CACHES];

struct input {
    const uint8_t *d;
    size_t n, at;
};

static unsigned u8(struct input *in) { return in->at < in->n ? in->d[in->at++] : 0; }
static unsigned u16(struct input *in) { return u8(in) | u8(in) << 8; }

/* Sizes over every regime: tiny, small classes, page runs, huge. */
static size_t size_of(struct input *in)
{
    unsigned k = u8(in), v = u16(in);
    switch (k & 7) {
    case 0: return v & 31;                        /* 0..31 */
    case 1: case 2: return v & 1023;              /* slab classes */
    case 3: case 4: return v & 16383;             /* up to the largest class */
    case 5: return 16384 + (size_t)v * 8;         /* page runs to ~540 KiB */
    case 6: return (size_t)v * 16;                /* up to 1 MiB */
    default: return (1u << 20) + (size_t)(v & 0x3ff) * 4096; /* huge, to 5 MiB */
    }
}

static uint8_t pat(const struct blk *b, size_t i) { return (uint8_t)(b->tag * 131 + i * 7 + (i >> 8)); }

/* Pattern positions: every byte of the first and last 2 KiB, then 1 in 256. */
static size_t next_pos(size_t i, size_t size)
{
    if (i < 2048 || i + 2048 >= size)
        return i + 1;
    return i + 256 < size - 2048 ? i + 256 : size - 2048;
}

static void fill(struct blk *b)
{
    for (size_t i = 0; i < b->size; i = next_pos(i, b->size))
        b->p[i] = pat(b, i);
}

static void verify_upto(const struct blk *b, const uint8_t *p, size_t upto)
{
    for (size_t i = 0; i < b->size && i < upto; i = next_pos(i, b->size))
        if (p[i] != pat(b, i)) {
            fprintf(stderr, "fuzz_alloc: block %p (%zu bytes) corrupt at %zu\n", (void *)p, b->size, i);
            abort();
        }
}

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_alloc: %s\n", what);
        abort();
    }
}

static void drop(struct blk *b)
{
    if (!b->p)
        return;
    verify_upto(b, b->p, b->size);
    if (b->cache >= 0)
        sl_cache_free(caches[b->cache], b->p);
    else if (b->align)
        sl_free_aligned_sized(b->p, b->align, b->size);
    else if (b->tag & 1)
        sl_free_sized(b->p, b->size);
    else
        sl_free(b->p);
    b->p = NULL;
}

static void put(struct blk *b, void *p, size_t size, size_t align, int cache, uint8_t tag)
{
    must(sl_usable_size(p) >= size, "usable size below the request");
    *b = (struct blk){ p, size, align, cache, tag };
    fill(b);
}

static void ctor(void *p) { memset(p, 0, 8); }

static void cache_close(int c)
{
    for (int i = 0; i < SLOTS; i++) /* destroy releases live objects; the table forgets them */
        if (tab[i].p && tab[i].cache == c)
            verify_upto(&tab[i], tab[i].p, tab[i].size), tab[i].p = NULL;
    sl_cache_destroy(caches[c]);
    caches[c] = NULL;
}

static void step(struct input *in)
{
    unsigned op = u8(in) % 18;
    struct blk *b = &tab[u8(in) % SLOTS];
    uint8_t tag = (uint8_t)u8(in);
    errno = 0;
    switch (op) {
    case 0: case 1: { /* malloc */
        size_t n = size_of(in);
        drop(b);
        void *p = sl_malloc(n);
        must(p != NULL, "malloc failed");
        put(b, p, n, 0, -1, tag);
        break;
    }
    case 2: { /* calloc, with an overflow now and then */
        size_t n = size_of(in), k = 1 + (u8(in) & 3);
        if (tag == 0xff) {
            must(!sl_calloc(SIZE_MAX / 2, 3) && errno == ENOMEM, "overflowing calloc");
            break;
        }
        drop(b);
        uint8_t *p = sl_calloc(k, n);
        must(p != NULL, "calloc failed");
        for (size_t i = 0; i < k * n; i++)
            must(p[i] == 0, "calloc not zero");
        put(b, p, k * n, 0, -1, tag);
        break;
    }
    case 3: case 4: { /* realloc keeps the old bytes */
        if (!b->p || b->cache >= 0 || b->align)
            break;
        size_t n = size_of(in);
        if (n == 0)
            n = 1;
        struct blk old = *b;
        uint8_t *q = sl_realloc(b->p, n);
        must(q != NULL, "realloc failed");
        verify_upto(&old, q, n);
        put(b, q, n, 0, -1, tag);
        break;
    }
    case 5: { /* aligned */
        size_t align = (size_t)1 << (u8(in) % 23), n = size_of(in);
        drop(b);
        void *p = NULL;
        unsigned how = tag % 3;
        if (how == 0) {
            p = sl_aligned_alloc(align, n);
        } else if (how == 1) {
            int r = sl_posix_memalign(&p, align, n);
            if (align < sizeof(void *)) {
                must(r == EINVAL, "posix_memalign of a small alignment");
                break;
            }
            must(r == 0, "posix_memalign failed");
        } else {
            p = sl_memalign(align, n);
        }
        must(p != NULL, "aligned allocation failed");
        must(((uintptr_t)p & (align - 1)) == 0, "misaligned");
        put(b, p, n, align, -1, tag);
        break;
    }
    case 6: case 7: /* free */
        drop(b);
        break;
    case 8: { /* bulk alloc into consecutive slots, bulk free some of them */
        size_t n = 1 + u8(in) % 16, size = 1 + u16(in) % 2048;
        void *v[16];
        must(sl_alloc_bulk(size, n, v) == n, "alloc_bulk failed");
        unsigned at = (unsigned)(b - tab);
        for (size_t i = 0; i < n; i++) {
            struct blk *s = &tab[(at + i) % SLOTS];
            drop(s);
            put(s, v[i], size, 0, -1, (uint8_t)(tag + i * 2)); /* even tags: plain free */
        }
        break;
    }
    case 9: { /* bulk free of a stretch of the table (NULLs included) */
        void *v[16];
        size_t n = 1 + u8(in) % 16, k = 0;
        unsigned at = (unsigned)(b - tab);
        for (size_t i = 0; i < n; i++) {
            struct blk *s = &tab[(at + i) % SLOTS];
            if (s->p && s->cache < 0 && !s->align)
                verify_upto(s, s->p, s->size), v[k++] = s->p, s->p = NULL;
            else
                v[k++] = NULL;
        }
        sl_free_bulk(v, k);
        break;
    }
    case 10: { /* cache create */
        int c = (int)(tag % CACHES);
        if (caches[c])
            cache_close(c);
        size_t size = 1 + u16(in) % 4096, align = (size_t)1 << (u8(in) % 8);
        unsigned flags = u8(in) & (SL_CACHE_RECLAIMABLE | SL_CACHE_HWCACHE_ALIGN);
        cache_ctor[c] = (uint8_t)(u8(in) & 1);
        caches[c] = sl_cache_create("fuzz", size, align, flags, cache_ctor[c] ? ctor : NULL);
        must(caches[c] != NULL, "cache_create failed");
        cache_size[c] = size;
        break;
    }
    case 11: case 12: { /* cache alloc */
        int c = (int)(tag % CACHES);
        if (!caches[c])
            break;
        drop(b);
        void *p = sl_cache_alloc(caches[c]);
        must(p != NULL, "cache_alloc failed");
        put(b, p, cache_size[c], 0, c, tag);
        break;
    }
    case 13: { /* cache bulk alloc and free */
        int c = (int)(tag % CACHES);
        if (!caches[c])
            break;
        void *v[32];
        size_t n = 1 + u8(in) % 32;
        must(sl_cache_alloc_bulk(caches[c], n, v) == n, "cache_alloc_bulk failed");
        for (size_t i = 0; i < n; i++)
            memset(v[i], (int)i, cache_size[c]);
        sl_cache_free_bulk(caches[c], n, v);
        break;
    }
    case 14: { /* cache destroy or shrink */
        int c = (int)(tag % CACHES);
        if (!caches[c])
            break;
        if (tag & 4)
            cache_close(c);
        else
            sl_cache_shrink(caches[c]);
        break;
    }
    case 15: /* free() of a cache object (kfree style) */
        if (b->p && b->cache >= 0) {
            verify_upto(b, b->p, b->size);
            sl_free(b->p);
            b->p = NULL;
        }
        break;
    case 16:
        if (tag < 8)
            sl_purge();
        break;
    default:
        if (b->p)
            must(sl_usable_size(b->p) >= b->size, "usable size shrank");
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = { data, size, 0 };
    while (in.at < in.n)
        step(&in);
    for (int i = 0; i < SLOTS; i++)
        drop(&tab[i]);
    for (int c = 0; c < CACHES; c++)
        if (caches[c])
            cache_close(c);
    sl_check();
    return 0;
}
