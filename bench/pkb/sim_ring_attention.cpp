// Host simulation of pkb/54_ring_attention on the input regimes (no GPU): draws q, k, v as the
// runner does (rn_values.h; the regime parameters as problems/runner/regime.c draws them, for a
// few keys), evaluates causal attention in double (the definition), and emulates:
//   ref     the reference: PKB's ring order, per block 64-key tiles of fp32 online softmax
//           (pk_attention.cuh's row functions), P rounded to bf16 for PV, the logsumexp merge,
//           the output rounded to bf16;
//   fp32    a kernel with fp32 P (one pass over all keys);
//   fp8p    the reference with P rounded to fp8 e4m3 instead of bf16 (a precision shortcut);
//   nomax   shortcut_assumed_max.cu: exp(s) without the running max;
//   local   shortcut_skip_exchange.cu: the own shard's keys only;
//   lmask   wrong.cu: the causal mask by positions inside each shard.
// and checks each against the problem's tolerance (|got - want| <= rtol |want| + atol_rms rms,
// and the norm-wise check). Prints, per regime, each emulation's worst ratio error / tolerance
// and whether it passes.
// Build: g++ -O2 -std=c++17 -Iproblems/runner -Icommon/include -Iproblems/include
//        bench/pkb/sim_ring_attention.cpp -o /tmp/sim54
// Run: /tmp/sim54 [W [S [keys per regime]]]
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "pk_attention.cuh"
#include "rn_values.h"

static double RTOL = 0.05, ATOL_RMS = 0.05,
              NORM_RTOL = 0.01; // meta.json's; SIM_TOL=rtol,atol_rms,norm
enum { D = 64, TILE = 64 };

