/* Host simulation of pkb/80_dinov2_distributed_sinkhorn_knopp (C, no GPU): tolerance and
 * shortcut twins on the input regimes.
 *
 * For W ranks of B x K teacher scores drawn as the harness draws them (normal(0, 0.01) shaped by
 * the regimes of problems/runner/rn_values.h: iid, rank, peaked, row and heavy, with parameters
 * drawn as regime.c draws them), it evaluates PKB's Sinkhorn-Knopp (3 iterations) in fp64 (the
 * truth), in fp32 as problem.cu's reference does it (PyTorch's rounding points, sums in sequence:
 * the least favourable honest order), and the twins: shortcut_early_stop (2 iterations),
 * shortcut_skip_exchange (the local per-prototype sums times W), wrong (the per-prototype sums
 * miss rank 0's part). It prints each one's largest relative error against fp64 (elements
 * >= 1e-3 of the largest; absolute below) and its norm-wise error, per regime.
 * Build: cc -O2 -Ibench/pkb -Icommon/include -Iproblems/runner bench/pkb/sim_80_sinkhorn.c -lm
 * Usage: ./a.out [W] [B] [K] [calls]   (default 2 1024 16384 2; odd calls clustered) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rn_values.h"

enum { IID, RANK, ROW, HEAVY, PEAKED, NREG };
static const char *names[NREG] = {"iid", "rank", "row", "heavy", "peaked"};

static double unit_of(uint64_t base, uint64_t salt) {
    return pk_splitmix_unit(base + salt);
}

/* teacher_output of rank r under regime `reg`, as rn_gen_value with gen normal(0, 0.01). */
static void draw_scores(float *t, int reg, int r, int W, long long B, long long K, uint64_t key) {
    rn_gen g;
    memset(&g, 0, sizeof g);
    g.kind = 0;
    g.a = 0;
    g.b = 0.01;
    g.regime = reg == IID ? 0 : reg == RANK ? 1 : reg == ROW ? 2 : reg == HEAVY ? 3 : 4;
    uint64_t base = pk_splitmix64(key * 7919 + 1), mine = pk_splitmix64(base + 0x100 + r);
    /* rank exponents: the W levels of [-4, 4], here in rank order, jittered */
    double ex = -4.0 + 8.0 * (r + 0.25 + 0.5 * unit_of(base, 202 + r)) / W;
    g.shift_ok = 1;
    g.row_len = (uint64_t)K;
    g.n_rows = (uint64_t)B;
    g.rkey = pk_splitmix64(mine + 1);
    g.ckey = pk_splitmix64(mine + 2);
    g.scale = exp2(ex / 2);
    g.ramp_r = (2.0 + 2.0 * unit_of(mine, 11)) * (unit_of(mine, 12) < 0.5 ? -1 : 1);
    g.ramp_c = (2.0 + 2.0 * unit_of(mine, 13)) * (unit_of(mine, 14) < 0.5 ? -1 : 1);
    if (reg == RANK) {
        g.scale = exp2(ex / 2 - 6.0 + 2.0 * unit_of(base, 15));
        g.shift = g.scale * 0.01 * (4.0 * unit_of(mine, 4) - 2.0);
    } else if (reg == HEAVY) {
        g.p = pow(10.0, -6.0 + 4.0 * unit_of(mine, 5));
        g.amp = exp2(4.0 + 2.0 * unit_of(mine, 6));
    } else if (reg == PEAKED) {
        g.p = (1.0 + 3.0 * unit_of(base, 7)) / (double)K;
        g.amp = g.scale * 0.01 * (6.0 + 6.0 * unit_of(mine, 8));
    }
    const uint64_t stream = pk_splitmix64(key ^ (0xabcdull + (uint64_t)r));
    for (long long i = 0; i < B * K; i++)
        t[i] = (float)rn_gen_value(&g, 0, stream, (size_t)i);
}

