/* Host simulation of pkb/76_opensora_conv3d_allreduce (C, no GPU): index arithmetic, tolerance
 * and the shortcut twins on the input regimes.
 *
 * Part 1 (index arithmetic, exact): at small dims (Co = 16, Cl = Co / W, T = 5, Hh = 6, Wd = 7:
 * a non-square frame, so a transposed index shows) and integer inputs, in double without
 * rounding, it compares PKB's solution() (ported line by line: _output_shape, _chunk_count,
 * F.conv3d with stride 1, padding 0, dilation 1, the all-reduce, the bias) with problem.cu's
 * reference (build_shifted, rearrange_weight, the three column-major GEMMs at offset dt Ho Wo
 * with lda = T Ho Wo, round_partial, the all-reduce, add_bias), correct.cu (im2col, the chunked
 * GEMM with B = the weight as it is, the reduction of each rank's output-channel slice of each
 * chunk) and the twins' and wrong's index formulas, at W = 2, 4, 8. It also evaluates PKB's
 * chunk counts at PKB's dims (1 and 1: F.conv3d is called once).
 *
 * Part 2 (numerics): PKB's channels (Co = 512, Cl = 512 / W) on a small frame (T = 5, Hh = Wd = 6:
 * 48 output pixels x 512 channels per call), x, weight and bias drawn as the harness draws them
 * (problems/runner/rn_values.h with regime.c's parameter draws; x and weight per rank, the bias
 * replicated, normal(0, 32)), rounded to bf16. Against the fp64 truth it evaluates PKB's
 * solution (bf16 conv partial, NCCL's bf16 all-reduce rounding after every hop in ring order,
 * the bias added in bf16), the reference (the same, the conv as three fp32-accumulated GEMMs),
 * correct.cu (bf16 partials summed in fp32 in rank order, one rounding), wrong.cu (the bias added
 * before the all-reduce, on every rank), shortcut_skip_exchange.cu (W times the local partial),
 * shortcut_bf16_accumulate.cu (a bf16 accumulator, __hfma per product: 27 Cl roundings) and,
 * for information, coarser bf16 accumulations: one rounding per 16-channel MMA step of each
 * tap (SLAB), per tap (27 roundings) and per kernel depth (3 roundings). It prints, per regime,
 * each one's largest error over rms(want), its error's standard deviation over rms(want), its
 * norm-wise error, `ratio` (the largest error over meta.json's element-wise tolerance: an honest
 * implementation must stay below 1/4 by the rule of docs/problems.md, "Tolerances"), `need`
 * (the atol_rms at which 4x its error would pass with rtol 0.016) and how many calls x ranks
 * meta.json's tolerance (element-wise and norm-wise) fails. Exit status 1 if part 1 finds a
 * mismatch.
 * Build: cc -O2 -Icommon/include -Iproblems/runner bench/pkb/sim_76_opensora_conv3d_allreduce.c -lm
 * Usage: ./a.out [calls per regime]   (default 2) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rn_values.h"

/* meta.json's tolerance of y */
#define RTOL 0.016
#define ATOL_RMS 0.1
#define NORM_RTOL 0.05 /* the default, max(rtol, atol_rms) / 2 */
/* the informational slab variant: channels per bf16-accumulated MMA step */
#define SLAB 16

