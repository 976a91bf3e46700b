/* sample.h — the sampler's arithmetic, pure functions of their arguments
 * (the random bits are passed in), so test/unit_prof.c checks them alone.
 *
 * Sampling is a Poisson process over the bytes a thread allocates: the
 * gaps between sample points are exponential with mean `mean` bytes, and
 * an allocation is sampled when a point falls in it. An allocation of n
 * bytes then holds at least one point with probability
 * p(n) = 1 - exp(-n / mean); each sample stands for 1 / p(n) allocations
 * of its size and n / p(n) bytes (tcmalloc's and jemalloc's unbiasing).
 * A mean of 1 byte or less samples every allocation, each weighing
 * exactly itself (the exact mode: SLUICE_PROF_SAMPLE=1).
 *
 * No libm: sluice links no library a C program does not already load,
 * so the logarithm and the exponential are our own (accurate to a few
 * ulps over the ranges used here; the unit test checks them against libm).
 */
#ifndef SL_PROF_SAMPLE_H
#define SL_PROF_SAMPLE_H

#include "../base/common.h"

#define PROF_INTERVAL_MAX ((uint64_t)1 << 40) /* a gap is cut here (the options' range) */

double prof_log(double x);   /* x > 0 */
double prof_expm1(double x); /* exp(x) - 1, for x <= 0 (exact near 0) */
/* The next pseudo-random word of the state *s (xorshift64*; *s nonzero). */
uint64_t prof_random(uint64_t *s);
/* A gap to the next sample point, in bytes, from 64 random bits: at least
 * 1, at most PROF_INTERVAL_MAX, exponential with mean `mean`. */
uint64_t prof_interval(uint64_t random, double mean);
/* The same gap counted in objects of size bytes each (a small malloc
 * class's countdown): the object the point falls in, from 1: at least 1,
 * geometric with p(size) (prof_weight's p). */
uint64_t prof_interval_objects(uint64_t random, double mean, size_t size);
/* What one sample of an n-byte allocation stands for: *objects
 * allocations and *bytes bytes. */
void prof_weight(size_t n, double mean, double *objects, double *bytes);

#endif