/* problem.cu's generate(), clustered calls: sample b of rank r belongs to cluster
 * perm_r(floor(64 u^3)) (skewed: the first of rank r's clusters takes ~40% of its samples, and
 * every rank favours other clusters), and its scores for that cluster's K/64 prototypes are
 * raised by `boost` (0.2..0.35: e^2.9..e^5 after the temperature). */
static void add_clusters(float *t, int r, long long B, long long K, uint64_t key) {
    const uint64_t k0 = pk_splitmix64(key ^ 0x80c1ull);
    const double boost = 0.2 + 0.15 * pk_splitmix_unit(k0);
    const uint64_t a = 2 * (pk_splitmix64(k0 + 1 + (uint64_t)r) % 32) + 1,
                   sh = pk_splitmix64(k0 + 100 + (uint64_t)r) % 64;
    const long long per = K / 64;
    for (long long b = 0; b < B; b++) {
        const double u = pk_splitmix_unit(pk_splitmix64(k0 + 1000 + (uint64_t)r) + (uint64_t)b);
        const uint64_t j = (uint64_t)(64.0 * u * u * u) % 64, c = (j * a + sh) % 64;
        for (long long k = (long long)c * per; k < (long long)(c + 1) * per; k++)
            t[b * K + k] += (float)boost;
    }
}

/* Sinkhorn on all ranks' q (W blocks of B x K), in double. mode: 0 exact, 1 skip exchange
 * (local sums x W), 2 the sums miss rank 0's part. */
static void sinkhorn64(double **q, int W, long long B, long long K, int iters, int mode) {
    double *loc = malloc(sizeof(double) * K * W), *tot = malloc(sizeof(double) * K);
    for (int it = 0; it < iters; it++) {
        for (int r = 0; r < W; r++)
            for (long long k = 0; k < K; k++) {
                double s = 0;
                for (long long b = 0; b < B; b++)
                    s += q[r][b * K + k];
                loc[r * K + k] = s;
            }
        for (long long k = 0; k < K; k++) {
            tot[k] = 0;
            for (int r = mode == 2 ? 1 : 0; r < W; r++)
                tot[k] += loc[r * K + k];
        }
        for (int r = 0; r < W; r++)
            for (long long b = 0; b < B; b++) {
                double c = 0;
                for (long long k = 0; k < K; k++) {
                    double d = mode == 1 ? W * loc[r * K + k] : tot[k];
                    q[r][b * K + k] /= d * (double)K;
                    c += q[r][b * K + k];
                }
                for (long long k = 0; k < K; k++)
                    q[r][b * K + k] /= c;
            }
    }
    free(loc);
    free(tot);
}

/* problem.cu's reference in fp32, sums in sequence. */
static void sinkhorn32(float **q, const float *const *t, int W, long long B, long long K, int iters,
                       float temp) {
    float mass = 0, tb = (float)(B * W);
    for (int r = 0; r < W; r++) {
        float m = 0;
        for (long long i = 0; i < B * K; i++) {
            q[r][i] = expf(t[r][i] / temp);
            m += q[r][i];
        }
        mass += m;
    }
    for (int r = 0; r < W; r++)
        for (long long i = 0; i < B * K; i++)
            q[r][i] /= mass;
    float *tot = malloc(sizeof(float) * K);
    for (int it = 0; it < iters; it++) {
        for (long long k = 0; k < K; k++)
            tot[k] = 0;
        for (int r = 0; r < W; r++)
            for (long long k = 0; k < K; k++) {
                float s = 0;
                for (long long b = 0; b < B; b++)
                    s += q[r][b * K + k];
                tot[k] += s;
            }
        for (int r = 0; r < W; r++)
            for (long long b = 0; b < B; b++) {
                float c = 0;
                for (long long k = 0; k < K; k++) {
                    q[r][b * K + k] = q[r][b * K + k] / tot[k] / (float)K;
                    c += q[r][b * K + k];
                }
                for (long long k = 0; k < K; k++)
                    q[r][b * K + k] = q[r][b * K + k] / c / tb;
            }
    }
    for (int r = 0; r < W; r++)
        for (long long i = 0; i < B * K; i++)
            q[r][i] *= tb;
    free(tot);
}