static float bf16r(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- part 1: index arithmetic */

/* PKB's _output_shape and _chunk_count (the numel limit 2^31). */
static long long pkb_out_dim(long long size, int pad, int dil, int k, int stride) {
    return (long long)floor((double)(size + 2 * pad - dil * (k - 1) - 1) / stride + 1);
}
static long long pkb_chunk_count(long long numel, long long channels, long long limit) {
    long long chunks = (numel + limit - 1) / limit;
    /* _ceil_to_divisible(n, dividend) = ceil(dividend / (dividend // n)) */
    long long q = channels / chunks;
    return (channels + q - 1) / q;
}

/* F.conv3d(x, w, None, 1, 0, 1, 1) of one rank, batch 1: out[co][t][i][j]. */
static void pkb_conv3d(const double *x, const double *w, double *out, int Co, int Cl, int T, int Hh,
                       int Wd) {
    const int To = T - 2, Ho = Hh - 2, Wo = Wd - 2;
    for (int co = 0; co < Co; co++)
        for (int t = 0; t < To; t++)
            for (int i = 0; i < Ho; i++)
                for (int j = 0; j < Wo; j++) {
                    double s = 0;
                    for (int ci = 0; ci < Cl; ci++)
                        for (int a = 0; a < 3; a++)
                            for (int b = 0; b < 3; b++)
                                for (int c = 0; c < 3; c++)
                                    s += w[(((co * Cl + ci) * 3 + a) * 3 + b) * 3 + c] *
                                         x[((ci * T + t + a) * Hh + i + b) * Wd + j + c];
                    out[((co * To + t) * Ho + i) * Wo + j] = s;
                }
}

/* Column-major GEMM C[m + n ldc] (+)= sum_k A[m + k lda] B[k + n ldb] (cuBLAS OP_N, OP_N). */
static void gemm_cm(int M, int N, int K, const double *A, long long lda, const double *B,
                    long long ldb, double beta, double *C, long long ldc) {
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += A[m + k * lda] * B[k + n * ldb];
            C[m + n * ldc] = s + (beta != 0 ? C[m + n * ldc] : 0);
        }
}

/* problem.cu's reference on one rank, up to the partial (the all-reduce and bias follow). */
static void ref_partial(const double *x, const double *w, double *part, int Co, int Cl, int T,
                        int Hh, int Wd) {
    const long long Ho = Hh - 2, Wo = Wd - 2, plane = Ho * Wo, P = (T - 2) * plane;
    double *xs = malloc(sizeof(double) * 9 * Cl * T * plane);
    double *wr = malloc(sizeof(double) * 27 * Co * Cl);
    /* build_shifted: xs[q = 3 dy + dx][ci][t][i][j] = x[ci][t][i + dy][j + dx] */
    const long long n = 9LL * Cl * T * plane;
    for (long long e = 0; e < n; e++) {
        const long long q = e / (Cl * T * plane), ci = e / (T * plane) % Cl, t = e / plane % T;
        const long long i = e % plane / Wo, j = e % Wo, dy = q / 3, dx = q % 3;
        xs[e] = x[((ci * T + t) * Hh + i + dy) * Wd + j + dx];
    }
    /* rearrange_weight: wr[dt][co][q Cl + ci] = w[co][ci][dt][q] */
    const long long nw = 27LL * Co * Cl;
    for (long long e = 0; e < nw; e++) {
        const long long dt = e / (Co * 9 * Cl), co = e / (9 * Cl) % Co, q = e % (9 * Cl) / Cl,
                        ci = e % Cl;
        wr[e] = w[(co * Cl + ci) * 27 + dt * 9 + q];
    }
    for (int dt = 0; dt < 3; dt++)
        gemm_cm((int)P, Co, 9 * Cl, xs + dt * plane, T * plane, wr + (long long)dt * Co * 9 * Cl,
                9 * Cl, dt ? 1.0 : 0.0, part, P);
    free(xs);
    free(wr);
}

/* correct.cu on one rank, up to the partial: im2col col[k][p] (k = 27 ci + tap, p < P; ld P)
 * and the GEMM over nch chunks of P with B = the weight as it is (ldb = 27 Cl). */
