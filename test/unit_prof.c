/* unit_prof.c — the heap sampler's arithmetic (src/prof/sample.c), with
 * an injected random source: the logarithm and exponential against libm,
 * the intervals' exponential distribution (mean and quantiles), the
 * weights, and that the weighted samples of a Poisson process over a
 * stream of allocations add up to the bytes and objects allocated, and
 * so do those of the small mallocs' per-class countdowns. */
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
    for (double x = -746; x < -740; x += 0.001) /* where 2^k leaves the subnormals (UBSan: no shift by -1) */
        CHECK_MSG(prof_expm1(x) == expm1(x), "expm1(%g): %.17g against %.17g", x, prof_expm1(x), expm1(x));
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

/* The small malloc's per-class countdowns (prof.c: prof_class_tick):
 * counted in objects, geometric with p(size); the first countdown of a
 * class starts with this object. Weighed as the byte countdown's samples,
 * they estimate each class's bytes and objects. */
static void test_class_countdowns(void)
{
    uint64_t s = 99, r = 5;
    const double mean = 16 << 10;
    static const size_t sizes[] = { 16, 64, 256, 1024, 4096, 32768 };
    CHECK_MSG(prof_interval_objects(~0ull, mean, 64) == 1, "the shortest gap is the next object");
    CHECK_MSG(prof_interval_objects(12345, 1, 64) == 1, "mean <= 1: every object");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        double sum = 0, p = -prof_expm1(-(double)sizes[k] / mean);
        int n = 200000;
        for (int i = 0; i < n; i++) {
            uint64_t g = prof_interval_objects(prof_random(&s), mean, sizes[k]);
            CHECK_MSG(g >= 1, "a countdown of 0 for %zu bytes", sizes[k]);
            sum += (double)g;
        }
        CHECK_MSG(fabs(sum / n * p - 1) < 0.02, "%zu bytes: mean countdown %.2f, not 1/p = %.2f", sizes[k], sum / n, 1 / p);
    }
    double est_bytes = 0, est_objects = 0, bytes = 0, objects = 0;
    uint64_t left[6] = { 0 };
    for (int i = 0; i < 3000000; i++) {
        size_t k = prof_random(&r) % 6, size = sizes[k];
        bool first = !left[k], take;
        bytes += (double)size;
        objects += 1;
        if (!first && --left[k])
            continue;
        take = true; /* as prof_class_tick */
        if (first) {
            uint64_t g = prof_interval_objects(prof_random(&s), mean, size);
            if (g > 1) {
                left[k] = g - 1;
                take = false;
            }
        }
        if (take) {
            left[k] = prof_interval_objects(prof_random(&s), mean, size);
            double o, b;
            prof_weight(size, mean, &o, &b);
            est_bytes += b;
            est_objects += o;
        }
    }
    CHECK_MSG(fabs(est_bytes / bytes - 1) < 0.02, "class countdowns: bytes estimated %.0f of %.0f", est_bytes, bytes);
    CHECK_MSG(fabs(est_objects / objects - 1) < 0.05, "class countdowns: objects estimated %.0f of %.0f", est_objects,
              objects);
}

int main(void)
{
    test_math();
    test_intervals();
    test_weights();
    test_unbiased();
    test_class_countdowns();
    return t_done("unit_prof");
}
