// Host simulation of pkb/57_ring_attention_backward_dp on the input regimes (no GPU): q, k, v,
// dout drawn as the runner does (rn_values.h; the regime parameters as problems/runner/regime.c
// draws them; q and k allow iid and rank, v and dout every regime), out and lse the forward over
// each rank's own keys (problem.cu's generate(), PKB's generator), then every emulation's
// dq, dk, dv after the DP average, against the double evaluation of PKB's formulas:
//   pkb        PKB's _ring_attn_backward: fp32 (the .float() casts), dq summed over the blocks,
//              dK, dV summed in ring order, each rounded to bf16, the bf16 DP sum halved;
//   ref        the reference: the same with P and dS rounded to bf16 as tensor-core operands;
//   rowdot0    shortcut_assumed_rowdot.cu: D = rowsum(dout * out) taken as 0;
//   skipdp     shortcut_skip_exchange.cu: no DP all-reduce (this replica's gradients);
//   skipstep   shortcut_skip_ring_step.cu: the keys of CP rank (c + 1) % CP left out;
//   wrong      wrong.cu: dk without the softmax scale.
// It counts the verdicts that differ from expected.json's (pkb and ref pass; rowdot0, skipdp and
// wrong fail; skipstep fails at W >= 4 and passes at W = 2, where there is no ring).
// Per (q/k regime, v/dout regime) and draw: each emulation's worst |err| / (rtol |want| +
// atol_rms rms(want)) over dq, dk, dv of every rank, its norm-wise error, pass or FAIL.
// Build: g++ -O2 -std=c++17 -Iproblems/runner -Icommon/include -Iproblems/include
//          bench/pkb/sim_57_ring_attention_backward_dp.cpp -o /tmp/sim57
// Run: /tmp/sim57 [W [S [draws]]]   (B 1, H 2, D 64)
// It also models pk_attn_ring_backward's buffer rotation (ring_buffers_check) at ring sizes 1..8.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "rn_values.h"

static double RTOL = 0.05, ATOL_RMS = 0.1, NORM_RTOL = 0.02; // meta.json's; SIM_TOL=a,b,c
enum { D = 64, H = 2 };
static const double SCALE = 0.125;

static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
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

typedef std::vector<float> Vf;
typedef std::vector<double> Vd;
struct Rank {
    Vf q, k, v, dout, out, lse; // (S, H, D) bf16 values; lse (H, S) fp32
};

enum { E_PKB, E_REF, E_ROWDOT0, E_SKIPDP, E_SKIPSTEP, E_WRONG, N_EMU };
static const char *emu_name[N_EMU] = {"pkb", "ref", "rowdot0", "skipdp", "skipstep", "wrong"};

// One CP group's backward (before the DP average): grads of every rank c, (S, H, D) each.
// mode -1: double; else an emulation.
static void backward(int mode, const std::vector<Rank> &rk, int S, std::vector<Vd> &dq,
                     std::vector<Vd> &dk, std::vector<Vd> &dv) {
    const int cp = (int)rk.size();
    const size_t per = (size_t)S * H * D;
    dq.assign(cp, Vd(per, 0.0));
    dk.assign(cp, Vd(per, 0.0));
    dv.assign(cp, Vd(per, 0.0));
    const bool dbl = mode < 0, opr = mode == E_REF || mode == E_ROWDOT0 || mode == E_SKIPSTEP ||
                                     mode == E_WRONG || mode == E_SKIPDP;
    for (int c = 0; c < cp; c++) {
        const Rank &r = rk[c];
        std::vector<Vf> dkb(cp, Vf(per, 0.f)), dvb(cp, Vf(per, 0.f)); // this rank's shares
        Vf dqf(per, 0.f);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < S; i++) {
                double dd = 0;
                for (int x = 0; x < D; x++)
                    dd += (double)r.dout[((size_t)i * H + h) * D + x] *
                          r.out[((size_t)i * H + h) * D + x];
                if (mode == E_ROWDOT0)
                    dd = 0;
                if (!dbl)
                    dd = (float)dd;
                const double lse = r.lse[(size_t)h * S + i];
                for (int step = 0; step < cp; step++) {
                    const int j = (c - step + cp) % cp;
                    if (mode == E_SKIPSTEP && cp > 1 && j == (c + 1) % cp)
                        continue;
                    for (int kk = 0; kk < S; kk++) {
                        const float *qr = &r.q[((size_t)i * H + h) * D];
                        const float *kr = &rk[j].k[((size_t)kk * H + h) * D];
                        const float *vr = &rk[j].v[((size_t)kk * H + h) * D];
                        const float *dor = &r.dout[((size_t)i * H + h) * D];
                        double s = 0, dp = 0;
                        float sf = 0, dpf = 0;
                        for (int x = 0; x < D; x++) {
                            s += (double)qr[x] * kr[x];
                            dp += (double)dor[x] * vr[x];
                            sf += qr[x] * kr[x];
                            dpf += dor[x] * vr[x];
                        }
                        if (dbl) {
                            const double p = exp(s * SCALE - lse), ds = p * (dp - dd);
                            for (int x = 0; x < D; x++) {
                                dq[c][((size_t)i * H + h) * D + x] += SCALE * ds * kr[x];
                                dk[j][((size_t)kk * H + h) * D + x] += SCALE * ds * qr[x];
                                dv[j][((size_t)kk * H + h) * D + x] += p * dor[x];
                            }
                            continue;
                        }
                        const float p = expf(sf * (float)SCALE - (float)lse);
                        const float ds = p * (dpf - (float)dd);
                        const float pb = opr ? bf16(p) : p, dsb = opr ? bf16(ds) : ds;
                        for (int x = 0; x < D; x++) {
                            dqf[((size_t)i * H + h) * D + x] += (float)SCALE * dsb * kr[x];
                            dkb[j][((size_t)kk * H + h) * D + x] +=
                                (mode == E_WRONG ? 1.f : (float)SCALE) * dsb * qr[x];
                            dvb[j][((size_t)kk * H + h) * D + x] += pb * dor[x];
                        }
                    }
                }
            }
        if (dbl)
            continue;
        for (size_t x = 0; x < per; x++)
            dq[c][x] = bf16(dqf[x]);
        for (int j = 0; j < cp; j++) // fp32 sums (ring order only changes fp32 rounding)
            for (size_t x = 0; x < per; x++) {
                dk[j][x] += dkb[j][x];
                dv[j][x] += dvb[j][x];
            }
    }
    if (!dbl)
        for (int j = 0; j < cp; j++)
            for (size_t x = 0; x < per; x++) {
                dk[j][x] = bf16((float)dk[j][x]);
                dv[j][x] = bf16((float)dv[j][x]);
            }
}

