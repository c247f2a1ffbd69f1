// Host simulation of pkb/56_ring_attention_pp (no GPU): inputs as problem.cu's generate() draws
// them (hidden per CP rank with its scale and the hot positions at trials 2 mod 3, weights per
// stage ~ N(0, 0.02^2)), the two stages (stage 1 on stage 0's output) at W = 2, 4, 8 (CP = W/2),
// every output checked against the problem's tolerance:
//   exact      the definition in double from the bf16 inputs (stage 1 on stage 0's double output);
//   ref        the reference: qkv = bf16(fp32 GEMM), PKB's ring order (own block causal, then the
//              blocks of CP ranks c-1 .. 0), per block 64-key tiles of the online softmax of
//              pk_attention.cuh with P rounded to bf16, the logsumexp merge, ctx and out bf16;
//   correct    solutions/correct.cu: one pass over every earlier key in position order;
//   alt        correct with the QKV projection summed in another fp32 order (an honest
//              candidate's own GEMM): against fp64 and, as the harness does, against ref;
//   wrong      solutions/wrong.cu: key < query (own key masked; position 0 gives 0);
//   skipx      solutions/shortcut_skip_exchange.cu: stage 1 on its own hidden;
//   skipstep   solutions/shortcut_skip_ring_step.cu: CP rank 0's keys dropped for CP ranks > 0;
//   nomax      solutions/shortcut_assumed_max.cu: exp(s) without the running max;
//   eqmax      solutions/shortcut_assumed_equal_max.cu: the softmax restarted per CP shard and
//              the shards merged by adding their sums (as if their maxima were equal).
// Build: g++ -O2 -std=c++17 -Icommon/include -Iproblems/include
//          bench/pkb/sim_56_ring_attention_pp.cpp -o /tmp/sim56
// Run: /tmp/sim56 [T [B [trials]]]
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "pk_attention.cuh"
#include "pk_splitmix.h"

enum { NH = 8, HD = 64, HID = NH * HD, TILE = 64 };
static double RTOL = 0.05, ATOL_RMS = 0.1, NORM_RTOL = 0.02; // meta.json's; SIM_TOL=a,b,c
static const float SCALE = 0.125f, HOT = 32.f;

static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

typedef std::vector<double> Vd;

static void fill(Vd &x, size_t count, uint64_t key, float scale, size_t S, uint64_t hot_key) {
    x.resize(count);
    for (size_t i = 0; i < count; i++) {
        const double u1 = pk_splitmix_unit(key + 2 * i), u2 = pk_splitmix_unit(key + 2 * i + 1);
        const double z = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
        float f = scale;
        if (hot_key) {
            const size_t row = i / HID, b = row / S, s = row % S;
            if (pk_splitmix64(hot_key + b) % S == s)
                f *= HOT;
        }
        x[i] = bf16((float)(f * z));
    }
}

// Y = X W^T: mode 0 double, 1 fp32 rounded to bf16, 2 fp32 in 4 partial sums rounded to bf16.
static Vd linear(const Vd &X, const Vd &W, int rows, int in_f, int out_f, int mode) {
    Vd Y((size_t)rows * out_f);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_f; o++) {
            double d = 0;
            float f = 0, f4[4] = {0, 0, 0, 0};
            for (int i = 0; i < in_f; i++) {
                const double a = X[(size_t)r * in_f + i], b = W[(size_t)o * in_f + i];
                d += a * b;
                f += (float)a * (float)b;
                f4[i % 4] += (float)a * (float)b;
            }
            if (mode == 2)
                f = (f4[0] + f4[1]) + (f4[2] + f4[3]);
            Y[(size_t)r * out_f + o] = mode ? bf16(f) : d;
        }
    return Y;
}

enum { E_EXACT, E_REF, E_CORRECT, E_ALT, E_WRONG, E_SKIPX, E_SKIPSTEP, E_NOMAX, E_EQMAX, N_EMU };
static const char *emu_name[N_EMU] = {"exact", "ref",      "correct", "alt",  "wrong",
                                      "skipx", "skipstep", "nomax",   "eqmax"};