static void correct_partial(const double *x, const double *w, double *part, int Co, int Cl, int T,
                            int Hh, int Wd, int nch) {
    const long long Ho = Hh - 2, Wo = Wd - 2, plane = Ho * Wo, P = (T - 2) * plane, K = 27LL * Cl;
    double *col = malloc(sizeof(double) * K * P);
    for (long long e = 0; e < K * P; e++) {
        const long long k = e / P, p = e % P, ci = k / 27, tap = k % 27;
        const long long dt = tap / 9, dy = tap / 3 % 3, dx = tap % 3;
        const long long t = p / plane, i = p % plane / Wo, j = p % Wo;
        col[e] = x[((ci * T + t + dt) * Hh + i + dy) * Wd + j + dx];
    }
    const long long Pc = P / nch;
    for (int c = 0; c < nch; c++)
        gemm_cm((int)Pc, Co, (int)K, col + c * Pc, P, w, K, 0.0, part + c * Pc, P);
    free(col);
}

/* correct.cu's reduce_slice on rank r for chunk c: output channels [r Co/W, (r+1) Co/W), pixels
 * [c Pc, (c+1) Pc): y = sum over ranks s in order of part_s, then the bias; written to every
 * rank's y. (Exact here: the rounding is part 2's.) */
static void correct_reduce(double *const *part, double *const *y, const double *bias, int W, int r,
                           int Co, long long P, int nch, int c) {
    const long long Pc = P / nch, per = Co / W, n = per * Pc;
    for (long long e = 0; e < n; e++) {
        const long long co = r * per + e / Pc, p = c * Pc + e % Pc;
        double s = 0;
        for (int q = 0; q < W; q++)
            s += part[q][co * P + p];
        for (int q = 0; q < W; q++)
            y[q][co * P + p] = s + bias[co];
    }
}

