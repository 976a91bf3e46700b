/* unit_prof.c — the heap sampler's arithmetic (src/prof/sample.c), with
 * an injected random source: the logarithm and exponential against libm,
 * the intervals' exponential distribution (mean and quantiles), the
 * weights, and that the weighted samples of a Poisson process over a
 * stream of allocations add up to the bytes and objects allocated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "t.h"
#include "../src/prof/sample.h"


static void test_math(void)
{
    for (double x = 1e-300; x < 1e300; x *= 1.7) {
        double d = fabs(prof_log(x) - log(x));
        CHECK_MSG(d <= 1e-14 * fabs(log(x)) + 1e-15, "log(%g): %.17g against %.17g", x, prof_log(x), log(x));
    }
    for (double x = 1e-9; x < 1; x *= 1.01)
        CHECK_MSG(fabs(prof_log(x) - log(x)) <= 1e-14 * fabs(log(x)) + 1e-16, "log(%g)", x);
    CHECK_MSG(prof_log(4.9e-324) < -744 && prof_log(4.9e-324) > -745, "log of a subnormal");
    for (double x = -1e-12; x > -800; x *= 1.05) {
        double want = expm1(x), got = prof_expm1(x);
        CHECK_MSG(fabs(got - want) <= 1e-14 * fabs(want), "expm1(%g): %.17g against %.17g", x, got, want);
    }
}

static void test_intervals(void)
{
    uint64_t s = 0x1234567887654321ull;
    const double mean = 512 << 10;
    const int n = 400000;
    double sum = 0;
    int below_median = 0, below_mean = 0, below_tenth = 0;
    for (int i = 0; i < n; i++) {
        uint64_t g = prof_interval(prof_random(&s), mean);
        CHECK_MSG(g >= 1 && g <= PROF_INTERVAL_MAX, "interval %llu out of range", (unsigned long long)g);
        sum += (double)g;
        below_median += g <= mean * M_LN2;
        below_mean += g <= mean;
        below_tenth += g <= mean / 10;
    }
    /* standard errors: mean 0.16%, proportions ~0.08%: 5 of them */
    CHECK_MSG(fabs(sum / n / mean - 1) < 0.008, "mean interval %.0f, not %.0f", sum / n, mean);
    CHECK_MSG(fabs((double)below_median / n - 0.5) < 0.004, "P(gap <= median) %.4f", (double)below_median / n);
    CHECK_MSG(fabs((double)below_mean / n - (1 - exp(-1))) < 0.004, "P(gap <= mean) %.4f", (double)below_mean / n);
    CHECK_MSG(fabs((double)below_tenth / n - (1 - exp(-0.1))) < 0.003, "P(gap <= mean/10) %.4f", (double)below_tenth / n);
    /* the extremes of the random word */
    CHECK_MSG(prof_interval(~0ull, mean) == 1, "the largest u gives the shortest gap");
    CHECK_MSG(prof_interval(0, mean) > 30 * mean, "the smallest u gives a long gap");
    CHECK_MSG(prof_interval(12345, 1) == 1 && prof_interval(12345, 0.5) == 1, "mean <= 1: every byte");
}

static void test_weights(void)
{
    double o, b, mean = 512 << 10;
    prof_weight(16, mean, &o, &b);
    CHECK_MSG(fabs(o - 1 / -expm1(-16 / mean)) < 1e-6 * o && fabs(b - 16 * o) < 1e-6 * b, "16 bytes: %g objects", o);
    CHECK_MSG(fabs(o - mean / 16) < 1, "a small block stands for about mean / size of its kind: %g", o);
    prof_weight((size_t)mean, mean, &o, &b);
    CHECK_MSG(fabs(o - 1 / (1 - exp(-1))) < 1e-12, "mean-sized: %.15g", o);
    prof_weight(100 << 20, mean, &o, &b);
    CHECK_MSG(o == 1 && b == 100 << 20, "a block far above the mean stands for itself");
    prof_weight(1000, 1, &o, &b);
    CHECK_MSG(o == 1 && b == 1000, "exact mode: every block weighs itself");
}

/* A Poisson process over a stream of allocations of mixed sizes, as the
 * countdown runs it (prof.c): the weighted samples estimate the bytes and
 * objects, within a few standard errors. */
static void test_unbiased(void)
{
    uint64_t s = 42, r = 7;
    const double mean = 64 << 10;
    double est_bytes = 0, est_objects = 0, bytes = 0, objects = 0;
    int64_t left = (int64_t)prof_interval(prof_random(&s), mean);
    for (int i = 0; i < 3000000; i++) {
        size_t n = (prof_random(&r) & 3) ? 16 + prof_random(&r) % 512 : 4096 + prof_random(&r) % (512 << 10);
        bytes += (double)n;
        objects += 1;
        left -= (int64_t)n;
        if (left <= 0) {
            double o, b;
            prof_weight(n, mean, &o, &b);
            est_bytes += b;
            est_objects += o;
            left = (int64_t)prof_interval(prof_random(&s), mean);
        }
    }
    CHECK_MSG(fabs(est_bytes / bytes - 1) < 0.02, "bytes estimated %.0f of %.0f", est_bytes, bytes);
    CHECK_MSG(fabs(est_objects / objects - 1) < 0.05, "objects estimated %.0f of %.0f", est_objects, objects);
}

int main(void)
{
    test_math();
    test_intervals();
    test_weights();
    test_unbiased();
    return t_done("unit_prof");
}
