/* Host simulation of pkb/59_physicsnemo_distributed_rfft and pkb/60_physicsnemo_distributed_irfft
 * (C, no GPU): index arithmetic and tolerance.
 *
 * For W ranks of inputs drawn as the harness draws them (normal(0, 1) shaped by rn_values.h's
 * regimes iid, rank, row, heavy, peaked, regime.c's parameter draws), it evaluates per rank:
 *   pkb       PKB's solution(), transcribed step by step in fp64 (torch.fft as mixed-radix FFTs,
 *             torch.split / dist.all_to_all / torch.cat and, for 60, _conj_pad_2d's pad, flips,
 *             all-gather and scatter written out on whole tensors): the truth;
 *   direct    the same transform computed on the whole field in the other order (59: rfft2 as
 *             FFT along W, then along H; 60: the Hermitian completion of pk_hermitian_src, then
 *             inverse FFTs along H, then along W): shows the transcription is the 2-D transform;
 *   reference problem.cu's steps in fp32 (fp32 arithmetic and twiddles: the least favourable
 *             honest FFT), its exchange through pk_fft_transpose.cuh's pack and unpack;
 *   correct   solutions/correct.cu's own index arithmetic (the pull), in fp32;
 *   wrong     solutions/wrong.cu's (59: a peer's columns at offset ((q - r) mod W) Wl; 60: the
 *             completed row taken from row H - h - 1, an off-by-one of the flip);
 * and prints, per problem and regime, the largest error over rms(want) and the largest relative
 * error (elements >= 1e-3 of the largest) against fp64, over every rank.
 * Build: cc -O2 -Icommon/include -Iproblems/runner -Iproblems/include bench/pkb/sim_59_60_fft.c -lm
 * Usage: ./a.out W [B H Wd (59)] [P H Wd (60: P planes = B C)]  (default 2 1 1024 1024 1 720 1440)
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_fft_transpose.cuh"
#include "rn_values.h"

typedef double complex cd;
typedef float complex cf;

enum { IID, RANK, ROW, HEAVY, PEAKED, NREG };
static const char *names[NREG] = {"iid", "rank", "row", "heavy", "peaked"};

static double unit_of(uint64_t base, uint64_t salt) {
    return pk_splitmix_unit(pk_splitmix64(base ^ pk_splitmix64(salt)));
}

/* count values of rank r, argument `arg`, rows of row_len, as the harness draws normal(0, 1). */
static void draw(double *x, long long count, long long row_len, int reg, int arg, int r, int W,
                 uint64_t key) {
    rn_gen g;
    memset(&g, 0, sizeof g);
    g.kind = 0;
    g.a = 0;
    g.b = 1;
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
        g.shift = g.scale * (4.0 * unit_of(mine, 4) - 2.0);
    } else if (reg == HEAVY) {
        g.p = pow(10.0, -6.0 + 4.0 * unit_of(mine, 5));
        g.amp = exp2(4.0 + 2.0 * unit_of(mine, 6));
    } else if (reg == PEAKED) {
        g.p = (1.0 + 3.0 * unit_of(base, 7)) / (double)row_len;
        g.amp = g.scale * (6.0 + 6.0 * unit_of(mine, 8));
    }
    const uint64_t stream = pk_splitmix64(key ^ (0xabcdull + (uint64_t)r * 2 + (uint64_t)arg));
    for (long long i = 0; i < count; i++)
        x[i] = (double)(float)rn_gen_value(&g, 0, stream, (size_t)i);
}

/* Twiddles of the top-level length TN (every sub-length divides it): cos and sin of 2 pi j / TN
 * in fp64 (the fp32 FFT rounds them to fp32). */
static long long TN;
static double *TC, *TS;

static void twiddles(long long n) {
    if (n == TN)
        return;
    free(TC);
    free(TS);
    TC = malloc(sizeof(double) * (size_t)n);
    TS = malloc(sizeof(double) * (size_t)n);
    for (long long j = 0; j < n; j++) {
        TC[j] = cos(2.0 * M_PI * (double)j / (double)n);
        TS[j] = sin(2.0 * M_PI * (double)j / (double)n);
    }
    TN = n;
}