static int part1(void) {
    int bad = 0;
    /* PKB's chunking at its own dims: one conv3d call at every W */
    for (int W = 2; W <= 8; W *= 2) {
        const long long Cl = 512 / W, numel_in = Cl * 19 * 66 * 66;
        const long long To = pkb_out_dim(19, 0, 1, 3, 1), Ho = pkb_out_dim(66, 0, 1, 3, 1);
        const long long numel_out = 512 * To * Ho * Ho;
        const long long ic = pkb_chunk_count(numel_in, Cl, 1LL << 31),
                        oc = pkb_chunk_count(numel_out, 512, 1LL << 31);
        printf(
            "PKB dims, W=%d: output (1, 512, %lld, %lld, %lld), in_chunks %lld out_chunks %lld\n",
            W, To, Ho, Ho, ic, oc);
        bad += ic != 1 || oc != 1 || To != 17 || Ho != 64;
    }
    const int Co = 16, T = 5, Hh = 6, Wd = 7;
    for (int W = 2; W <= 8; W *= 2) {
        const int Cl = Co / W;
        const long long To = T - 2, Ho = Hh - 2, Wo = Wd - 2, P = To * Ho * Wo, ny = Co * P;
        double *x[8], *w[8], *pkb[8], *ref[8], *cor[8], *cory[8], *wrong[8], *skip[8];
        double bias[16];
        uint64_t key = 0x76ull + (uint64_t)W;
        for (int co = 0; co < Co; co++)
            bias[co] = (double)((int)(pk_splitmix64(key + 999 + co) % 9) - 4);
        for (int r = 0; r < W; r++) {
            const long long nx = (long long)Cl * T * Hh * Wd, nw = 27LL * Co * Cl;
            x[r] = malloc(sizeof(double) * nx);
            w[r] = malloc(sizeof(double) * nw);
            for (long long i = 0; i < nx; i++)
                x[r][i] = (double)((int)(pk_splitmix64(key * 131 + r * 7919 + i) % 7) - 3);
            for (long long i = 0; i < nw; i++)
                w[r][i] = (double)((int)(pk_splitmix64(key * 137 + r * 104729 + i) % 5) - 2);
            pkb[r] = malloc(sizeof(double) * ny);
            ref[r] = malloc(sizeof(double) * ny);
            cor[r] = malloc(sizeof(double) * ny);
            cory[r] = malloc(sizeof(double) * ny);
            wrong[r] = malloc(sizeof(double) * ny);
            skip[r] = malloc(sizeof(double) * ny);
            pkb_conv3d(x[r], w[r], pkb[r], Co, Cl, T, Hh, Wd);
            ref_partial(x[r], w[r], ref[r], Co, Cl, T, Hh, Wd);
            correct_partial(x[r], w[r], cor[r], Co, Cl, T, Hh, Wd, 3);
        }
        /* PKB and the reference: all_reduce(SUM), then + bias.view(1, -1, 1, 1, 1) */
        double *pkb_y = calloc(ny, sizeof(double)), *ref_y = calloc(ny, sizeof(double));
        for (long long e = 0; e < ny; e++) {
            for (int r = 0; r < W; r++) {
                pkb_y[e] += pkb[r][e];
                ref_y[e] += ref[r][e];
            }
            pkb_y[e] += bias[e / P];
            ref_y[e] += bias[e / P];
        }
        for (int c = 0; c < 3; c++)
            for (int r = 0; r < W; r++)
                correct_reduce(cor, cory, bias, W, r, Co, P, 3, c);
        /* wrong: partial + bias on every rank, summed; skip: W x the local partial + bias */
        long long d_ref = 0, d_cor = 0, d_wrong = 0, d_skip = 0;
        for (int r = 0; r < W; r++)
            for (long long e = 0; e < ny; e++) {
                double s = 0;
                for (int q = 0; q < W; q++)
                    s += cor[q][e] + bias[e / P];
                wrong[r][e] = s;
                skip[r][e] = W * cor[r][e] + bias[e / P];
                d_ref += ref_y[e] != pkb_y[e];
                d_cor += cory[r][e] != pkb_y[e];
                d_wrong += wrong[r][e] != pkb_y[e];
                d_skip += skip[r][e] != pkb_y[e];
            }
        printf("index check W=%d (Co=%d Cl=%d T=%d Hh=%d Wd=%d): elements differing from PKB's "
               "solution(), over all ranks: reference %lld, correct %lld, wrong %lld/%lld, "
               "skip_exchange %lld/%lld\n",
               W, Co, Cl, T, Hh, Wd, d_ref, d_cor, d_wrong, ny * W, d_skip, ny * W);
        bad += d_ref != 0 || d_cor != 0 || d_wrong == 0 || d_skip == 0;
        for (int r = 0; r < W; r++) {
            free(x[r]);
            free(w[r]);
            free(pkb[r]);
            free(ref[r]);
            free(cor[r]);
            free(cory[r]);
            free(wrong[r]);
            free(skip[r]);
        }
        free(pkb_y);
        free(ref_y);
    }
    return bad;
}

/* ------------------------------------------------------------------- part 2: numerics */

enum { IID, RANK, ROW, HEAVY, PEAKED, NREG };
static const char *reg_names[NREG] = {"iid", "rank", "row", "heavy", "peaked"};

static double unit_of(uint64_t base, uint64_t salt) {
    return pk_splitmix_unit(pk_splitmix64(base ^ pk_splitmix64(salt)));
}

/* regime.c's rank_exponent */
static double rank_exponent(uint64_t base, int rank, int world) {
    uint64_t mine = pk_splitmix64(base + 101 + (uint64_t)rank);
    int pos = 0;
    for (int q = 0; q < world; q++) {
        uint64_t h = pk_splitmix64(base + 101 + (uint64_t)q);
        pos += h < mine || (h == mine && q < rank);
    }
    return -4.0 + 8.0 * (pos + 0.25 + 0.5 * unit_of(base, 202 + (uint64_t)rank)) / world;
}

/* regime.c's rn_gen_for_call for a normal(0, std) argument of `count` elements, rows of
 * `row_len`, then the values (as rn_gen_value), rounded to bf16. */
