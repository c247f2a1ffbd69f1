// Host check of pkb/49-51's checker tolerances (problems/include/pk_moe_ep_ref.cuh ep_check) on
// PKB's bf16 chain, no GPU: PKB's solution() emulated with its roundings (bf16 logits from an
// fp32 sum, fp32 softmax rounded to bf16, top-K on the bf16 probabilities, bf16 outputs of each
// linear, of the SiLU and of the product, bf16 weight products and a bf16 sum of the K rows) and
// an fp32 pipeline (what correct.cu computes: fp32 logits and weights, bf16 linears, fp32
// combine), both judged by the checker's rule with its own constants: a row passes against some
// admissible set within EP_ATOL_RMS rms(out) + EP_RTOL |want| + (EP_WTOL + EP_WTOL_Z max|z|)
// sum p |F|, and the output within its norm-wise allowance. Inputs: x scaled like the regimes
// (iid; 2^-6 and 2^-2 per rank; 16x; a row ramp of 4 octaves; a few dominant entries per row),
// the router of every mode. Reports the worst row ratio and norm ratio (<= 1 passes; the 4x rule
// wants <= 0.25) and, for comparison, the weights-1/K and top-K-renormalised outputs.
//
// g++ -O2 -std=c++17 -Iproblems/include -Icommon/include bench/pkb/sim_tolerance_49_51.cpp
//     -o /tmp/sim_tol && /tmp/sim_tol [calls]   (one command line)
#include "pk_moe_ep.cuh"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static const int M = 48, N = 512, I = 64;
static const float RTOL = 0.02f, ATOL_RMS = 0.0625f, WTOL = 0.02f, WTOL_Z = 0.015625f,
                   NORM_RTOL = 0.01f, NORM_Z = 0.0078125f; // pk_moe_ep_ref.cuh's

static float bf(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    float y;
    memcpy(&y, &u, 4);
    return y;
}