/* Mixed-radix FFT (decimation in time by the smallest prime factor), sign -1 forward, +1
 * inverse (unnormalised), of n values `stride` apart; out contiguous. */
static void fft_d(const cd *in, cd *out, long long n, long long stride, int sign, cd *tmp) {
    if (n == 1) {
        out[0] = in[0];
        return;
    }
    long long p = 2;
    while (n % p)
        p++;
    const long long m = n / p;
    for (long long r = 0; r < p; r++)
        fft_d(in + r * stride, out + r * m, m, stride * p, sign, tmp);
    for (long long k = 0; k < m; k++)
        for (long long s = 0; s < p; s++) {
            cd acc = 0;
            for (long long r = 0; r < p; r++) {
                const long long j = (r * (k + s * m)) % n * (TN / n);
                acc += out[r * m + k] * (TC[j] + I * sign * TS[j]);
            }
            tmp[k + s * m] = acc;
        }
    memcpy(out, tmp, sizeof(cd) * (size_t)n);
}

static void fft_f(const cf *in, cf *out, long long n, long long stride, int sign, cf *tmp) {
    if (n == 1) {
        out[0] = in[0];
        return;
    }
    long long p = 2;
    while (n % p)
        p++;
    const long long m = n / p;
    for (long long r = 0; r < p; r++)
        fft_f(in + r * stride, out + r * m, m, stride * p, sign, tmp);
    for (long long k = 0; k < m; k++)
        for (long long s = 0; s < p; s++) {
            cf acc = 0;
            for (long long r = 0; r < p; r++) {
                const long long j = (r * (k + s * m)) % n * (TN / n);
                acc += out[r * m + k] * ((float)TC[j] + I * (float)(sign * TS[j]));
            }
            tmp[k + s * m] = acc;
        }
    memcpy(out, tmp, sizeof(cf) * (size_t)n);
}

/* In-place 1-D transform of `count` lines of length n: element j of line t at base(t) + j st. */
static void lines_d(cd *a, long long count, long long n, long long line_of_t_div,
                    long long line_outer, long long st, int sign, double scale) {
    cd *in = malloc(sizeof(cd) * (size_t)n), *out = malloc(sizeof(cd) * (size_t)n),
       *tmp = malloc(sizeof(cd) * (size_t)n);
    twiddles(n);
    for (long long t = 0; t < count; t++) {
        const long long base = t / line_of_t_div * line_outer + t % line_of_t_div;
        for (long long j = 0; j < n; j++)
            in[j] = a[base + j * st];
        fft_d(in, out, n, 1, sign, tmp);
        for (long long j = 0; j < n; j++)
            a[base + j * st] = out[j] * scale;
    }
    free(in);
    free(out);
    free(tmp);
}

static void lines_f(cf *a, long long count, long long n, long long line_of_t_div,
                    long long line_outer, long long st, int sign, float scale) {
    cf *in = malloc(sizeof(cf) * (size_t)n), *out = malloc(sizeof(cf) * (size_t)n),
       *tmp = malloc(sizeof(cf) * (size_t)n);
    twiddles(n);
    for (long long t = 0; t < count; t++) {
        const long long base = t / line_of_t_div * line_outer + t % line_of_t_div;
        for (long long j = 0; j < n; j++)
            in[j] = a[base + j * st];
        fft_f(in, out, n, 1, sign, tmp);
        for (long long j = 0; j < n; j++)
            a[base + j * st] = out[j] * scale;
    }
    free(in);
    free(out);
    free(tmp);
}

typedef struct {
    double abs_rms, rel, norm, ratio;
} errs;

/* meta.json's tolerance of both outputs: |got - want| <= RTOL |want| + ATOL_RMS rms(want) */
#define RTOL 1e-4
#define ATOL_RMS 2e-4