// Causal attention of CP rank c's queries over the stage's keys; qkv[j]: CP rank j's (B S, 3 HID).
static Vd attention(int e, const std::vector<Vd> &qkv, int B, int S, int c) {
    Vd ctx((size_t)B * S * HID);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < S; i++)
            for (int h = 0; h < NH; h++) {
                const long long qpos = (long long)c * S + i;
                const double *q = &qkv[c][((size_t)b * S + i) * 3 * HID + (size_t)h * HD];
                auto key = [&](long long g) {
                    return &qkv[g / S][((size_t)b * S + g % S) * 3 * HID + HID + (size_t)h * HD];
                };
                auto val = [&](long long g) { return key(g) + HID; };
                double *dst = &ctx[(((size_t)b * S + i) * NH + h) * HD];
                if (e == E_EXACT) {
                    std::vector<double> s((size_t)qpos + 1);
                    double m = -INFINITY, l = 0;
                    for (long long g = 0; g <= qpos; g++) {
                        double d = 0;
                        for (int x = 0; x < HD; x++)
                            d += q[x] * key(g)[x];
                        s[(size_t)g] = d * SCALE;
                        m = fmax(m, s[(size_t)g]);
                    }
                    for (int x = 0; x < HD; x++)
                        dst[x] = 0;
                    for (long long g = 0; g <= qpos; g++) {
                        const double p = exp(s[(size_t)g] - m);
                        l += p;
                        for (int x = 0; x < HD; x++)
                            dst[x] += p * val(g)[x];
                    }
                    for (int x = 0; x < HD; x++)
                        dst[x] /= l;
                    continue;
                }
                auto score = [&](long long g) {
                    float d = 0;
                    for (int x = 0; x < HD; x++)
                        d += (float)q[x] * (float)key(g)[x];
                    return d * SCALE;
                };
                // One block [lo, hi) of keys in 64-key tiles: unnormalised o, its row state.
                auto run_block = [&](long long lo, long long hi, long long last, float *o,
                                     PkSoftmaxRow *row, int nomax) {
                    for (long long t0 = lo; t0 < hi; t0 += TILE) {
                        const long long t1 = t0 + TILE < hi ? t0 + TILE : hi;
                        float s[TILE], tmax = -INFINITY;
                        for (long long g = t0; g < t1; g++) {
                            s[g - t0] = g > last ? -INFINITY : score(g);
                            tmax = fmaxf(tmax, s[g - t0]);
                        }
                        float alpha = 1.f;
                        if (nomax)
                            row->m = 0.f;
                        else
                            alpha = pk_softmax_row_rescale(row, tmax);
                        for (int x = 0; x < HD; x++)
                            o[x] *= alpha;
                        for (long long g = t0; g < t1; g++) {
                            const float p = nomax ? (s[g - t0] == -INFINITY ? 0.f : expf(s[g - t0]))
                                                  : pk_softmax_row_p(row, s[g - t0]);
                            row->l += p;
                            const float pb = bf16(p);
                            for (int x = 0; x < HD; x++)
                                o[x] += pb * (float)val(g)[x];
                        }
                    }
                };
                if (e == E_REF) { // ring order: own block (causal), then c-1 .. 0, merged
                    float acc[HD], lse = -INFINITY;
                    for (int step = 0; step <= c; step++) {
                        const int j = c - step;
                        PkSoftmaxRow row = pk_softmax_row_init();
                        float o[HD] = {0};
                        run_block((long long)j * S, (long long)(j + 1) * S, qpos, o, &row, 0);
                        const float lb = pk_softmax_row_lse(&row);
                        const float inv = row.l > 0.f ? 1.f / row.l : 0.f;
                        if (step == 0) {
                            for (int x = 0; x < HD; x++)
                                acc[x] = o[x] * inv;
                            lse = lb;
                        } else {
                            const float w = pk_lse_merge_weight(lse, lb);
                            for (int x = 0; x < HD; x++)
                                acc[x] = pk_lse_merge_out(acc[x], o[x] * inv, w);
                            lse = pk_lse_merge(lse, lb);
                        }
                    }
                    for (int x = 0; x < HD; x++)
                        dst[x] = bf16(acc[x]);
                    continue;
                }
                if (e == E_EQMAX) { // per shard, merged by adding the sums (equal maxima)
                    float acc[HD] = {0}, lsum = 0.f;
                    for (int j = 0; j <= c; j++) {
                        PkSoftmaxRow row = pk_softmax_row_init();
                        float o[HD] = {0};
                        const long long hi = j == c ? qpos + 1 : (long long)(j + 1) * S;
                        run_block((long long)j * S, hi, qpos, o, &row, 0);
                        for (int x = 0; x < HD; x++)
                            acc[x] += o[x];
                        lsum += row.l;
                    }
                    for (int x = 0; x < HD; x++)
                        dst[x] = bf16(acc[x] / lsum);
                    continue;
                }
                const long long lo = e == E_SKIPSTEP && c > 0 ? S : 0;
                const long long last = e == E_WRONG ? qpos - 1 : qpos;
                PkSoftmaxRow row = pk_softmax_row_init();
                float o[HD] = {0};
                run_block(lo, qpos + 1, last, o, &row, e == E_NOMAX);
                const float inv = e == E_WRONG && row.l == 0.f ? 0.f : 1.f / row.l;
                for (int x = 0; x < HD; x++)
                    dst[x] = bf16(o[x] * inv);
            }
    return ctx;
}

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 64, B = argc > 2 ? atoi(argv[2]) : 1;
    const int trials = argc > 3 ? atoi(argv[3]) : 6;
    if (getenv("SIM_TOL"))
        sscanf(getenv("SIM_TOL"), "%lf,%lf,%lf", &RTOL, &ATOL_RMS, &NORM_RTOL);
    printf("tolerance rtol %g, atol_rms %g, norm_rtol %g; T %d, B %d, NH %d, HD %d\n", RTOL,
           ATOL_RMS, NORM_RTOL, T, B, NH, HD);
    int failures = 0;
    for (int W = 2; W <= 8; W *= 2) {
        const int cp = W / 2, S = T / cp, rows = B * S;
        for (int trial = 0; trial < trials; trial++) {
            const uint64_t seed = 0x5eed0056ULL + (uint64_t)W;
            const uint64_t base =
                pk_splitmix64(seed ^ pk_splitmix64(0x56560000ULL + (uint64_t)trial));
            std::vector<Vd> hid(cp);
            for (int c = 0; c < cp; c++) {
                float hs = 1.f;
                if (trial & 1 && trial % 3 != 2)
                    hs = (float)exp2(2.0 * pk_splitmix_unit(base + 7 + (uint64_t)c) - 1.0);
                const uint64_t hot =
                    trial % 3 == 2 ? pk_splitmix64(base + 400 + (uint64_t)c) | 1 : 0;
                fill(hid[c], (size_t)rows * HID, pk_splitmix64(base + 100 + (uint64_t)c), hs, S,
                     hot);
            }
            Vd wq[2], wo[2];
            for (int p = 0; p < 2; p++) {
                fill(wq[p], (size_t)3 * HID * HID, pk_splitmix64(base + 200 + (uint64_t)p), 0.02f,
                     S, 0);
                fill(wo[p], (size_t)HID * HID, pk_splitmix64(base + 300 + (uint64_t)p), 0.02f, S,
                     0);
            }
            // outs[e][p][c]: stage p, CP rank c.
            std::vector<std::vector<Vd>> outs[N_EMU];
            for (int e = 0; e < N_EMU; e++) {
                const int gm = e == E_EXACT ? 0 : e == E_ALT ? 2 : 1;
                outs[e].assign(2, std::vector<Vd>(cp));
                for (int p = 0; p < 2; p++) {
                    std::vector<Vd> qkv(cp);
                    for (int c = 0; c < cp; c++) {
                        const Vd &x = p == 0 || e == E_SKIPX ? hid[c] : outs[e][0][c];
                        qkv[c] = linear(x, wq[p], rows, HID, 3 * HID, gm);
                    }
                    for (int c = 0; c < cp; c++) {
                        const int ae = e == E_ALT ? E_CORRECT : e == E_SKIPX ? E_CORRECT : e;
                        const Vd ctx = attention(ae, qkv, B, S, c);
                        outs[e][p][c] = linear(ctx, wo[p], rows, HID, HID, gm ? 1 : 0);
                    }
                }
            }
            double worst[N_EMU] = {0}, nerr[N_EMU] = {0}, alt_vs_ref = 0;
            int nonfinite[N_EMU] = {0}, pass[N_EMU];
            for (int e = 0; e < N_EMU; e++)
                pass[e] = 1;
            for (int p = 0; p < 2; p++)
                for (int c = 0; c < cp; c++) {
                    const Vd &want = outs[E_EXACT][p][c], &rf = outs[E_REF][p][c];
                    double ss = 0, sr = 0;
                    for (size_t x = 0; x < want.size(); x++) {
                        ss += want[x] * want[x];
                        sr += rf[x] * rf[x];
                    }
                    const double rms = sqrt(ss / want.size()), rr = sqrt(sr / rf.size());
                    for (size_t x = 0; x < rf.size(); x++)
                        alt_vs_ref = fmax(alt_vs_ref, fabs(outs[E_ALT][p][c][x] - rf[x]) /
                                                          (RTOL * fabs(rf[x]) + ATOL_RMS * rr));
                    for (int e = 1; e < N_EMU; e++) {
                        double ne = 0;
                        for (size_t x = 0; x < want.size(); x++) {
                            const double got = outs[e][p][c][x];
                            if (!isfinite(got)) {
                                nonfinite[e]++;
                                pass[e] = 0;
                                continue;
                            }
                            const double err = fabs(got - want[x]);
                            worst[e] =
                                fmax(worst[e], err / (RTOL * fabs(want[x]) + ATOL_RMS * rms));
                            ne += err * err;
                        }
                        nerr[e] = fmax(nerr[e], sqrt(ne / ss));
                        if (worst[e] > 1 || nerr[e] > NORM_RTOL)
                            pass[e] = 0;
                    }
                }
            printf("W %d trial %d%s:", W, trial, trial % 3 == 2 ? " (hot)" : "");
            for (int e = 1; e < N_EMU; e++)
                printf("  %s %s (%.3g, norm %.2g%s)", emu_name[e], pass[e] ? "pass" : "FAIL",
                       worst[e], nerr[e], nonfinite[e] ? ", non-finite" : "");
            printf("  alt vs ref %.3g\n", alt_vs_ref);
            // Expected: ref, correct, alt pass (alt also against ref); wrong and skipx fail;
            // skipstep fails at W >= 4 (passes at W = 2: no ring); nomax fails exactly on hot
            // trials.
            failures += !pass[E_REF] + !pass[E_CORRECT] + !pass[E_ALT] + (alt_vs_ref > 1);
            failures += pass[E_WRONG] + pass[E_SKIPX] + (pass[E_SKIPSTEP] != (W == 2));
            failures += pass[E_NOMAX] != (trial % 3 != 2);
            // eqmax: the correct solution at W = 2 (one shard); at W >= 4 it must fail on hot
            // trials (on the others it fails at these small shards, whose maxima differ more
            // than at S = 4096: reported, not counted).
            if (W == 2 || trial % 3 == 2)
                failures += pass[E_EQMAX] != (W == 2);
        }
    }
    printf("%s (%d unexpected)\n", failures ? "UNEXPECTED" : "as expected", failures);
    return failures != 0;
}
