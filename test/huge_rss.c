/* The huge cache's resident memory (huge/huge.c).
 *
 * advised (SLUICE_DIRTY_DECAY_MS=0, so a freed mapping is advised as it is
 * cached): a cached huge mapping, once advised, holds no resident page:
 * MADV_DONTNEED (clean), never MADV_FREE (lazy), whose pages the kernel
 * keeps counting in the process's RSS until memory runs short. The
 * mapping is still reused by the next huge request, and a calloc of it
 * reads zero; memory freed in pageblocks still goes lazy first
 * (test/purge.c).
 *
 * cap (a dirty decay of a minute, a reclaimer: nothing is advised for
 * its age or for a drop): freed mappings stay resident for their reuse
 * (a buffer freed and allocated again in a loop, four freed in a row)
 * until the heap grows; then the cache keeps dirty at most an eighth of
 * the memory in use, newest first, and always the newest: of the four,
 * the three older are advised.
 *
 * tick (the same, a tick of 100 ms: SLUICE_LAZY_DECAY_MS=400): with no
 * growth at all, allocation slow paths that map nothing hold the cache to
 * the cap within a few ticks: the three older are advised (then unmapped
 * after the lazy decay), the newest kept. Before, a cache that saw no
 * growth kept every mapping resident until its dirty decay, and with no
 * reclaimer (a single-threaded program) for ever. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

/* An allocation slow path with dirty memory left behind, which starts the
 * reclaimer (SLUICE_RECLAIMER=on); true, for a waited condition. */
static bool slow_path(void)
{
    sl_free(sl_malloc(300000));
    return true;
}

static void cap(void)
{
    const size_t n = 8u << 20;
    unsigned char *v[4];
    /* with the reclaimer running, a free is no drop to advise at once */
    CHECK(T_WAIT(slow_path() && sl_stat("reclaimer_runs") > 0, 20000));
    /* one buffer in a loop: the same mapping, resident throughout */
    unsigned char *first = NULL;
    for (int i = 0; i < 3; i++) {
        unsigned char *p = sl_malloc(n);
        CHECK(p != NULL);
        CHECK(!first || p == first);
        first = p;
        memset(p, i + 1, n);
        sl_free(p);
        CHECK_EQ(t_resident_pages(p, n), n / 4096);
    }
    for (int i = 0; i < 4; i++) {
        CHECK((v[i] = sl_malloc(n)) != NULL);
        memset(v[i], 0xa5, n);
    }
    for (int i = 0; i < 4; i++)
        sl_free(v[i]);
    CHECK(sl_stat("huge_cached_bytes") >= 4 * n);
    /* no growth yet: all four stay resident for their reuse */
    size_t all = 0;
    for (int i = 0; i < 4; i++)
        all += t_resident_pages(v[i], n);
    CHECK_EQ(all, 4 * n / 4096);
    /* the heap grows by a pageblock (medium runs, little else in use):
     * the three older ones are advised, the newest kept */
    enum { NRUNS = 200 };
    static void *runs[NRUNS];
    uint64_t blocks = sl_stat("block_map");
    int k = 0;
    while (k < NRUNS && sl_stat("block_map") == blocks)
        CHECK((runs[k++] = sl_malloc(60000)) != NULL);
    CHECK(sl_stat("block_map") > blocks);
    CHECK_EQ(t_resident_pages(v[3], n), n / 4096);
    size_t older = 0;
    for (int i = 0; i < 3; i++)
        older += t_resident_pages(v[i], n);
    CHECK_EQ(older, 0);
    while (k)
        sl_free(runs[--k]);
}

/* Resident pages of [p, p + n), 0 once it is unmapped; no malloc (an
 * allocation slow path would run the tick being watched). */
static unsigned char vec[(8u << 20) / 4096];
static size_t resident_or_gone(void *p, size_t n)
{
    size_t in = 0;
    CHECK(n <= sizeof vec * 4096);
    if (mincore(p, n, vec) == 0)
        for (size_t i = 0; i < n / 4096; i++)
            in += vec[i] & 1;
    return in;
}

static unsigned char *tv[4];

static bool older_gone(void)
{
    size_t older = 0;
    for (int i = 0; i < 3; i++)
        older += resident_or_gone(tv[i], 8u << 20);
    return older == 0;
}

static void tick(void)
{
    const size_t n = 8u << 20;
    CHECK(T_WAIT(slow_path() && sl_stat("reclaimer_runs") > 0, 20000));
    for (int i = 0; i < 4; i++) {
        CHECK((tv[i] = sl_malloc(n)) != NULL);
        memset(tv[i], 0xa5, n);
    }
    slow_path();
    uint64_t blocks = sl_stat("block_map");
    for (int i = 0; i < 4; i++)
        sl_free(tv[i]);
    size_t all = 0;
    for (int i = 0; i < 4; i++)
        all += resident_or_gone(tv[i], n);
    CHECK_EQ(all, 4 * n / 4096); /* the premise: freed, cached, resident */
    CHECK(T_WAIT(slow_path() && older_gone(), 5000));
    CHECK_EQ(sl_stat("block_map"), blocks); /* the tick did it, not a growth */
    CHECK_EQ(resident_or_gone(tv[3], n), n / 4096);
}

static void advised(void)
{
    const size_t n = 8u << 20;
    uint64_t reuse = sl_stat("huge_reuse"), dontneed = sl_stat("madv_dontneed_bytes");
    unsigned char *p = sl_malloc(n);
    CHECK(p != NULL);
    memset(p, 0xa5, n);
    CHECK_EQ(t_resident_pages(p, n), n / 4096);
    sl_free(p);
    /* cached, advised at once (decay 0), and not resident any more */
    CHECK(sl_stat("huge_cached_bytes") >= n);
    CHECK(sl_stat("madv_dontneed_bytes") >= dontneed + n);
    CHECK_EQ(sl_stat("lazy_bytes"), 0);
    CHECK_EQ(t_resident_pages(p, n), 0);
    /* the cache still serves the next request, zeroed for calloc */
    unsigned char *q = sl_calloc(1, n);
    CHECK(q == p);
    CHECK_EQ(sl_stat("huge_reuse"), reuse + 1);
    size_t bad = 0;
    for (size_t i = 0; i < n; i += 512)
        bad += q[i] != 0;
    CHECK_EQ(bad, 0);
    sl_free(q);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "cap"))
        cap();
    else if (argc > 1 && !strcmp(argv[1], "tick"))
        tick();
    else
        advised();
    return t_done("huge_rss");
}