/* Errors of got against want (n complex or real values as doubles, interleaved). */
static void measure(const double *want, const double *got, long long n, errs *e) {
    double ss = 0, mx = 0, d2 = 0;
    for (long long i = 0; i < n; i++) {
        ss += want[i] * want[i];
        if (fabs(want[i]) > mx)
            mx = fabs(want[i]);
    }
    const double rms = sqrt(ss / (double)n);
    for (long long i = 0; i < n; i++) {
        const double d = fabs(got[i] - want[i]);
        d2 += d * d;
        if (!(d / rms <= e->abs_rms))
            e->abs_rms = d / rms;
        if (fabs(want[i]) >= 1e-3 * mx && !(d / fabs(want[i]) <= e->rel))
            e->rel = d / fabs(want[i]);
        /* the 4x rule: 4 x the error against fp64 within the tolerance (ratio <= 1) */
        const double r4 = 4 * d / (RTOL * fabs(want[i]) + ATOL_RMS * rms);
        if (!(r4 <= e->ratio))
            e->ratio = r4;
    }
    const double nr = sqrt(d2 / ss);
    if (!(nr <= e->norm))
        e->norm = nr;
}

/* ---- pkb/59 ---- */
static void sim59(int W, long long B, long long H, long long Wd, int reg, uint64_t key, errs *e) {
    const long long Wl = Wd / W, Hl = H / W, n = B * H * Wl, half = Wd / 2 + 1;
    const long long on = B * Hl * half;
    double *x = malloc(sizeof(double) * (size_t)(W * n));
    for (int r = 0; r < W; r++)
        draw(x + r * n, n, Wl, reg, 0, r, W, key);
    /* pkb: x1 = fft(x, dim=1, ortho) per rank */
    cd *x1 = malloc(sizeof(cd) * (size_t)(W * n));
    for (long long i = 0; i < W * n; i++)
        x1[i] = x[i];
    for (int r = 0; r < W; r++) /* line t = (b, j): base b H Wl + j, stride Wl */
        lines_d(x1 + r * n, B * Wl, H, Wl, H * Wl, Wl, -1, 1 / sqrt((double)H));
    /* split along H (chunk k: rows k Hl..), all_to_all, cat along W in rank order */
    cd *x2 = malloc(sizeof(cd) * (size_t)(W * B * Hl * Wd));
    for (int r = 0; r < W; r++)
        for (int q = 0; q < W; q++) /* recv[q] = rank q's chunk r */
            for (long long b = 0; b < B; b++)
                for (long long i = 0; i < Hl; i++)
                    for (long long j = 0; j < Wl; j++)
                        x2[r * B * Hl * Wd + (b * Hl + i) * Wd + q * Wl + j] =
                            x1[q * n + (b * H + r * Hl + i) * Wl + j];
    double *want = malloc(sizeof(double) * (size_t)(2 * W * on));
    for (int r = 0; r < W; r++) {
        cd *t = x2 + r * B * Hl * Wd;
        lines_d(t, B * Hl, Wd, 1, Wd, 1, -1, 1 / sqrt((double)Wd));
        for (long long i = 0; i < B * Hl; i++)
            for (long long k = 0; k < half; k++) {
                want[2 * (r * on + i * half + k)] = creal(t[i * Wd + k]);
                want[2 * (r * on + i * half + k) + 1] = cimag(t[i * Wd + k]);
            }
    }
    /* direct: the whole field (B, H, Wd), FFT along W first, then along H */
    cd *f = malloc(sizeof(cd) * (size_t)(B * H * Wd));
    for (int r = 0; r < W; r++)
        for (long long b = 0; b < B; b++)
            for (long long h = 0; h < H; h++)
                for (long long j = 0; j < Wl; j++)
                    f[(b * H + h) * Wd + r * Wl + j] = x[r * n + (b * H + h) * Wl + j];
    lines_d(f, B * H, Wd, 1, Wd, 1, -1, 1 / sqrt((double)Wd));
    lines_d(f, B * Wd, H, Wd, H * Wd, Wd, -1, 1 / sqrt((double)H));
    double *got = malloc(sizeof(double) * (size_t)(2 * W * on));
    for (int r = 0; r < W; r++)
        for (long long b = 0; b < B; b++)
            for (long long i = 0; i < Hl; i++)
                for (long long k = 0; k < half; k++) {
                    const cd v = f[(b * H + r * Hl + i) * Wd + k];
                    got[2 * (r * on + (b * Hl + i) * half + k)] = creal(v);
                    got[2 * (r * on + (b * Hl + i) * half + k) + 1] = cimag(v);
                }
    measure(want, got, 2 * W * on, &e[0]);
    /* reference in fp32: FFT along H, pack (scale folded), exchange, unpack, FFT along W */
    cf *a = malloc(sizeof(cf) * (size_t)(W * n)), *send = malloc(sizeof(cf) * (size_t)(W * n));
    cf *rows = malloc(sizeof(cf) * (size_t)(W * n));
    for (long long i = 0; i < W * n; i++)
        a[i] = (float)x[i];
    for (int r = 0; r < W; r++)
        lines_f(a + r * n, B * Wl, H, Wl, H * Wl, Wl, -1, 1.f);
    const float sh = (float)(1.0 / sqrt((double)H)), sw = (float)(1.0 / sqrt((double)Wd));
    for (int r = 0; r < W; r++)
        for (long long p = 0; p < n; p++)
            send[r * n + p] = sh * a[r * n + pk_xpose_pack_src(PK_XPOSE_ROWS, p, B, H, Wl, W)];
    for (int variant = 0; variant < 3; variant++) { /* reference, correct, wrong */
        for (int r = 0; r < W; r++) {
            cf *t = rows + r * n;
            if (variant == 0) {
                for (long long p = 0; p < n; p++) {
                    const long long q = p / (n / W), e2 = p % (n / W);
                    t[pk_xpose_unpack_dst(PK_XPOSE_ROWS, p, B, H, Wl, W)] =
                        send[q * n + r * (n / W) + e2];
                }
            } else { /* correct.cu / wrong.cu's pull */
                for (long long el = 0; el < n; el++) {
                    const long long b = el / (Hl * Wd), i = el / Wd % Hl, col = el % Wd;
                    const long long q = variant == 1 ? col / Wl : (col / Wl + r) % W, j = col % Wl;
                    t[el] = sh * a[q * n + (b * H + r * Hl + i) * Wl + j];
                }
            }
            lines_f(t, B * Hl, Wd, 1, Wd, 1, -1, 1.f);
            for (long long i = 0; i < B * Hl; i++)
                for (long long k = 0; k < half; k++) {
                    const cf v = t[i * Wd + k] * sw;
                    got[2 * (r * on + i * half + k)] = crealf(v);
                    got[2 * (r * on + i * half + k) + 1] = cimagf(v);
                }
        }
        measure(want, got, 2 * W * on, &e[1 + variant]);
    }
    free(x);
    free(x1);
    free(x2);
    free(want);
    free(f);
    free(got);
    free(a);
    free(send);
    free(rows);
}