// pk_attn_ring_backward's buffers, modelled: rank r completes the running dK, dV of the block it
// holds in place in pair (step % 2), sends that pair to rank r + 1 and receives into the other;
// k, v move on except after the last step. Each pair is a set of (query rank, key block) shares
// (bit q * 8 + j). After the last step, pair (W % 2) of rank r must hold exactly the shares of
// every query rank in key block r. Returns the number of violations.
static int ring_buffers_check(int W) {
    std::vector<uint64_t> X[2] = {std::vector<uint64_t>(W, 0), std::vector<uint64_t>(W, 0)};
    std::vector<int> held(W);
    int bad = 0;
    for (int r = 0; r < W; r++)
        held[r] = r;
    for (int s = 0; s < W; s++) {
        for (int r = 0; r < W; r++) {
            const int j = (r - s + W) % W;
            bad += held[r] != j;
            uint64_t &cur = X[s % 2][r];
            if (s > 0)
                for (int q = 0; q < W; q++)
                    for (int jj = 0; jj < W; jj++)
                        bad += (cur >> (q * 8 + jj) & 1) && jj != j; // a share of another block
            cur = (s == 0 ? 0 : cur) | 1ULL << (r * 8 + j);
        }
        std::vector<uint64_t> sent = X[s % 2];
        for (int r = 0; r < W; r++)
            X[(s + 1) % 2][(r + 1) % W] = sent[r];
        if (s + 1 < W) {
            std::vector<int> h = held;
            for (int r = 0; r < W; r++)
                held[r] = h[(r - 1 + W) % W];
        }
    }
    for (int r = 0; r < W; r++) {
        uint64_t want = 0;
        for (int q = 0; q < W; q++)
            want |= 1ULL << (q * 8 + r);
        bad += X[W % 2][r] != want;
    }
    return bad;
}