static double normal(uint64_t k) {
    const double u1 = pk_splitmix_unit(k), u2 = pk_splitmix_unit(k ^ 0x9e37ULL);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

struct Rank {
    std::vector<float> Wr, br, P[PK_MOE_EP_TENSORS];
};

// The MLP of a rank on x, with PyTorch's bf16 roundings (bf16 = 1) or fp32 after the linears'
// bf16 outputs (bf16 = 0: a fused kernel keeps h in fp32 only between its GEMMs... here the
// checker's own fp32 MLP, bf16 = -1, rounds nothing).
static void mlp(const Rank &R, const float *x, float *y, int mode) {
    auto r = [&](float v) { return mode >= 0 ? bf(v) : v; };
    float h[I];
    for (int i = 0; i < I; i++) {
        float g = 0.f, u = 0.f;
        for (int n = 0; n < N; n++) {
            g += x[n] * R.P[PK_MOE_EP_GATE_W][(size_t)i * N + n];
            u += x[n] * R.P[PK_MOE_EP_UP_W][(size_t)i * N + n];
        }
        g = r(g + R.P[PK_MOE_EP_GATE_B][i]);
        u = r(u + R.P[PK_MOE_EP_UP_B][i]);
        const float s = mode == 1 ? bf(g / (1.f + expf(-g))) : g / (1.f + expf(-g));
        h[i] = r(s * u);
    }
    for (int n = 0; n < N; n++) {
        float s = 0.f;
        for (int i = 0; i < I; i++)
            s += h[i] * R.P[PK_MOE_EP_DOWN_W][(size_t)n * I + i];
        y[n] = r(s + R.P[PK_MOE_EP_DOWN_B][n]);
    }
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 8;
    const char *regimes[6] = {"iid", "rank 2^-6", "rank 2^-2", "x16", "row ramp", "peaked"};
    const char *kinds[4] = {"PKB bf16 chain", "fp32 router + combine", "weights 1/K",
                            "top-K renormalised"};
    int bad = 0;
    for (int W = 2; W <= 8; W *= 2)
        for (int prob = 0; prob < 3; prob++) {
            const int E = prob == 0 ? W : prob == 1 ? 2 * W : pk_moe_ep_narrow_experts(W);
            const int K = std::min(2, E);
            double worst[6][4] = {{0}}, wnorm[6][4] = {{0}};
            for (int reg = 0; reg < 6; reg++)
                for (int c = 0; c < calls; c++) {
                    const uint64_t seed = 77 + (uint64_t)c;
                    const int key = c;
                    const PkMoeEpGroup g = pk_moe_ep_group(W, E, 0);
                    std::vector<Rank> R(g.size);
                    const int sizes[PK_MOE_EP_TENSORS] = {I * N, I, I * N, I, N * I, N};
                    const int fan[PK_MOE_EP_TENSORS] = {N, N, N, N, I, I};
                    for (int o = 0; o < g.size; o++)
                        for (int w = 0; w < PK_MOE_EP_TENSORS; w++) {
                            R[o].P[w].resize(sizes[w]);
                            for (int i = 0; i < sizes[w]; i++)
                                R[o].P[w][i] =
                                    bf(pk_moe_ep_param(seed, key, o, w, (size_t)i, fan[w]));
                        }
                    Rank &me = R[0];
                    me.Wr.resize((size_t)E * N);
                    me.br.resize(E);
                    for (int e = 0; e < E; e++) {
                        for (int n = 0; n < N; n++)
                            me.Wr[(size_t)e * N + n] =
                                bf(pk_moe_ep_router(seed, key, 0, E, g.El, N, e, n));
                        me.br[e] = bf(pk_moe_ep_router(seed, key, 0, E, g.El, N, e, -1));
                    }
                    std::vector<float> X((size_t)M * N);
                    for (int m = 0; m < M; m++)
                        for (int n = 0; n < N; n++) {
                            double v = normal(seed * 1000003 + (uint64_t)m * N + n);
                            if (reg == 1)
                                v = v * 0.015625 + 0.01;
                            if (reg == 2)
                                v = v * 0.25 - 0.1;
                            if (reg == 3)
                                v *= 16;
                            if (reg == 4)
                                v *= exp2(4.0 * m / M) * exp2(-2.0 + 4.0 * n / N) / 2;
                            if (reg == 5 && (pk_splitmix64(seed + (uint64_t)m * N + n) % 256) == 0)
                                v *= 8;
                            X[(size_t)m * N + n] = bf((float)v);
                        }
                    // The checker's side: fp32 logits, softmax, every owner's fp32 MLP.
                    std::vector<std::vector<float>> F(g.size, std::vector<float>((size_t)M * N));
                    for (int o = 0; o < g.size; o++)
                        for (int m = 0; m < M; m++)
                            mlp(R[o], &X[(size_t)m * N], &F[o][(size_t)m * N], -1);
                    std::vector<float> out[4];
                    for (int k = 0; k < 4; k++)
                        out[k].assign((size_t)M * N, 0.f);
                    std::vector<float> zs((size_t)M * E);
                    for (int m = 0; m < M; m++) {
                        float z[PK_MOE_EP_MAX_E], zb[PK_MOE_EP_MAX_E], p[PK_MOE_EP_MAX_E],
                            pb[PK_MOE_EP_MAX_E];
                        for (int e = 0; e < E; e++) {
                            float s = 0.f;
                            for (int n = 0; n < N; n++)
                                s += X[(size_t)m * N + n] * me.Wr[(size_t)e * N + n];
                            z[e] = s + me.br[e];
                            zb[e] = bf(z[e]);
                            zs[(size_t)m * E + e] = z[e];
                        }
                        pk_moe_ep_softmax(z, E, p);
                        pk_moe_ep_softmax(zb, E, pb);
                        for (int e = 0; e < E; e++)
                            pb[e] = bf(pb[e]);
                        const uint64_t topb = pk_moe_ep_topk(pb, E, K),
                                       top = pk_moe_ep_topk(z, E, K);
                        float tot = 0.f;
                        for (int e = 0; e < E; e++)
                            tot += (top >> e) & 1 ? p[e] : 0.f;
                        float y[N];
                        for (int e = 0; e < E; e++) {
                            const Rank &ow = R[e / g.El];
                            if ((topb >> e) & 1) { // PKB: bf16 chain, bf16 product, bf16 sum
                                mlp(ow, &X[(size_t)m * N], y, 1);
                                for (int n = 0; n < N; n++)
                                    out[0][(size_t)m * N + n] =
                                        bf(out[0][(size_t)m * N + n] + bf(y[n] * pb[e]));
                            }
                            if ((top >> e) & 1) {
                                mlp(ow, &X[(size_t)m * N], y, 0);
                                for (int n = 0; n < N; n++) {
                                    out[1][(size_t)m * N + n] += p[e] * y[n];
                                    out[2][(size_t)m * N + n] += y[n] / (float)K;
                                    out[3][(size_t)m * N + n] += p[e] / tot * y[n];
                                }
                            }
                        }
                        for (int k = 1; k < 4; k++)
                            for (int n = 0; n < N; n++)
                                out[k][(size_t)m * N + n] = bf(out[k][(size_t)m * N + n]);
                    }
                    double rms = 0;
                    for (float v : out[0])
                        rms += (double)v * v;
                    rms = sqrt(rms / out[0].size());
                    for (int k = 0; k < 4; k++) {
                        double err = 0, allow = 0;
                        for (int m = 0; m < M; m++) {
                            const float *z = &zs[(size_t)m * E];
                            float p[PK_MOE_EP_MAX_E];
                            pk_moe_ep_softmax(z, E, p);
                            float zmax = 0.f;
                            for (int e = 0; e < E; e++)
                                if (p[e] > 1e-3f)
                                    zmax = fmaxf(zmax, fabsf(z[e]));
                            const PkMoeEpAdmissible a =
                                pk_moe_ep_admissible(z, E, K, pk_moe_ep_margin(z, E, K));
                            const PkMoeEpTol tol = {ATOL_RMS * (float)rms, RTOL,
                                                    WTOL + WTOL_Z * zmax};
                            float w;
                            uint64_t set;
                            auto Fe = [&](int e, int n) { return F[e / g.El][(size_t)m * N + n]; };
                            const int found = pk_moe_ep_row_match(
                                [&](int n) { return out[k][(size_t)m * N + n]; }, Fe, N, p, a, tol,
                                &w, &set, 4096);
                            worst[reg][k] = std::max(worst[reg][k], (double)w);
                            if (found >= 0) {
                                const double r = NORM_RTOL + NORM_Z * zmax;
                                for (int n = 0; n < N; n++) {
                                    double want = 0;
                                    for (uint64_t b = set; b; b &= b - 1) {
                                        const int e = pk_moe_ep_popcount((b & ~(b - 1)) - 1);
                                        want += (double)p[e] * Fe(e, n);
                                    }
                                    const double d = out[k][(size_t)m * N + n] - want;
                                    err += d * d;
                                    allow += r * r * want * want;
                                }
                            }
                        }
                        wnorm[reg][k] =
                            std::max(wnorm[reg][k], allow > 0 ? sqrt(err / allow) : 0.0);
                    }
                }
            printf("W=%d E=%d K=%d (pkb/%d):\n", W, E, K, 49 + prob);
            for (int reg = 0; reg < 6; reg++) {
                printf("  %-10s", regimes[reg]);
                for (int k = 0; k < 4; k++)
                    printf("  %s %6.3f/%6.3f", k < 2 ? "ok?" : "bad", worst[reg][k], wnorm[reg][k]);
                printf("\n");
                bad += worst[reg][0] > 1 || worst[reg][1] > 1 || wnorm[reg][0] > 1 ||
                       wnorm[reg][1] > 1;
            }
        }
    printf("columns: %s | %s | %s | %s (row ratio / norm ratio; <= 1 passes)\n", kinds[0], kinds[1],
           kinds[2], kinds[3]);
    printf(bad ? "an honest output fails the checker in %d (W, problem, regime) cases\n"
               : "honest outputs pass everywhere\n",
           bad);
    return bad != 0;
}