/* ---- pkb/60 ---- */
static void sim60(int W, long long P, long long H, long long Wd, int reg, uint64_t key, errs *e) {
    const long long Hl = H / W, half = Wd / 2 + 1, c = Wd / W, n = P * Hl * half;
    const long long on = P * H * c; /* real outputs per rank */
    double *xr = malloc(sizeof(double) * (size_t)(2 * W * n));
    for (int r = 0; r < W; r++)
        draw(xr + r * 2 * n, 2 * n, 2 * half, reg, 0, r, W, key);
    /* pkb: _conj_pad_2d: pad, flip of the conjugate, gather along H, flip along H, scatter */
    cd *full = malloc(sizeof(cd) * (size_t)(P * H * Wd));
    for (int r = 0; r < W; r++)
        for (long long p = 0; p < P; p++)
            for (long long i = 0; i < Hl; i++) {
                cd *row = full + (p * H + r * Hl + i) * Wd;
                const double *src = xr + r * 2 * n + 2 * ((p * Hl + i) * half);
                for (long long k = 0; k < Wd; k++)
                    row[k] = k < half ? src[2 * k] + I * src[2 * k + 1] : 0;
                const long long m = Wd - half;
                for (long long t = 0; t < m; t++)
                    row[half + t] = conj(row[m - t]);
            }
    for (long long p = 0; p < P; p++)
        for (long long k = half; k < Wd; k++)
            for (long long h = 1; h < 1 + (H - 1) / 2; h++) {
                cd *u = full + (p * H + h) * Wd + k, *v = full + (p * H + H - h) * Wd + k;
                const cd t = *u;
                *u = *v;
                *v = t;
            }
    /* ifft along W (ortho) of each rank's rows; split W, all_to_all, cat along H; ifft along H */
    cd *g = malloc(sizeof(cd) * (size_t)(P * H * Wd));
    memcpy(g, full, sizeof(cd) * (size_t)(P * H * Wd));
    lines_d(g, P * H, Wd, 1, Wd, 1, +1, 1 / sqrt((double)Wd));
    double *want = malloc(sizeof(double) * (size_t)(W * on));
    cd *col = malloc(sizeof(cd) * (size_t)(P * H * c));
    for (int r = 0; r < W; r++) {
        for (long long p = 0; p < P; p++) /* recv from q: q's rows, columns r c.. */
            for (long long h = 0; h < H; h++)
                for (long long j = 0; j < c; j++)
                    col[(p * H + h) * c + j] = g[(p * H + h) * Wd + r * c + j];
        lines_d(col, P * c, H, c, H * c, c, +1, 1 / sqrt((double)H));
        for (long long i = 0; i < on; i++)
            want[r * on + i] = creal(col[i]);
    }
    /* direct: the completion by pk_hermitian_src, inverse along H first, then along W */
    cd *f = malloc(sizeof(cd) * (size_t)(P * H * Wd));
    for (long long p = 0; p < P; p++)
        for (long long h = 0; h < H; h++)
            for (long long k = 0; k < Wd; k++) {
                long long s_h, s_k;
                const int cj = pk_hermitian_src(h, k, H, Wd, &s_h, &s_k);
                const int r = (int)(s_h / Hl);
                const double *src = xr + r * 2 * n + 2 * ((p * Hl + s_h % Hl) * half + s_k);
                const cd v = src[0] + I * src[1];
                f[(p * H + h) * Wd + k] = cj ? conj(v) : v;
            }
    lines_d(f, P * Wd, H, Wd, H * Wd, Wd, +1, 1 / sqrt((double)H));
    lines_d(f, P * H, Wd, 1, Wd, 1, +1, 1 / sqrt((double)Wd));
    double *got = malloc(sizeof(double) * (size_t)(W * on));
    for (int r = 0; r < W; r++)
        for (long long p = 0; p < P; p++)
            for (long long h = 0; h < H; h++)
                for (long long j = 0; j < c; j++)
                    got[r * on + (p * H + h) * c + j] = creal(f[(p * H + h) * Wd + r * c + j]);
    measure(want, got, W * on, &e[0]);
    /* fp32: reference (completion, ifft W, pack/unpack COLS, ifft H), correct (its own
     * indices), wrong (row H - h - 1) */
    cf *rows = malloc(sizeof(cf) * (size_t)(W * P * Hl * Wd));
    cf *send = malloc(sizeof(cf) * (size_t)(W * P * Hl * Wd)),
       *cols = malloc(sizeof(cf) * (size_t)on);
    const float sw = (float)(1.0 / sqrt((double)Wd)), sh = (float)(1.0 / sqrt((double)H));
    const long long ln = P * Hl * Wd;
    for (int variant = 0; variant < 3; variant++) {
        for (int r = 0; r < W; r++)
            for (long long p = 0; p < P; p++)
                for (long long i = 0; i < Hl; i++)
                    for (long long k = 0; k < Wd; k++) {
                        const long long h = r * Hl + i;
                        const double *src;
                        int cj;
                        if (variant == 0) { /* problem.cu: pk_hermitian_src on the gathered copy */
                            long long s_h, s_k;
                            cj = pk_hermitian_src(h, k, H, Wd, &s_h, &s_k);
                            src = xr + (s_h / Hl) * 2 * n + 2 * ((p * Hl + s_h % Hl) * half + s_k);
                        } else { /* correct.cu / wrong.cu: the owner's row, read in place */
                            cj = k > Wd / 2;
                            const long long m = !cj ? h : variant == 1 ? (H - h) % H : H - 1 - h;
                            src = xr + (m / Hl) * 2 * n +
                                  2 * ((p * Hl + m % Hl) * half + (cj ? Wd - k : k));
                        }
                        const cf v = (float)src[0] + I * (float)src[1];
                        rows[r * ln + (p * Hl + i) * Wd + k] = cj ? conjf(v) : v;
                    }
        for (int r = 0; r < W; r++)
            lines_f(rows + r * ln, P * Hl, Wd, 1, Wd, 1, +1, variant == 0 ? sw : 1.f);
        if (variant == 0)
            for (int r = 0; r < W; r++)
                for (long long q = 0; q < ln; q++)
                    send[r * ln + q] =
                        rows[r * ln + pk_xpose_pack_src(PK_XPOSE_COLS, q, P, Hl, Wd, W)];
        for (int r = 0; r < W; r++) {
            if (variant == 0) {
                for (long long q = 0; q < ln; q++) {
                    const long long from = q / (ln / W), e2 = q % (ln / W);
                    cols[pk_xpose_unpack_dst(PK_XPOSE_COLS, q, P, Hl, Wd, W)] =
                        send[from * ln + r * (ln / W) + e2];
                }
            } else { /* correct.cu's pull_cols, with the 1/sqrt(Wd) scale */
                for (long long el = 0; el < on; el++) {
                    const long long p = el / (H * c), h = el / c % H, j = el % c, q = h / Hl,
                                    i = h % Hl;
                    cols[el] = sw * rows[q * ln + (p * Hl + i) * Wd + r * c + j];
                }
            }
            lines_f(cols, P * c, H, c, H * c, c, +1, sh);
            for (long long i = 0; i < on; i++)
                got[r * on + i] = crealf(cols[i]);
        }
        measure(want, got, W * on, &e[1 + variant]);
    }
    free(xr);
    free(full);
    free(g);
    free(want);
    free(col);
    free(f);
    free(got);
    free(rows);
    free(send);
    free(cols);
}

