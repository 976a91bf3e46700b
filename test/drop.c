/* The last free: a single-threaded program that frees most of its heap
 * and then stops allocating has it back (Rss - LazyFree at most twice its
 * live bytes) by the time its frees return, with no thread started; and a
 * program that drops and refills over and over learns to stop advising
 * what it takes back (a regret, then no drop purge in the next drop).
 * The policy (decay_drop, decay_drop_backoff) is unit-tested in
 * unit_decay with a fake clock; this shows the mechanism carrying it out.
 * RSS is checked in the normal build only (a sanitizer's own memory would
 * swamp it): CMakeLists registers this test there. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

#define MiB (1024u * 1024u)

static unsigned rng_state = 12345;
static unsigned rng(void) { return rng_state = rng_state * 1103515245u + 12345u; }

/* 16 B to 32 KiB, log-uniform: small objects and medium runs alike. */
static size_t mixed_size(void)
{
    unsigned r = (rng() >> 8) & 0xffff;
    return (size_t)16 << (r % 12) | (r >> 4 & 15);
}

enum { BATCH = 2048, MAXOBJ = 1 << 20 };
static void *obj[MAXOBJ];
static size_t osz[MAXOBJ];

/* Allocate about total bytes of mixed sizes, touched; the object count. */
static size_t fill(size_t total)
{
    size_t n = 0, used = 0;
    while (used < total && n < MAXOBJ) {
        size_t z = mixed_size();
        obj[n] = sl_malloc(z);
        memset(obj[n], 1, z);
        osz[n] = z;
        used += z;
        n++;
    }
    return n;
}

/* 160 MiB of mixed sizes and a 32 MiB buffer; 9 batches of every 10 freed
 * (a phase's temporaries), then the buffer: the program's last frees. */
static void last_free(void)
{
    uint64_t base = proc_held();
    size_t n = fill(160 * MiB), live = 0;
    char *big = sl_malloc(32 * MiB);
    memset(big, 2, 32 * MiB);
    uint64_t peak = proc_held();
    for (size_t i = 0; i < n; i++)
        if ((i / BATCH) % 10 == 0)
            live += osz[i];
        else
            sl_free(obj[i]);
    sl_free(big);
    uint64_t after = proc_held() - base;
    printf("last free: %.0f MiB live, %.0f MiB held at the peak, %.0f MiB after the frees (%.2fx live)\n",
           live / (double)MiB, (peak - base) / (double)MiB, after / (double)MiB, after / (double)live);
    CHECK(after <= 2 * live);
    CHECK(sl_stat("drop_purge") > 0);
    CHECK_EQ(proc_threads(), 1);
    for (size_t i = 0; i < n; i += BATCH * 10)
        for (size_t j = i; j < i + BATCH && j < n; j++)
            sl_free(obj[j]);
}

/* Phases that free everything and allocate as much again: the first
 * drop's purge is taken back by the next phase (a regret), and the drop
 * after the regret advises nothing (the backoff lasts a tick or more:
 * SLUICE_DIRTY_DECAY_MS=4000 makes a tick 1 s, longer than a phase). */
static void churn(void)
{
    uint64_t regret0 = sl_stat("drop_regret");
    uint64_t calls[4];
    for (int round = 0; round < 4; round++) {
        uint64_t c0 = sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls");
        size_t n = fill(48 * MiB);
        for (size_t i = 0; i < n; i++)
            sl_free(obj[i]);
        calls[round] = sl_stat("madv_free_calls") + sl_stat("madv_dontneed_calls") - c0;
    }
    printf("churn: madvise calls per round %llu %llu %llu %llu, regrets %llu\n", (unsigned long long)calls[0],
           (unsigned long long)calls[1], (unsigned long long)calls[2], (unsigned long long)calls[3],
           (unsigned long long)(sl_stat("drop_regret") - regret0));
    CHECK(calls[0] > 0);
    CHECK(sl_stat("drop_regret") > regret0);
    CHECK(calls[1] < calls[0]);
}

int main(void)
{
    last_free();
    churn();
    return t_done("drop");
}
