/* Timing statistics: median, mean, min and coefficient of variation. */
#include "pk_runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void rn_timing_stats(const double *us, int n, pk_timing *out) {
    memset(out, 0, sizeof *out);
    if (n <= 0)
        return;
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s)
        return;
    memcpy(s, us, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
        sum += s[i];
    double mean = sum / n;
    for (int i = 0; i < n; i++)
        sq += (s[i] - mean) * (s[i] - mean);
    out->median_us = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    out->mean_us = mean;
    out->min_us = s[0];
    out->cv = n > 1 && mean > 0 ? sqrt(sq / (n - 1)) / mean : 0;
    out->iters = n;
    free(s);
}