int main(int argc, char **argv) {
    const int W = argc > 1 ? atoi(argv[1]) : 2;
    const long long B = argc > 2 ? atoll(argv[2]) : 1, H = argc > 3 ? atoll(argv[3]) : 1024,
                    Wd = argc > 4 ? atoll(argv[4]) : 1024;
    const long long P = argc > 5 ? atoll(argv[5]) : 1, H6 = argc > 6 ? atoll(argv[6]) : 720,
                    W6 = argc > 7 ? atoll(argv[7]) : 1440;
    const char *what[4] = {"direct", "reference", "correct", "wrong"};
    for (int prob = 0; prob < 2; prob++) {
        if (prob == 0)
            printf("pkb/59 W=%d B=%lld H=%lld Wd=%lld\n", W, B, H, Wd);
        else
            printf("pkb/60 W=%d planes=%lld H=%lld Wd=%lld\n", W, P, H6, W6);
        printf("  (largest |err| / rms(want), largest relative error, norm-wise error, 4x-rule "
               "ratio at rtol %g + atol_rms %g)\n",
               RTOL, ATOL_RMS);
        for (int reg = 0; reg < NREG; reg++) {
            errs e[4];
            memset(e, 0, sizeof e);
            if (prob == 0)
                sim59(W, B, H, Wd, reg, (uint64_t)(11 + reg), e);
            else
                sim60(W, P, H6, W6, reg, (uint64_t)(11 + reg), e);
            printf("  %-7s", names[reg]);
            for (int v = 0; v < 4; v++)
                printf(" %s %.2e %.2e %.2e %.2f;", what[v], e[v].abs_rms, e[v].rel, e[v].norm,
                       e[v].ratio);
            printf("\n");
        }
    }
    return 0;
}