static void draw(float *out, long long count, long long row_len, double std, int reg, int rank,
                 int world, uint64_t key, int arg) {
    rn_gen g;
    memset(&g, 0, sizeof g);
    g.kind = 0;
    g.a = 0;
    g.b = std;
    g.regime = reg == IID ? 0 : reg == RANK ? 1 : reg == ROW ? 2 : reg == HEAVY ? 3 : 4;
    uint64_t base = pk_splitmix64(0x5eedull ^ pk_splitmix64(key << 8 | (uint64_t)arg));
    uint64_t mine = pk_splitmix64(base + 0x100 + (uint64_t)rank);
    g.shift_ok = 1;
    g.row_len = (uint64_t)row_len;
    g.rkey = pk_splitmix64(mine + 1);
    g.ckey = pk_splitmix64(mine + 2);
    g.n_rows = (uint64_t)(count / row_len);
    g.scale = exp2(rank_exponent(base, rank, world) / 2);
    g.ramp_r = (2.0 + 2.0 * unit_of(mine, 11)) * (unit_of(mine, 12) < 0.5 ? -1 : 1);
    g.ramp_c = (2.0 + 2.0 * unit_of(mine, 13)) * (unit_of(mine, 14) < 0.5 ? -1 : 1);
    if (reg == RANK) {
        g.scale = exp2(rank_exponent(base, rank, world) / 2 - 6.0 + 2.0 * unit_of(base, 15));
        g.shift = g.scale * std * (4.0 * unit_of(mine, 4) - 2.0);
    } else if (reg == HEAVY) {
        g.p = pow(10.0, -6.0 + 4.0 * unit_of(mine, 5));
        g.amp = exp2(4.0 + 2.0 * unit_of(mine, 6));
    } else if (reg == PEAKED) {
        g.p = (1.0 + 3.0 * unit_of(base, 7)) / (double)row_len;
        g.amp = g.scale * std * (6.0 + 6.0 * unit_of(mine, 8));
    }
    const uint64_t stream =
        pk_splitmix64(key * 0x9e37ull ^ (0xabcdull + (uint64_t)arg * 64 + rank));
    for (long long i = 0; i < count; i++)
        out[i] = bf16r((float)rn_gen_value(&g, 0, stream, (size_t)i));
}

enum { V_PKB, V_REF, V_COR, V_WRONG, V_SKIP, V_BF16, V_SLAB, V_TAP, V_DT, NV };
static const char *v_names[NV] = {"PKB solution()", "reference",       "correct",
                                  "wrong",          "skip_exchange",   "bf16_accumulate",
                                  "(slab-16 bf16)", "(tap-wise bf16)", "(dt-wise bf16)"};

typedef struct {
    double max_abs_rms, sd_rms, norm, ratio, need;
    int fails, calls;
} stat;

/* The harness's check of one rank's output against want: element-wise
 * |got - want| <= RTOL |want| + ATOL_RMS rms(want), and norm-wise over the elements where the
 * relative part is the larger. */
static void judge(const float *got, const double *want, long long n, stat *st) {
    double ss = 0;
    for (long long i = 0; i < n; i++)
        ss += want[i] * want[i];
    const double rms = sqrt(ss / n), atol = ATOL_RMS * rms;
    double mx = 0, se = 0, dn = 0, wn = 0, ratio = 0, need = 0;
    int el_fail = 0;
    for (long long i = 0; i < n; i++) {
        const double d = fabs(got[i] - want[i]);
        mx = fmax(mx, d);
        se += d * d;
        el_fail |= d > atol + RTOL * fabs(want[i]);
        ratio = fmax(ratio, d / (atol + RTOL * fabs(want[i])));
        need = fmax(need, (4 * d - RTOL * fabs(want[i])) / rms);
        if (RTOL * fabs(want[i]) >= atol) {
            dn += d * d;
            wn += want[i] * want[i];
        }
    }
    const double norm = wn > 0 ? sqrt(dn / wn) : 0;
    st->max_abs_rms = fmax(st->max_abs_rms, mx / rms);
    st->sd_rms = fmax(st->sd_rms, sqrt(se / n) / rms);
    st->norm = fmax(st->norm, norm);
    st->ratio = fmax(st->ratio, ratio);
    st->need = fmax(st->need, need);
    st->fails += el_fail || norm > NORM_RTOL;
    st->calls++;
}

