/* How much of a rank's communication overlapped with its computation: the measure of the
 * intersection of the two interval unions over the measure of the communication union. */
#include "pk_profile.h"

#include <stdlib.h>
#include <string.h>

typedef struct span {
    double lo, hi;
} span;

static int by_lo(const void *a, const void *b) {
    double x = ((const span *)a)->lo, y = ((const span *)b)->lo;
    return (x > y) - (x < y);
}

/* The intervals of one kind (kind < 0: all) on rank, sorted and merged in place. */
static int merged(const pk_prof_interval *iv, int n, int rank, int kind, span *out) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if ((rank < 0 || iv[i].rank == rank) && (kind < 0 || iv[i].kind == kind) &&
            iv[i].end_ns > iv[i].start_ns)
            out[m++] = (span){iv[i].start_ns, iv[i].end_ns};
    qsort(out, (size_t)m, sizeof *out, by_lo);
    int k = 0;
    for (int i = 0; i < m; i++) {
        if (k > 0 && out[i].lo <= out[k - 1].hi) {
            if (out[i].hi > out[k - 1].hi)
                out[k - 1].hi = out[i].hi;
        } else {
            out[k++] = out[i];
        }
    }
    return k;
}

static double measure(const span *s, int n) {
    double t = 0;
    for (int i = 0; i < n; i++)
        t += s[i].hi - s[i].lo;
    return t;
}

/* Measure of the intersection of two sorted, disjoint lists. */
static double intersection(const span *a, int na, const span *b, int nb) {
    double t = 0;
    int i = 0, j = 0;
    while (i < na && j < nb) {
        double lo = a[i].lo > b[j].lo ? a[i].lo : b[j].lo;
        double hi = a[i].hi < b[j].hi ? a[i].hi : b[j].hi;
        if (hi > lo)
            t += hi - lo;
        if (a[i].hi < b[j].hi)
            i++;
        else
            j++;
    }
    return t;
}

pk_prof_overlap pk_profile_overlap(const pk_prof_interval *iv, int n, int rank) {
    pk_prof_overlap o = {0, 0, 0, 0, -1};
    if (n <= 0)
        return o;
    span *buf = malloc(3 * (size_t)n * sizeof *buf);
    if (!buf)
        return o;
    span *comm = buf, *comp = buf + n, *all = buf + 2 * n;
    int nc = merged(iv, n, rank, PK_PROF_COMM, comm);
    int np = merged(iv, n, rank, PK_PROF_COMPUTE, comp);
    int na = merged(iv, n, rank, -1, all);
    o.comm_ns = measure(comm, nc);
    o.compute_ns = measure(comp, np);
    o.overlap_ns = intersection(comm, nc, comp, np);
    if (na > 0)
        o.span_ns = all[na - 1].hi - all[0].lo;
    if (o.comm_ns > 0)
        o.fraction = o.overlap_ns / o.comm_ns;
    free(buf);
    return o;
}
