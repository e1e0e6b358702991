/* Change points in mean and variance as R changepoint's cpt.meanvar finds them with PELT
 * (PELT_one_func_minseglen.c and cost_general_functions.c at the commit warmup_stats
 * installs, e3959de): the segmentation least in the normal cost plus a penalty per change
 * point, found exactly with a fraction of the logarithms R spends.
 *
 * R evaluates every candidate still in PELT's list at every iteration; on a flat series
 * PELT prunes none, and 2,000 iterations cost 2 million logarithms. Here the candidates lie
 * in blocks of BLOCK, and a block is passed over when a lower bound of its candidates'
 * values exceeds the best found so far, so that none in it can be the best nor tie it:
 * first a bound from the block's F less a line through it and the least log variance a
 * segment from it can have (a segment's sum of squares about its mean only grows as it
 * starts earlier), one logarithm's worth; then each candidate's F with that least sum of
 * squares, no logarithm; then each candidate with a cheap lower bound of its logarithm; the
 * exact logarithm only for those left. PELT's own pruning is left out: with segments of two
 * or more it can drop the optimum (a candidate pruned at s is still needed at s + 1, where
 * s is too close), and a variance floor breaks the inequality it rests on. So this is the
 * optimum R's PELT is meant to find, which R misses in rare series (4 of 3,000 short ones
 * with large outliers, at 15 log n).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include "perflab.h"

#define BLOCK 32

/* cpt.meanvar's cost of the segment after tau up to t, twice its negative log-likelihood,
 * less its constant m (log 2 pi + 1), whose sum over any segmentation is the same: m log s^2,
 * the variance s^2 floored. Left in, the constant would make a block's bound pair the least
 * F (its first candidate's) with the least constant (its last one's). */
static double cost(const double *s1, const double *s2, size_t tau, size_t t, double floor)
{
    double m = (double)(t - tau), x = s1[t] - s1[tau], x2 = s2[t] - s2[tau];
    double sigsq = (x2 - x * x / m) / m;
    if (sigsq < floor)
        sigsq = floor;
    return m * log(sigsq);
}

/* fmin and fmax without their NaN rules, which make gcc call them (none arise here). */
static inline double max2(double a, double b)
{
    return a > b ? a : b;
}

static inline double min2(double a, double b)
{
    return a < b ? a : b;
}

/* A lower bound of log(x) for x > 0, a quarter of log's time: x = u 2^e with u in [1, 2),
 * and log u = 2 atanh(z) for z = (u - 1) / (u + 1) in [0, 1/3), whose series' terms are all
 * positive: its first three fall short by at most 2 z^7 / 7 / (1 - z^2), 1.5e-4. */
static double log_below(double x)
{
    if (!(x >= DBL_MIN)) /* subnormals too: their exponent field is not theirs */
        return -INFINITY;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double u;
    memcpy(&u, &bits, sizeof u);
    double z = (u - 1) / (u + 1), z2 = z * z;
    return e * M_LN2 + 2 * z * (1 + z2 * (1.0 / 3 + z2 / 5)) - 1e-12;
}

/* A margin for rounding: bounds and costs are computed in different orders. */
static double slack(double best)
{
    return 1e-9 * (1 + fabs(best));
}

