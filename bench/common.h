/* common.h — shared by the benchmark programs: a clock, a PRNG, and the one
 * line every program prints ("seconds=<wall time of the measured part>");
 * what the kernel says of the process (smaps_rollup, status) is
 * test/proc.h's, shared with the tests.
 * The programs use plain malloc/free so that any allocator can be preloaded. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../test/proc.h"

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline unsigned long long rng(unsigned long long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* scale from argv[1] (default 1): multiplies the work */
static inline double bench_scale(int argc, char **argv) { return argc > 1 ? atof(argv[1]) : 1.0; }

/* Peak RSS of this process image in KiB (VmHWM): wait4's ru_maxrss would
 * also count the parent's memory at fork time. */
static inline long peak_rss_kib(void) { return proc_status("VmHWM"); }

static inline void report(double seconds, unsigned long long checksum)
{
    printf("seconds=%.6f checksum=%llu peak_rss_kib=%ld\n", seconds, checksum, peak_rss_kib());
}

#endif
