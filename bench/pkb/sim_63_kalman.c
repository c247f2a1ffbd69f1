/* Host simulation of pkb/63_deepmd_kalman_filter_optimizer (C, no GPU): tolerance, wrong example
 * and shortcut twins on the input regimes and on generate()'s covariances.
 *
 * For W ranks of nb blocks drawn as the harness draws them (H normal(0, 0.01), weights and error
 * normal(0, 1), shaped by rn_values.h's regimes; P as problem.cu's generate() makes it: the
 * identity on even call keys, dense c (I + D + a u u^T) on odd ones), it evaluates PKB's
 * solution() step by step in long double (H^T P first, then times H, as PKB's matmuls; the
 * truth), and in fp64: the reference (K = P H, H . K, the all-reduce in rank order), wrong.cu
 * (lam added once), shortcut_skip_exchange.cu (the local tmp times W), shortcut_subsample.cu
 * (half of each block's H . K, doubled), shortcut_assumed_identity.cu (P = I: K = H, P' from
 * the identity). It prints, per regime and covariance kind, the largest relative error of
 * weights_out and P_out (elements >= 1e-3 of the largest; absolute below) and whether each
 * passes meta.json's tolerance (rtol 1e-12, atol_rms 1e-13) on every rank, and the reference's
 * 4x-rule ratio (4 x its error against the truth over the tolerance; <= 1 holds).
 * Build: cc -O2 -Icommon/include -Iproblems/runner bench/pkb/sim_63_kalman.c -lm
 * Usage: ./a.out [W] [nb] [block]   (default 2 8 256) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rn_values.h"

/* meta.json's tolerance of weights_out and P_out: rtol |want| + atol_rms rms(want) */
#define RTOL 1e-12
#define ATOL_RMS 1e-13

enum { IID, RANK, ROW, HEAVY, PEAKED, NREG };
static const char *names[NREG] = {"iid", "rank", "row", "heavy", "peaked"};
enum { V_REF, V_WRONG, V_SKIP, V_SUB, V_ID, NV };
static const char *vnames[NV] = {"reference", "wrong", "skip", "subsample", "assumed_identity"};

static double unit_of(uint64_t base, uint64_t salt) {
    return pk_splitmix_unit(pk_splitmix64(base ^ pk_splitmix64(salt)));
}

static void draw(double *x, long long count, long long row_len, double std, int reg, int arg, int r,
                 int W, uint64_t key) {
    rn_gen g;
    memset(&g, 0, sizeof g);
    g.kind = 0;
    g.a = 0;
    g.b = std;
    g.regime = reg == IID ? 0 : reg == RANK ? 1 : reg == ROW ? 2 : reg == HEAVY ? 3 : 4;
    uint64_t base = pk_splitmix64(0x7265676dull ^ pk_splitmix64(key << 8 | (uint64_t)arg));
    uint64_t mine = pk_splitmix64(base + 0x100 + (uint64_t)r);
    double ex = -4.0 + 8.0 * (r + 0.25 + 0.5 * unit_of(base, 202 + (uint64_t)r)) / W;
    g.shift_ok = 1;
    g.row_len = (uint64_t)row_len;
    g.n_rows = (uint64_t)(count / row_len);
    g.rkey = pk_splitmix64(mine + 1);
    g.ckey = pk_splitmix64(mine + 2);
    g.scale = exp2(ex / 2);
    g.ramp_r = (2.0 + 2.0 * unit_of(mine, 11)) * (unit_of(mine, 12) < 0.5 ? -1 : 1);
    g.ramp_c = (2.0 + 2.0 * unit_of(mine, 13)) * (unit_of(mine, 14) < 0.5 ? -1 : 1);
    if (reg == RANK) {
        g.scale = exp2(ex / 2 - 6.0 + 2.0 * unit_of(base, 15));
        g.shift = g.scale * std * (4.0 * unit_of(mine, 4) - 2.0);
    } else if (reg == HEAVY) {
        g.p = pow(10.0, -6.0 + 4.0 * unit_of(mine, 5));
        g.amp = exp2(4.0 + 2.0 * unit_of(mine, 6));
    } else if (reg == PEAKED) {
        g.p = (1.0 + 3.0 * unit_of(base, 7)) / (double)row_len;
        g.amp = g.scale * std * (6.0 + 6.0 * unit_of(mine, 8));
    }
    const uint64_t stream = pk_splitmix64(key ^ (0xabcdull + (uint64_t)r * 8 + (uint64_t)arg));
    for (long long i = 0; i < count; i++)
        x[i] = rn_gen_value(&g, 0, stream, (size_t)i);
}