int perflab_pelt_meanvar(const double *y, size_t n, double pen, double floor, size_t minseg,
                         size_t *ends)
{
    if (minseg < 1 || n < 1 || !(floor > 0))
        return -EINVAL;
    if (n < 2 * minseg) {
        ends[0] = n;
        return 1;
    }
    size_t nblocks = n / BLOCK + 1;
    double *s1 = malloc((n + 1) * sizeof *s1), *s2 = malloc((n + 1) * sizeof *s2);
    double *f = malloc((n + 1) * sizeof *f), *log_m = malloc((n + 1) * sizeof *log_m);
    double *slope = malloc(nblocks * sizeof *slope), *shifted = malloc(nblocks * sizeof *shifted);
    size_t *last = calloc(n + 1, sizeof *last);
    int rc = -ENOMEM;
    if (!s1 || !s2 || !f || !log_m || !slope || !shifted || !last)
        goto out;
    double log_floor = log(floor);
    s1[0] = s2[0] = 0;
    log_m[0] = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        s1[i + 1] = s1[i] + y[i];
        s2[i + 1] = s2[i] + y[i] * y[i];
        log_m[i + 1] = log((double)(i + 1));
    }
    for (size_t i = 0; i <= n; i++)
        f[i] = INFINITY; /* what iterations 1 .. minseg - 1 keep: no segment ends there */
    f[0] = -pen;         /* R's lastchangelike[0]: each segment adds one penalty */
    for (size_t t = minseg; t <= n; t++) {
        size_t top = t - minseg; /* the latest candidate: a last segment of minseg values */
        if (top % BLOCK == BLOCK - 1) {
            /* a block complete: F's slope over it, and its least F less that line */
            size_t b = top / BLOCK, lo = b * BLOCK, first = lo < minseg ? minseg : lo;
            slope[b] = top > first ? (f[top] - f[first]) / (double)(top - first) : 0;
            shifted[b] = INFINITY;
            for (size_t tau = lo; tau <= top; tau++)
                shifted[b] = min2(shifted[b], f[tau] - (double)tau * slope[b]);
        }
        /* the previous best first: it is usually best again, and makes the bounds bite */
        size_t arg = last[t - 1];
        double best = t > minseg ? f[arg] + cost(s1, s2, arg, t, floor) + pen : INFINITY;
        for (size_t b = 0; b <= top / BLOCK; b++) {
            size_t lo = b * BLOCK, hi = lo + BLOCK - 1 < top ? lo + BLOCK - 1 : top;
            double m_short = (double)(t - hi), x = s1[t] - s1[hi], x2 = s2[t] - s2[hi];
            double ss = x2 - x * x / m_short; /* the least sum of squares in the block */
            double log_ss = log_below(ss);
            if (hi == lo + BLOCK - 1) {
                /* m log s^2 >= m lv for every candidate, lv the least log variance: F - t lv
                 * is then the line F(tau) - tau lv, under the block's shifted F by less
                 * than its slope's difference from lv at one end */
                double lv = max2(log_ss - log_m[t - lo], log_floor), d = slope[b] - lv;
                double bound = shifted[b] + (double)t * lv + min2((double)lo * d, (double)hi * d);
                if (bound + pen > best + slack(best))
                    continue;
            }
            /* then each candidate's own F with that least sum of squares: no logarithm */
            double low = INFINITY;
            for (size_t tau = lo; tau <= hi; tau++)
                low = min2(low, f[tau] + (double)(t - tau) * max2(log_ss - log_m[t - tau],
                                                                  log_floor));
            if (low + pen > best + slack(best))
                continue;
            for (size_t tau = lo; tau <= hi; tau++) {
                double m = (double)(t - tau), x1 = s1[t] - s1[tau];
                double sigsq = (s2[t] - s2[tau] - x1 * x1 / m) / m;
                if (f[tau] + m * max2(log_below(sigsq), log_floor) + pen > best + slack(best))
                    continue; /* the exact logarithm only for a candidate that may be best */
                double v = f[tau] + cost(s1, s2, tau, t, floor) + pen;
                if (v < best || (v == best && tau < arg)) {
                    best = v;
                    arg = tau;
                }
            }
        }
        f[t] = best;
        last[t] = arg;
    }
    size_t k = 0;
    for (size_t t = n; t != 0; t = last[t])
        ends[k++] = t;
    for (size_t i = 0; i < k / 2; i++) {
        size_t tmp = ends[i];
        ends[i] = ends[k - 1 - i];
        ends[k - 1 - i] = tmp;
    }
    rc = (int)k;
out:
    free(s1);
    free(s2);
    free(f);
    free(log_m);
    free(slope);
    free(shifted);
    free(last);
    return rc;
}