static float bf16(float x) { // round to nearest even, as __float2bfloat16
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static float fp8_e4m3(float x) { // p in [0, 1]: 3 mantissa bits, subnormal step 2^-9
    if (x < 0x1p-6f)
        return rintf(x * 512.f) / 512.f;
    int e;
    const float m = frexpf(x, &e); // x = m 2^e, m in [0.5, 1)
    return ldexpf(rintf(m * 16.f) / 16.f, e);
}

static double unit_of(uint64_t base, uint64_t salt) {
    return pk_splitmix_unit(pk_splitmix64(base ^ pk_splitmix64(salt)));
}

static double rank_exponent(uint64_t base, int rank, int world) {
    uint64_t mine = pk_splitmix64(base + 101 + (uint64_t)rank);
    int pos = 0;
    for (int q = 0; q < world; q++) {
        uint64_t h = pk_splitmix64(base + 101 + (uint64_t)q);
        pos += h < mine || (h == mine && q < rank);
    }
    return -4.0 + 8.0 * (pos + 0.25 + 0.5 * unit_of(base, 202 + (uint64_t)rank)) / world;
}

// regime.c's rn_gen_for_call for a normal(0, 1) input of `count` elements, rows of row_len.
static rn_gen gen_for(int regime, uint64_t key, int arg, int rank, int world, uint64_t count,
                      uint64_t row_len) {
    rn_gen g;
    memset(&g, 0, sizeof g);
    g.kind = 0;
    g.a = 0;
    g.b = 1;
    g.regime = regime;
    if (regime == 0)
        return g;
    uint64_t base = pk_splitmix64(0x1234567ULL ^ pk_splitmix64(key << 8 | (uint64_t)arg));
    uint64_t mine = pk_splitmix64(base + 0x100 + (uint64_t)rank);
    double spread = 1.0;
    g.shift_ok = 1;
    g.row_len = row_len;
    g.rkey = pk_splitmix64(mine + 1);
    g.ckey = pk_splitmix64(mine + 2);
    g.n_rows = count / row_len;
    g.scale = exp2(rank_exponent(base, rank, world) / 2);
    g.ramp_r = (2.0 + 2.0 * unit_of(mine, 11)) * (unit_of(mine, 12) < 0.5 ? -1 : 1);
    g.ramp_c = (2.0 + 2.0 * unit_of(mine, 13)) * (unit_of(mine, 14) < 0.5 ? -1 : 1);
    if (regime == 1) {
        g.scale = exp2(rank_exponent(base, rank, world) / 2 - 6.0 + 2.0 * unit_of(base, 15));
        g.shift = g.scale * spread * (4.0 * unit_of(mine, 4) - 2.0);
    } else if (regime == 3) {
        g.p = pow(10.0, -6.0 + 4.0 * unit_of(mine, 5));
        g.amp = exp2(4.0 + 2.0 * unit_of(mine, 6));
    } else if (regime == 4) {
        g.p = (1.0 + 3.0 * unit_of(base, 7)) / (double)g.row_len;
        g.amp = g.scale * spread * (6.0 + 6.0 * unit_of(mine, 8));
    }
    return g;
}

struct Shard {
    std::vector<float> q, k, v; // (S, H, D), bf16 values (B = 1)
};

enum { E_REF, E_FP32, E_FP8P, E_NOMAX, E_LOCAL, E_LMASK, N_EMU };
static const char *emu_name[N_EMU] = {"ref", "fp32", "fp8p", "nomax", "local", "lmask"};

// One query row (rank r, position i, head h) by one emulation, into out[D].
static void emulate(int e, const std::vector<Shard> &sh, int S, int H, int r, int i, int h,
                    float *out) {
    const float scale = 0.125f;
    const float *q = &sh[r].q[((size_t)i * H + h) * D];
    auto score = [&](int j, int kk) { // fp32 dot product of bf16 values, then the scale
        const float *k = &sh[j].k[((size_t)kk * H + h) * D];
        float s = 0.f;
        for (int d = 0; d < D; d++)
            s += q[d] * k[d];
        return s * scale;
    };
    auto val = [&](int j, int kk) { return &sh[j].v[((size_t)kk * H + h) * D]; };
    if (e == E_REF || e == E_LOCAL || e == E_FP8P) { // ring order: own block, then r-1 .. 0
        float acc[D], lse = -INFINITY;
        const int last = e == E_LOCAL ? 0 : r;
        for (int step = 0; step <= last; step++) {
            const int j = r - step, nk = step == 0 ? i + 1 : S;
            PkSoftmaxRow row = pk_softmax_row_init();
            float o[D] = {0};
            for (int t0 = 0; t0 < nk; t0 += TILE) {
                const int t1 = t0 + TILE < nk ? t0 + TILE : nk;
                float s[TILE], tmax = -INFINITY;
                for (int kk = t0; kk < t1; kk++)
                    tmax = fmaxf(tmax, s[kk - t0] = score(j, kk));
                const float alpha = pk_softmax_row_rescale(&row, tmax);
                for (int d = 0; d < D; d++)
                    o[d] *= alpha;
                for (int kk = t0; kk < t1; kk++) {
                    const float p = pk_softmax_row_p(&row, s[kk - t0]);
                    row.l += p;
                    const float pb = e == E_FP8P ? fp8_e4m3(p) : bf16(p);
                    const float *vv = val(j, kk);
                    for (int d = 0; d < D; d++)
                        o[d] += pb * vv[d];
                }
            }
            const float lb = pk_softmax_row_lse(&row);
            if (step == 0) {
                for (int d = 0; d < D; d++)
                    acc[d] = o[d] / row.l;
                lse = lb;
            } else {
                const float w = pk_lse_merge_weight(lse, lb);
                for (int d = 0; d < D; d++)
                    acc[d] = pk_lse_merge_out(acc[d], o[d] / row.l, w);
                lse = pk_lse_merge(lse, lb);
            }
        }
        for (int d = 0; d < D; d++)
            out[d] = bf16(acc[d]);
        return;
    }
    // One pass over the global keys 0 .. r*S + i (lmask: local index <= i in every shard).
    float m = e == E_NOMAX ? 0.f : -INFINITY, l = 0.f, o[D] = {0};
    for (int j = 0; j <= r; j++)
        for (int kk = 0; kk < (j == r || e == E_LMASK ? i + 1 : S); kk++) {
            const float s = score(j, kk);
            if (e != E_NOMAX && s > m) {
                const float alpha = expf(m - s);
                l *= alpha;
                for (int d = 0; d < D; d++)
                    o[d] *= alpha;
                m = s;
            }
            const float p = expf(s - m);
            l += p;
            const float *vv = val(j, kk);
            for (int d = 0; d < D; d++)
                o[d] += p * vv[d];
        }
    for (int d = 0; d < D; d++)
        out[d] = bf16(o[d] / l);
}

static void exact(const std::vector<Shard> &sh, int S, int H, int r, int i, int h, double *out) {
    const double *dummy = nullptr;
    (void)dummy;
    const float *q = &sh[r].q[((size_t)i * H + h) * D];
    std::vector<double> s;
    double m = -INFINITY;
    for (int j = 0; j <= r; j++)
        for (int kk = 0; kk < (j == r ? i + 1 : S); kk++) {
            const float *k = &sh[j].k[((size_t)kk * H + h) * D];
            double x = 0;
            for (int d = 0; d < D; d++)
                x += (double)q[d] * k[d];
            s.push_back(x * 0.125);
            m = fmax(m, x * 0.125);
        }
    double l = 0;
    for (int d = 0; d < D; d++)
        out[d] = 0;
    size_t n = 0;
    for (int j = 0; j <= r; j++)
        for (int kk = 0; kk < (j == r ? i + 1 : S); kk++, n++) {
            const double p = exp(s[n] - m);
            l += p;
            const float *vv = &sh[j].v[((size_t)kk * H + h) * D];
            for (int d = 0; d < D; d++)
                out[d] += p * vv[d];
        }
    for (int d = 0; d < D; d++)
        out[d] /= l;
}

int main(int argc, char **argv) {
    const int W = argc > 1 ? atoi(argv[1]) : 2, S = argc > 2 ? atoi(argv[2]) : 256, H = 2;
    const int n_keys = argc > 3 ? atoi(argv[3]) : 3;
    if (getenv("SIM_TOL"))
        sscanf(getenv("SIM_TOL"), "%lf,%lf,%lf", &RTOL, &ATOL_RMS, &NORM_RTOL);
    static const char *regime_name[] = {"iid", "rank", "row", "heavy", "peaked"};
    const size_t count = (size_t)S * H * D;
    printf("tolerance rtol %g, atol_rms %g, norm_rtol %g\n", RTOL, ATOL_RMS, NORM_RTOL);
    printf("W %d, S %d, H %d, D %d; ratio = worst |err| / tolerance (pass: <= 1 and norm)\n", W, S,
           H, D);
    for (int regime = 0; regime < 5; regime++)
        for (int key = 0; key < n_keys; key++) {
            std::vector<Shard> sh(W);
            for (int r = 0; r < W; r++) {
                std::vector<float> *t[3] = {&sh[r].q, &sh[r].k, &sh[r].v};
                for (int a = 0; a < 3; a++) {
                    rn_gen g = gen_for(regime, (uint64_t)key, a, r, W, count, (uint64_t)H * D);
                    const uint64_t stream = pk_splitmix64(0xabcdefULL + (uint64_t)key * 977 +
                                                          (uint64_t)r * 131 + (uint64_t)a);
                    t[a]->resize(count);
                    for (size_t x = 0; x < count; x++)
                        (*t[a])[x] = bf16((float)rn_gen_value(&g, 0, stream, x));
                }
            }
            double worst[N_EMU] = {0}, nerr[N_EMU] = {0};
            int nan[N_EMU] = {0}, pass[N_EMU];
            double nwant = 0;
            for (int e = 0; e < N_EMU; e++)
                pass[e] = 1;
            for (int r = 0; r < W; r++) {
                std::vector<double> want(count);
                std::vector<float> got[N_EMU];
                for (int e = 0; e < N_EMU; e++)
                    got[e].resize(count);
                for (int i = 0; i < S; i++)
                    for (int h = 0; h < H; h++) {
                        const size_t o = ((size_t)i * H + h) * D;
                        exact(sh, S, H, r, i, h, &want[o]);
                        for (int e = 0; e < N_EMU; e++)
                            emulate(e, sh, S, H, r, i, h, &got[e][o]);
                    }
                double ss = 0;
                for (size_t x = 0; x < count; x++)
                    ss += want[x] * want[x];
                const double rms = sqrt(ss / count);
                nwant = sqrt(ss);
                for (int e = 0; e < N_EMU; e++) {
                    double ne = 0;
                    for (size_t x = 0; x < count; x++) {
                        const double err = fabs((double)got[e][x] - want[x]);
                        if (isnan(got[e][x]) || isinf(got[e][x])) {
                            nan[e]++;
                            pass[e] = 0;
                            continue;
                        }
                        const double tol = RTOL * fabs(want[x]) + ATOL_RMS * rms;
                        if (err / tol > worst[e] && e == E_REF && getenv("SIM_WHERE"))
                            printf("  ref worst: rank %d elem %zu want %.3g rms %.3g err %.3g\n", r,
                                   x, want[x], rms, err);
                        worst[e] = fmax(worst[e], err / tol);
                        ne += err * err;
                    }
                    const double rel = sqrt(ne) / nwant;
                    nerr[e] = fmax(nerr[e], rel);
                    if (worst[e] > 1 || rel > NORM_RTOL)
                        pass[e] = 0;
                }
            }
            printf("%-6s key %d:", regime_name[regime], key);
            for (int e = 0; e < N_EMU; e++)
                printf("  %s %s (%.3g, norm %.2g%s)", emu_name[e], pass[e] ? "pass" : "FAIL",
                       worst[e], nerr[e], nan[e] ? ", non-finite" : "");
            printf("\n");
        }
    return 0;
}