static void part2_call(int W, int reg, uint64_t key, stat *st) {
    const int Co = 512, Cl = Co / W, T = 5, Hh = 6, Wd = 6;
    const int To = T - 2, Ho = Hh - 2, Wo = Wd - 2, P = To * Ho * Wo, K = 27 * Cl;
    const long long ny = (long long)Co * P;
    float *x[8], *w[8], *bias = malloc(sizeof(float) * Co);
    draw(bias, Co, Co, 32.0, reg, 0, W, key, 2);
    /* per rank and output: fp64 conv, fp32 conv (GEMM), per-tap fp32 sums, per-slab fp32 sums */
    double *c64 = calloc(ny * W, sizeof(double));
    float *c32 = malloc(sizeof(float) * ny * W), *cbf = malloc(sizeof(float) * ny * W),
          *chf = malloc(sizeof(float) * ny * W), *ctap = malloc(sizeof(float) * ny * W),
          *cdt = malloc(sizeof(float) * ny * W);
    for (int r = 0; r < W; r++) {
        x[r] = malloc(sizeof(float) * Cl * T * Hh * Wd);
        w[r] = malloc(sizeof(float) * 27 * Co * Cl);
        draw(x[r], (long long)Cl * T * Hh * Wd, Hh * Wd, 1.0, reg, r, W, key, 0);
        draw(w[r], 27LL * Co * Cl, K, 1.0, reg, r, W, key, 1);
        for (int co = 0; co < Co; co++)
            for (int p = 0; p < P; p++) {
                const int t = p / (Ho * Wo), i = p % (Ho * Wo) / Wo, j = p % Wo;
                double s64 = 0;
                float tap[27], slab_acc = 0, tap_acc = 0, dt_acc = 0, dt_sum[3] = {0, 0, 0};
                for (int q = 0; q < 27; q++) {
                    const int dt = q / 9, dy = q / 3 % 3, dx = q % 3;
                    float s = 0, sl = 0;
                    for (int ci = 0; ci < Cl; ci++) {
                        const float a = w[r][(co * Cl + ci) * 27 + q],
                                    b = x[r][((ci * T + t + dt) * Hh + i + dy) * Wd + j + dx];
                        s += a * b;
                        sl += a * b;
                        s64 += (double)a * b;
                        if (ci % SLAB == SLAB - 1 || ci == Cl - 1) { /* one GEMM per (tap, slab) */
                            slab_acc = bf16r(slab_acc + sl);
                            sl = 0;
                        }
                    }
                    tap[q] = s;
                    dt_sum[dt] += s;
                    tap_acc = bf16r(tap_acc + s);
                }
                for (int dt = 0; dt < 3; dt++)
                    dt_acc = bf16r(dt_acc + dt_sum[dt]);
                /* shortcut_bf16_accumulate.cu: __hfma into a bf16 accumulator, ci outer, taps
                 * inner (the weight's memory order): one rounding per product */
                float hf = 0;
                for (int ci = 0; ci < Cl; ci++)
                    for (int q = 0; q < 27; q++) {
                        const int dt = q / 9, dy = q / 3 % 3, dx = q % 3;
                        const double a = w[r][(co * Cl + ci) * 27 + q],
                                     b = x[r][((ci * T + t + dt) * Hh + i + dy) * Wd + j + dx];
                        hf = bf16r((float)(a * b + hf));
                    }
                float f = 0;
                for (int q = 0; q < 27; q++)
                    f += tap[q];
                const long long e = (long long)r * ny + (long long)co * P + p;
                c64[e] = s64;
                c32[e] = bf16r(f); /* the GEMM's one rounding of its fp32 sum */
                cbf[e] = slab_acc;
                chf[e] = hf;
                ctap[e] = tap_acc;
                cdt[e] = dt_acc;
            }
    }
    double *want = malloc(sizeof(double) * ny);
    float *got[NV];
    for (int v = 0; v < NV; v++)
        got[v] = malloc(sizeof(float) * ny * W);
    for (long long e = 0; e < ny; e++) {
        const float b = bias[e / P];
        double s = 0;
        for (int r = 0; r < W; r++)
            s += c64[(long long)r * ny + e];
        want[e] = s + b;
        /* NCCL's ring: the chunk of element e starts at rank (e mod W) + 1 and each hop adds the
         * next rank's partial and rounds to bf16; then the bias in bf16. */
        const int start = (int)((e / 64) % W);
        float ring = c32[(long long)((start + 1) % W) * ny + e];
        for (int h = 2; h <= W; h++)
            ring = bf16r(ring + c32[(long long)((start + h) % W) * ny + e]);
        float fsum = 0, fwrong = 0, fbf = 0, fhf = 0, ftap = 0, fdt = 0;
        for (int r = 0; r < W; r++) {
            const long long o = (long long)r * ny + e;
            fsum += c32[o];
            fwrong += bf16r(c32[o] + b); /* wrong.cu: bias in the epilogue of every rank */
            fbf += cbf[o];
            fhf += bf16r(chf[o]);
            ftap += ctap[o];
            fdt += cdt[o];
        }
        for (int r = 0; r < W; r++) {
            const long long o = (long long)r * ny + e;
            got[V_PKB][o] = bf16r(ring + b);
            got[V_REF][o] = bf16r(ring + b);
            got[V_COR][o] = bf16r(bf16r(fsum) + b);
            got[V_WRONG][o] = bf16r(fwrong);
            got[V_SKIP][o] = bf16r(bf16r((float)W * c32[o]) + b);
            got[V_BF16][o] = bf16r(bf16r(fhf) + b);
            got[V_SLAB][o] = bf16r(bf16r(fbf) + b);
            got[V_TAP][o] = bf16r(bf16r(ftap) + b);
            got[V_DT][o] = bf16r(bf16r(fdt) + b);
        }
    }
    for (int v = 0; v < NV; v++) {
        for (int r = 0; r < W; r++)
            judge(got[v] + (long long)r * ny, want, ny, &st[v]);
        free(got[v]);
    }
    for (int r = 0; r < W; r++) {
        free(x[r]);
        free(w[r]);
    }
    free(bias);
    free(c64);
    free(c32);
    free(cbf);
    free(chf);
    free(ctap);
    free(cdt);
    free(want);
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 2;
    int bad = part1();
    printf("\nnumerics: Co = 512, Cl = 512 / W, T = 5, Hh = Wd = 6 (24576 outputs per rank), %d "
           "calls per regime; tolerance rtol %g, atol_rms %g, norm_rtol %g\n",
           calls, RTOL, ATOL_RMS, NORM_RTOL);
    printf("%-3s %-7s %-17s %10s %10s %10s %8s %8s %s\n", "W", "regime", "variant", "max|e|/rms",
           "sd(e)/rms", "norm", "ratio", "need", "failed calls x ranks");
    for (int W = 2; W <= 8; W *= 2)
        for (int reg = 0; reg < NREG; reg++) {
            stat st[NV];
            memset(st, 0, sizeof st);
            for (int c = 0; c < calls; c++)
                part2_call(W, reg, (uint64_t)(1000 * W + 10 * reg + c), st);
            for (int v = 0; v < NV; v++)
                printf("%-3d %-7s %-17s %10.3g %10.3g %10.3g %8.3g %8.3g %d/%d\n", W,
                       reg_names[reg], v_names[v], st[v].max_abs_rms, st[v].sd_rms, st[v].norm,
                       st[v].ratio, st[v].need, st[v].fails, st[v].calls);
        }
    return bad ? 1 : 0;
}
