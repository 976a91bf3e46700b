/* Out of memory (run under `ulimit -v`, see CMakeLists.txt): every regime
 * fails with NULL and ENOMEM (sl_alloc_bulk with 0), never a crash, and
 * works again after frees;
 * `oom keep`: free pageblocks give way to a huge mapping. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "sluice.h"
#include "t.h"

static size_t fill(size_t size, void **held, size_t cap)
{
    size_t n = 0;
    for (; n < cap; n++) {
        errno = 0;
        held[n] = sl_malloc(size);
        if (!held[n]) {
            CHECK_EQ(errno, ENOMEM);
            break;
        }
        memset(held[n], 1, size < 4096 ? size : 4096);
    }
    return n;
}

/* Wholly free pageblocks stay mapped while they decay (for ever here: the
 * test runs with SLUICE_PURGE=off). Filling the address space with small
 * objects and freeing them leaves it full of free blocks. A new huge
 * mapping first gives back those beyond the number kept (an eighth of all);
 * one the limit has no room for then takes back the rest and tries again
 * (huge.c, map_fresh), instead of failing. */
static void free_blocks_give_way(void **held, size_t cap)
{
    size_t n = fill(8000, held, cap);
    CHECK(n > 1000);
    for (size_t i = 0; i < n; i++)
        sl_free(held[i]);
    uint64_t freed = sl_stat("blocks_free"), blocks = sl_stat("blocks");
    CHECK(freed > 50); /* the test's premise: the free blocks are still mapped */
    void *small = sl_malloc(4u << 20);
    CHECK(small != NULL);
    uint64_t kept = sl_stat("blocks_free");
    CHECK(kept < freed && kept <= blocks / 8);
    sl_free(small);
    /* the rest of the space in 4 MiB buffers: the last ones fit only once
     * the kept blocks are given back too (none kept is the proof) */
    static void *bufs[512];
    size_t k = 0;
    for (; k < 512; k++) {
        errno = 0;
        if (!(bufs[k] = sl_malloc(4u << 20)))
            break;
        CHECK_EQ(errno, 0); /* a success leaves errno alone, retried or not */
        memset(bufs[k], 1, 4096);
    }
    printf("oom: %zu objects of 8000 bytes freed: %llu free pageblocks mapped, %llu kept after a 4 MiB mapping, %llu "
           "once %zu buffers of 4 MiB filled the rest\n",
           n, (unsigned long long)freed, (unsigned long long)kept, (unsigned long long)sl_stat("blocks_free"), k);
    CHECK(k > 50 && k < 512);
    CHECK_EQ(sl_stat("blocks_free"), 0);
    for (size_t i = 0; i < k; i++)
        sl_free(bufs[i]);
}

int main(int argc, char **argv)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (2ull << 30)) {
        fprintf(stderr, "oom: run under ulimit -v (at most 2 GiB); it fills the address space\n");
        return 1;
    }
    static void *held[1 << 20];
    if (argc > 1 && !strcmp(argv[1], "keep")) {
        free_blocks_give_way(held, sizeof held / sizeof *held);
        return t_done("oom keep");
    }
    size_t sizes[] = { 3u << 20, 200000, 8000, 100 };
    size_t count[4];
    for (int round = 0; round < 2; round++) {
        size_t total = 0;
        for (int k = 0; k < 4; k++) {
            count[k] = fill(sizes[k], held + total, (sizeof held / sizeof *held) - total);
            total += count[k];
        }
        CHECK(total > 0);
        CHECK(count[0] > 0 && count[0] < (1u << 20)); /* huge hit the limit */
        errno = 0;
        CHECK(sl_malloc((size_t)1 << 40) == NULL && errno == ENOMEM);
        errno = 0;
        CHECK(sl_calloc(1, (size_t)1 << 36) == NULL && errno == ENOMEM);
        /* bulk: all or none (profiling every allocation, oom_prof: its
         * sampled blocks are made first, and given back when the rest fails) */
        static void *bulk[4096];
        errno = 0;
        CHECK(sl_alloc_bulk(48, 4096, bulk) == 0 && errno == ENOMEM);
        for (size_t i = 0; i < total; i++)
            sl_free(held[i]);
        sl_purge();
    }
    void *p = sl_malloc(50u << 20);
    CHECK(p != NULL); /* memory came back */
    sl_free(p);
    return t_done("oom");
}