int main(int argc, char **argv) {
    const int W = argc > 1 ? atoi(argv[1]) : 2, S = argc > 2 ? atoi(argv[2]) : 64;
    const int draws = argc > 3 ? atoi(argv[3]) : 2, cp = W / 2;
    if (getenv("SIM_TOL"))
        sscanf(getenv("SIM_TOL"), "%lf,%lf,%lf", &RTOL, &ATOL_RMS, &NORM_RTOL);
    static const char *rname[] = {"iid", "rank", "row", "heavy", "peaked"};
    const size_t per = (size_t)S * H * D;
    printf("W %d (DP 2 x CP %d), S %d, H %d, D %d; tolerance rtol %g atol_rms %g norm %g\n", W, cp,
           S, H, D, RTOL, ATOL_RMS, NORM_RTOL);
    int unexpected = 0;
    for (int w = 1; w <= 8; w++) // the ring's buffer rotation at every ring size up to 8
        unexpected += ring_buffers_check(w);
    printf("ring buffer rotation (W = 1..8): %s\n",
           unexpected ? "WRONG" : "every key block's shares end on its rank");
    for (int qk = 0; qk < 2; qk++)
        for (int vd = 0; vd < 5; vd++)
            for (int key = 0; key < draws; key++) {
                // rk[d][c]: replica d, CP rank c (global rank d * cp + c).
                std::vector<std::vector<Rank>> rk(2, std::vector<Rank>(cp));
                for (int d = 0; d < 2; d++)
                    for (int c = 0; c < cp; c++) {
                        Rank &r = rk[d][c];
                        const int rank = d * cp + c;
                        Vf *t[4] = {&r.q, &r.k, &r.v, &r.dout};
                        for (int a = 0; a < 4; a++) {
                            const int regime = a < 2 ? qk : vd;
                            const uint64_t k2 = (uint64_t)(key + 100 * (qk * 5 + vd));
                            rn_gen gg = gen_for(regime, k2, a, rank, W, per, (uint64_t)H * D);
                            const uint64_t stream = pk_splitmix64(
                                0x57abcULL + k2 * 977 + (uint64_t)rank * 131 + (uint64_t)a);
                            t[a]->resize(per);
                            for (size_t x = 0; x < per; x++)
                                (*t[a])[x] = bf16((float)rn_gen_value(&gg, 0, stream, x));
                        }
                        // The forward over the rank's own keys: out bf16, lse (H, S) fp32.
                        r.out.assign(per, 0.f);
                        r.lse.assign((size_t)H * S, 0.f);
                        for (int h = 0; h < H; h++)
                            for (int i = 0; i < S; i++) {
                                std::vector<double> s(S);
                                double m = -INFINITY, l = 0, o[D] = {0};
                                for (int kk = 0; kk < S; kk++) {
                                    double x = 0;
                                    for (int e = 0; e < D; e++)
                                        x += (double)r.q[((size_t)i * H + h) * D + e] *
                                             r.k[((size_t)kk * H + h) * D + e];
                                    s[kk] = x * SCALE;
                                    m = fmax(m, s[kk]);
                                }
                                for (int kk = 0; kk < S; kk++) {
                                    const double p = exp(s[kk] - m);
                                    l += p;
                                    for (int e = 0; e < D; e++)
                                        o[e] += p * r.v[((size_t)kk * H + h) * D + e];
                                }
                                for (int e = 0; e < D; e++)
                                    r.out[((size_t)i * H + h) * D + e] = bf16((float)(o[e] / l));
                                r.lse[(size_t)h * S + i] = (float)(m + log(l));
                            }
                    }
                // Per replica backward, then the DP average.
                std::vector<Vd> want[3], got[N_EMU][3];
                std::vector<Vd> g0[3], g1[3];
                backward(-1, rk[0], S, g0[0], g0[1], g0[2]);
                backward(-1, rk[1], S, g1[0], g1[1], g1[2]);
                for (int t = 0; t < 3; t++) {
                    want[t] = g0[t];
                    for (int c = 0; c < cp; c++)
                        for (size_t x = 0; x < per; x++)
                            want[t][c][x] = 0.5 * (g0[t][c][x] + g1[t][c][x]);
                }
                for (int e = 0; e < N_EMU; e++) {
                    backward(e, rk[0], S, g0[0], g0[1], g0[2]);
                    backward(e, rk[1], S, g1[0], g1[1], g1[2]);
                    for (int t = 0; t < 3; t++) {
                        got[e][t] = g0[t];
                        if (e != E_SKIPDP)
                            for (int c = 0; c < cp; c++)
                                for (size_t x = 0; x < per; x++)
                                    got[e][t][c][x] =
                                        0.5 * bf16((float)(g0[t][c][x] + g1[t][c][x]));
                    }
                }
                printf("q,k %-4s v,dout %-6s key %d:", rname[qk], rname[vd], key);
                int verdict[N_EMU];
                for (int e = 0; e < N_EMU; e++) {
                    double worst = 0, nrm = 0;
                    bool nonfinite = false;
                    for (int t = 0; t < 3; t++)
                        for (int c = 0; c < cp; c++) {
                            const Vd &w = want[t][c], &gv = got[e][t][c];
                            double ss = 0, ee = 0;
                            for (double x : w)
                                ss += x * x;
                            const double rms = sqrt(ss / w.size());
                            for (size_t x = 0; x < w.size(); x++) {
                                if (!isfinite(gv[x])) {
                                    nonfinite = true;
                                    continue;
                                }
                                const double err = fabs(gv[x] - w[x]);
                                worst = fmax(worst, err / (RTOL * fabs(w[x]) + ATOL_RMS * rms));
                                ee += err * err;
                            }
                            nrm = fmax(nrm, sqrt(ee / ss));
                        }
                    const bool pass = !nonfinite && worst <= 1 && nrm <= NORM_RTOL;
                    printf("  %s %s (%.3g, norm %.2g%s)", emu_name[e], pass ? "pass" : "FAIL",
                           worst, nrm, nonfinite ? ", non-finite" : "");
                    verdict[e] = pass;
                }
                printf("\n");
                unexpected += !verdict[E_PKB] + !verdict[E_REF] + verdict[E_ROWDOT0] +
                              verdict[E_SKIPDP] + verdict[E_WRONG] +
                              (verdict[E_SKIPSTEP] != (cp == 1));
            }
    printf("%s (%d unexpected)\n", unexpected ? "UNEXPECTED" : "as expected", unexpected);
    return unexpected != 0;
}