/* problem.cu's make_P, element (i, a, b) */
static double p_elem(uint64_t k, long long i, long long a, long long b, long long block,
                     int dense) {
    double v = a == b ? 1.0 : 0.0;
    if (dense) {
        const uint64_t ki = pk_splitmix64(k + (uint64_t)i);
        const double c = exp2(-2.0 + 4.0 * pk_splitmix_unit(ki)),
                     amp = 0.5 + 2.5 * pk_splitmix_unit(ki + 1);
        const long long lo = a < b ? a : b, hi = a < b ? b : a;
        const double ua = pk_splitmix_unit(ki + 100 + (uint64_t)lo) - 0.5,
                     ub = pk_splitmix_unit(ki + 100 + (uint64_t)hi) - 0.5;
        const double d = a == b ? 3.0 * pk_splitmix_unit(ki + 100 + (uint64_t)block + a) : 0.0;
        v = c * (v + d + amp * ua * ub * 4.0 / sqrt((double)block) * 8.0);
    }
    return v;
}

int main(int argc, char **argv) {
    const int W = argc > 1 ? atoi(argv[1]) : 2;
    const long long nb = argc > 2 ? atoll(argv[2]) : 8, block = argc > 3 ? atoll(argv[3]) : 256;
    const double lam = 0.98;
    const long long n = nb * block, bb = block * block;
    double *H = malloc(sizeof(double) * (size_t)(W * n)),
           *w = malloc(sizeof(double) * (size_t)(W * n));
    double *P = malloc(sizeof(double) * (size_t)(W * nb * bb)), err[8];
    long double *Kt = malloc(sizeof(long double) * (size_t)(W * n));
    double *K = malloc(sizeof(double) * (size_t)(W * n));
    double *wt = malloc(sizeof(double) * (size_t)(W * n)),
           *wg = malloc(sizeof(double) * (size_t)(W * n));
    printf("W=%d nb=%lld block=%lld: largest relative error (weights_out, P_out), pass = within "
           "rtol 1e-12 + atol_rms 1e-13 "
           "everywhere\n",
           W, nb, block);
    for (int dense = 0; dense < 2; dense++)
        for (int reg = 0; reg < NREG; reg++) {
            const uint64_t key = (uint64_t)(100 * dense + 7 * reg + 3);
            for (int r = 0; r < W; r++) {
                draw(H + r * n, n, block, 0.01, reg, 0, r, W, key);
                draw(err + r, 1, 1, 1.0, reg, 1, r, W, key);
                draw(w + r * n, n, block, 1.0, reg, 2, r, W, key);
                const uint64_t k = pk_splitmix64(0x5eed ^ key) + 1000003ull * (uint64_t)r;
                for (long long i = 0; i < nb; i++)
                    for (long long a = 0; a < block; a++)
                        for (long long b = 0; b < block; b++)
                            P[r * nb * bb + i * bb + a * block + b] =
                                p_elem(k, i, a, b, block, dense);
            }
            /* truth: PKB's steps in long double */
            long double T = 0;
            double tmpv[NV][8];
            for (int r = 0; r < W; r++) {
                long double t = 0;
                double tr = 0, tw = 0, ts = 0, ti = 0;
                for (long long i = 0; i < nb; i++) {
                    const double *Pi = P + r * nb * bb + i * bb, *h = H + r * n + i * block;
                    long double s = 0;
                    for (long long b = 0; b < block; b++) { /* (H^T P)[b] H[b] */
                        long double row = 0;
                        for (long long a = 0; a < block; a++)
                            row += (long double)h[a] * Pi[a * block + b];
                        s += row * h[b];
                    }
                    t = t + ((long double)lam + s);
                    double sd = 0, sh = 0, si = 0;
                    for (long long a = 0; a < block; a++) {
                        double ka = 0;
                        long double kt = 0;
                        for (long long b = 0; b < block; b++) {
                            ka += Pi[a * block + b] * h[b];
                            kt += (long double)Pi[a * block + b] * h[b];
                        }
                        K[r * n + i * block + a] = ka;
                        Kt[r * n + i * block + a] = kt;
                        sd += h[a] * ka;
                        if (a < block / 2)
                            sh += h[a] * ka;
                        si += h[a] * h[a];
                    }
                    tr = tr + (lam + sd);
                    tw = tw + sd;
                    ts = ts + (lam + 2.0 * sh);
                    ti = ti + (lam + si);
                }
                T += t;
                tmpv[V_REF][r] = tr;
                tmpv[V_WRONG][r] = tw;
                tmpv[V_SUB][r] = ts;
                tmpv[V_ID][r] = ti;
            }
            double errw[NV], errp[NV];
            int pass[NV];
            for (int v = 0; v < NV; v++) {
                errw[v] = errp[v] = 0;
                pass[v] = 1;
            }
            const long double At = 1.0L / T;
            /* rms of the true outputs (the tolerance's atol_rms part) */
            double ssw = 0, ssp = 0;
            for (int q = 0; q < W; q++) {
                for (long long e = 0; e < n; e++) {
                    const double t = (double)((long double)w[q * n + e] +
                                              At * (long double)err[q] * Kt[q * n + e]);
                    ssw += t * t;
                }
                for (long long i = 0; i < nb; i++)
                    for (long long a = 0; a < block; a++)
                        for (long long b = 0; b < block; b++) {
                            const long long e = q * nb * bb + i * bb + a * block + b;
                            const double t = (double)((P[e] - At * Kt[q * n + i * block + a] *
                                                                  Kt[q * n + i * block + b]) /
                                                      (long double)lam);
                            ssp += t * t;
                        }
            }
            const double rmsw = sqrt(ssw / (double)(W * n)),
                         rmsp = sqrt(ssp / (double)(W * nb * bb));
            double ratio = 0; /* the reference's 4x-rule ratio */
            for (int v = 0; v < NV; v++) {
                /* per producing rank q: its updated weights as it computes them */
                double mx = 0;
                for (int q = 0; q < W; q++) {
                    double Tv = 0;
                    if (v == V_SKIP)
                        Tv = W * tmpv[V_REF][q];
                    else if (v == V_WRONG) {
                        for (int p = 0; p < W; p++)
                            Tv += tmpv[V_WRONG][p];
                        Tv = lam + Tv;
                    } else
                        for (int p = 0; p < W; p++)
                            Tv += tmpv[v][p];
                    const double A = 1.0 / Tv, c = A * err[q];
                    for (long long e = 0; e < n; e++) {
                        const double Ke = v == V_ID ? H[q * n + e] : K[q * n + e];
                        wg[q * n + e] = w[q * n + e] + c * Ke;
                        wt[q * n + e] = (double)((long double)w[q * n + e] +
                                                 At * (long double)err[q] * Kt[q * n + e]);
                        if (fabs(wt[q * n + e]) > mx)
                            mx = fabs(wt[q * n + e]);
                    }
                    /* P_out of rank q */
                    for (long long i = 0; i < nb; i++)
                        for (long long a = 0; a < block; a++)
                            for (long long b = 0; b < block; b++) {
                                const long long e = q * nb * bb + i * bb + a * block + b;
                                const long double kk =
                                    Kt[q * n + i * block + a] * Kt[q * n + i * block + b];
                                const double want = (double)((P[e] - At * kk) / (long double)lam);
                                const double Ka = v == V_ID ? H[q * n + i * block + a]
                                                            : K[q * n + i * block + a],
                                             Kb = v == V_ID ? H[q * n + i * block + b]
                                                            : K[q * n + i * block + b];
                                const double pe = v == V_ID ? (a == b ? 1.0 : 0.0) : P[e];
                                const double got = (1.0 / lam) * (pe - A * (Ka * Kb));
                                const double d = fabs(got - want),
                                             tol = RTOL * fabs(want) + ATOL_RMS * rmsp;
                                if (!(d <= tol))
                                    pass[v] = 0;
                                if (v == V_REF && !(4 * d / tol <= ratio))
                                    ratio = 4 * d / tol;
                                const double rel = fabs(want) > 1e-3 ? d / fabs(want) : d;
                                if (!(rel <= errp[v]))
                                    errp[v] = rel;
                            }
                }
                for (long long e = 0; e < W * n; e++) {
                    const double d = fabs(wg[e] - wt[e]),
                                 tol = RTOL * fabs(wt[e]) + ATOL_RMS * rmsw;
                    if (!(d <= tol))
                        pass[v] = 0;
                    if (v == V_REF && !(4 * d / tol <= ratio))
                        ratio = 4 * d / tol;
                    const double rel = fabs(wt[e]) >= 1e-3 * mx ? d / fabs(wt[e]) : d;
                    if (!(rel <= errw[v]))
                        errw[v] = rel;
                }
            }
            printf("  %-7s %s", names[reg], dense ? "dense P   " : "identity P");
            for (int v = 0; v < NV; v++)
                printf(" %s %.1e %.1e %s;", vnames[v], errw[v], errp[v], pass[v] ? "pass" : "FAIL");
            printf(" reference's 4x-rule ratio %.3f\n", ratio);
        }
    free(H);
    free(w);
    free(P);
    free(Kt);
    free(K);
    free(wt);
    free(wg);
    return 0;
}
