/* A cached huge mapping, once advised, holds no resident page: the huge
 * cache advises MADV_DONTNEED (clean), never MADV_FREE (lazy), whose pages
 * the kernel keeps counting in the process's RSS until memory runs short
 * (huge/huge.c: advise_cached). Run with SLUICE_DIRTY_DECAY_MS=0, so a
 * freed mapping is advised as it is cached. The mapping is still reused
 * by the next huge request, and a calloc of it reads zero; memory freed
 * in pageblocks still goes lazy first (SLUICE_PURGE=free is unchanged
 * there: test/purge.c). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

/* Resident pages of [p, p + n) by mincore (p page-aligned). */
static size_t resident_pages(void *p, size_t n)
{
    size_t pages = n / 4096, in = 0;
    unsigned char *v = malloc(pages);
    CHECK(v != NULL);
    CHECK_EQ(mincore(p, n, v), 0);
    for (size_t i = 0; i < pages; i++)
        in += v[i] & 1;
    free(v);
    return in;
}

int main(void)
{
    const size_t n = 8u << 20;
    uint64_t reuse = sl_stat("huge_reuse"), dontneed = sl_stat("madv_dontneed_bytes");
    unsigned char *p = sl_malloc(n);
    CHECK(p != NULL);
    memset(p, 0xa5, n);
    CHECK_EQ(resident_pages(p, n), n / 4096);
    sl_free(p);
    /* cached, advised at once (decay 0), and not resident any more */
    CHECK(sl_stat("huge_cached_bytes") >= n);
    CHECK(sl_stat("madv_dontneed_bytes") >= dontneed + n);
    CHECK_EQ(sl_stat("lazy_bytes"), 0);
    CHECK_EQ(resident_pages(p, n), 0);
    /* the cache still serves the next request, zeroed for calloc */
    unsigned char *q = sl_calloc(1, n);
    CHECK(q == p);
    CHECK_EQ(sl_stat("huge_reuse"), reuse + 1);
    size_t bad = 0;
    for (size_t i = 0; i < n; i += 512)
        bad += q[i] != 0;
    CHECK_EQ(bad, 0);
    sl_free(q);
    return t_done("huge_rss");
}