/* the largest relative error (elements >= 1e-3 of the largest) and the norm-wise error */
static void errors(double **want, double **got, int W, long long n, double *rel, double *abs_small,
                   double *norm) {
    double mx = 0, num = 0, den = 0;
    *rel = *abs_small = 0;
    for (int r = 0; r < W; r++)
        for (long long i = 0; i < n; i++)
            mx = fmax(mx, fabs(want[r][i]));
    for (int r = 0; r < W; r++)
        for (long long i = 0; i < n; i++) {
            double w = want[r][i], d = fabs(got[r][i] - w);
            if (!(d == d)) {
                *rel = *abs_small = *norm = INFINITY;
                return;
            }
            if (fabs(w) >= 1e-3 * mx)
                *rel = fmax(*rel, d / fabs(w));
            else
                *abs_small = fmax(*abs_small, d);
            num += d * d;
            den += w * w;
        }
    *norm = sqrt(num / den);
}

int main(int argc, char **argv) {
    const int W = argc > 1 ? atoi(argv[1]) : 2;
    const long long B = argc > 2 ? atoll(argv[2]) : 1024, K = argc > 3 ? atoll(argv[3]) : 16384;
    const int calls = argc > 4 ? atoi(argv[4]) : 2;
    const float temp = 0.07f;
    const long long n = B * K;
    float **t = malloc(sizeof(float *) * W), **q32 = malloc(sizeof(float *) * W);
    double **want = malloc(sizeof(double *) * W), **got = malloc(sizeof(double *) * W);
    for (int r = 0; r < W; r++) {
        t[r] = malloc(sizeof(float) * n);
        q32[r] = malloc(sizeof(float) * n);
        want[r] = malloc(sizeof(double) * n);
        got[r] = malloc(sizeof(double) * n);
    }
    printf("W=%d B=%lld K=%lld: largest rel error (>= 1e-3 max), abs error below, norm-wise\n", W,
           B, K);
    for (int reg = 0; reg < NREG; reg++)
        for (int c = 0; c < calls; c++) {
            const int clustered = c % 2;
            for (int r = 0; r < W; r++) {
                draw_scores(t[r], reg, r, W, B, K, (uint64_t)(reg * 1000 + c + 1));
                if (clustered)
                    add_clusters(t[r], r, B, K, (uint64_t)(reg * 1000 + c + 1));
            }
            for (int r = 0; r < W; r++)
                for (long long i = 0; i < n; i++)
                    want[r][i] = exp((double)(t[r][i] / temp));
            sinkhorn64(want, W, B, K, 3, 0);
            const char *what[4] = {"fp32 reference", "early stop (2)", "skip exchange",
                                   "sums miss rank 0"};
            for (int v = 0; v < 4; v++) {
                if (v == 0) {
                    sinkhorn32(q32, (const float *const *)t, W, B, K, 3, temp);
                    for (int r = 0; r < W; r++)
                        for (long long i = 0; i < n; i++)
                            got[r][i] = q32[r][i];
                } else {
                    for (int r = 0; r < W; r++)
                        for (long long i = 0; i < n; i++)
                            got[r][i] = exp((double)(t[r][i] / temp));
                    sinkhorn64(got, W, B, K, v == 1 ? 2 : 3, v == 1 ? 0 : v - 1);
                }
                double rel, ab, nrm;
                errors(want, got, W, n, &rel, &ab, &nrm);
                printf("%-7s %-9s %-17s rel %.3g  abs %.3g  norm %.3g\n", names[reg],
                       clustered ? "clustered" : "plain", what[v], rel, ab, nrm);
            }
        }
    return 0;
}
