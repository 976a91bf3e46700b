/* sample.c — the sampler's arithmetic (sample.h): intervals and weights. */
#include "sample.h"

#include <string.h>

#define LN2_HI 6.93147180369123816490e-01 /* ln 2, split so k * LN2_HI is exact */
#define LN2_LO 1.90821492927058770002e-10

static double from_bits(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* 1 / (2k + 1) and 1 / k: the series' divisors as factors (a divide
 * costs some twenty cycles, a multiply four; a sample evaluates ~30). */
static const double inv_odd[12] = { 1.0,      1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11,
                                    1.0 / 13, 1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23 };
static const double inv_int[19] = { 0,        1.0,      1.0 / 2,  1.0 / 3,  1.0 / 4,  1.0 / 5,  1.0 / 6,
                                     1.0 / 7,  1.0 / 8,  1.0 / 9,  1.0 / 10, 1.0 / 11, 1.0 / 12, 1.0 / 13,
                                     1.0 / 14, 1.0 / 15, 1.0 / 16, 1.0 / 17, 1.0 / 18 };

/* x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log m by the series of
 * 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: 11 terms reach 1e-17. */
double prof_log(double x)
{
    uint64_t b = to_bits(x);
    int e = (int)((b >> 52) & 0x7ff);
    if (e == 0) { /* subnormal: scale into the normal range first */
        x *= 18014398509481984.0; /* 2^54 */
        b = to_bits(x);
        e = (int)((b >> 52) & 0x7ff) - 54;
    }
    e -= 1023;
    double m = from_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
    if (m > 1.41421356237309504880) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;
    for (int k = 0; k < 12; k++) { /* a multiply, not a divide, a term */
        sum += term * inv_odd[k];
        term *= s2;
    }
    return 2 * sum + e * LN2_LO + e * LN2_HI;
}

/* exp(r) - 1 for |r| <= 0.35 by its Taylor series (no cancellation),
 * stopped once a term no longer changes the sum (a sample's x is most
 * often -size / mean, a few thousandths: four or five terms). */
static double expm1_small(double r)
{
    double term = r, sum = r;
    for (int k = 2; k <= 18; k++) {
        term *= r * inv_int[k];
        double next = sum + term;
        if (next == sum)
            break;
        sum = next;
    }
    return sum;
}

double prof_expm1(double x)
{
    if (x >= -0.34)
        return expm1_small(x);
    if (x < -745)
        return -1;
    /* x = k ln 2 + r, |r| <= ln2 / 2; exp(x) = 2^k (1 + expm1(r)) */
    double k = (double)(long)(x / 0.69314718055994530942 - 0.5);
    if (k < -1074)
        return -1; /* 2^k is below the least subnormal: exp(x) rounds to 0 (x in [-745, -744.7]) */
    double r = (x - k * LN2_HI) - k * LN2_LO;
    double scale = k >= -1022 ? from_bits((uint64_t)(1023 + (long)k) << 52)
                              : from_bits((uint64_t)1 << (1074 + (long)k)); /* subnormal 2^k */
    return scale * (1 + expm1_small(r)) - 1;
}

uint64_t prof_random(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint64_t prof_interval(uint64_t random, double mean)
{
    if (mean <= 1)
        return 1;
    /* u uniform in (0, 1]: the top 53 bits, plus one */
    double u = ((double)(random >> 11) + 1) * (1.0 / 9007199254740992.0);
    double gap = -prof_log(u) * mean;
    if (gap < 1)
        return 1;
    if (gap >= (double)PROF_INTERVAL_MAX)
        return PROF_INTERVAL_MAX;
    return (uint64_t)gap + 1; /* rounded up: a point at gap lies in byte ceil(gap) */
}

uint64_t prof_interval_objects(uint64_t random, double mean, size_t size)
{
    uint64_t gap = prof_interval(random, mean); /* the point lies in byte gap, from 1 */
    return size ? (gap + size - 1) / size : PROF_INTERVAL_MAX;
}

void prof_weight(size_t n, double mean, double *objects, double *bytes)
{
    if (mean <= 1 || n == 0) {
        *objects = 1;
        *bytes = (double)n;
        return;
    }
    double p = -prof_expm1(-(double)n / mean); /* 1 - exp(-n / mean) */
    *objects = 1 / p;
    *bytes = (double)n / p;
}
