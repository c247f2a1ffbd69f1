// Host simulation of PKB 49-51 (moe_ep_balanced, moe_ep_wide, moe_ep_narrow; issue #29) against
// problems/include/pk_moe_ep.cuh, no GPU: every rank of W = 2, 4, 8 in one process, fp32.
//
//   pkb_solution()  PKB's solution() transcribed op by op: router linear, softmax, topk (ties to
//                   the lower index, or to the higher one: another honest top-k), one_hot
//                   permute(2, 1, 0), _preprocess (counts, all_gather in the EP group, splits),
//                   _permute, all_to_all_single, _sort_chunks_by_idxs(permute_order),
//                   expert_forward with the rank's MLP, _sort_chunks_by_idxs(unpermute_order),
//                   all_to_all_single back, _generate_weights_idx, _unpermute; the EP group of
//                   51 from _resolve_ep_group_for_narrow_moe.
//   direct          out[m] = sum_k p_{e_k}(m) f_{owner(e_k)}(x_m), the header's formulation
//                   (what a reference or a fused kernel computes without PKB's layout).
//   checker         pk_moe_ep_admissible + pk_moe_ep_row_match on every token of every rank:
//                   PKB's output (either tie rule) must pass; the hostile and shortcut outputs
//                   must fail somewhere in every (problem, W) where they can differ.
//
// Build and run: g++ -O2 -std=c++17 -Iproblems/include -Icommon/include
//   bench/pkb/sim_49_51_moe_ep.cpp -o /tmp/sim_moe_ep && /tmp/sim_moe_ep [calls]
#include "pk_moe_ep.cuh"

#include <algorithm>
#include <numeric>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

typedef std::vector<float> Vec;
static const int M = 24, N = 16, I = 8;

struct Rank {
    Vec x, Wg, bg, P[PK_MOE_EP_TENSORS];
};

static double normal(uint64_t k) {
    const double u1 = pk_splitmix_unit(k), u2 = pk_splitmix_unit(k ^ 0x9e37ULL);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void make_rank(uint64_t seed, int key, int r, int E, int El, Rank &R) {
    R.x.resize(M * N);
    for (int i = 0; i < M * N; i++)
        R.x[i] = (float)normal(seed * 7919 + (uint64_t)key * 104729 + ((uint64_t)r << 32) + i);
    R.Wg.resize(E * N);
    R.bg.resize(E);
    for (int e = 0; e < E; e++) {
        for (int n = 0; n < N; n++)
            R.Wg[e * N + n] = pk_moe_ep_router(seed, key, r, E, El, N, e, n);
        R.bg[e] = pk_moe_ep_router(seed, key, r, E, El, N, e, -1);
    }
    const int sizes[PK_MOE_EP_TENSORS] = {I * N, I, I * N, I, N * I, N};
    const int fan[PK_MOE_EP_TENSORS] = {N, N, N, N, I, I};
    for (int w = 0; w < PK_MOE_EP_TENSORS; w++) {
        R.P[w].resize(sizes[w]);
        for (int i = 0; i < sizes[w]; i++)
            R.P[w][i] = pk_moe_ep_param(seed, key, r, w, (size_t)i, fan[w]);
    }
}

static void mlp(const Rank &R, const float *x, float *y) {
    float h[I];
    pk_moe_ep_mlp_row([&](int n) { return x[n]; }, [&](int w, size_t i) { return R.P[w][i]; }, N, I,
                      h, y);
}

static void logits(const Rank &R, int E, int m, float *z) {
    for (int e = 0; e < E; e++) {
        float s = R.bg[e];
        for (int n = 0; n < N; n++)
            s += R.x[m * N + n] * R.Wg[e * N + n];
        z[e] = s;
    }
}

// torch.topk(softmax(z), K): values descending; ties to the lower index (hi = 0) or the higher.
static void topk(const float *p, int E, int K, int hi, int *sel, float *w) {
    std::vector<int> idx(E);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
        return p[a] != p[b] ? p[a] > p[b] : (hi ? a > b : a < b);
    });
    for (int k = 0; k < K; k++) {
        sel[k] = idx[k];
        w[k] = p[idx[k]];
    }
}

// PKB's solution() on every rank; out[r] is rank r's M x N output.
static void pkb_solution(std::vector<Rank> &R, int W, int E, int K, int hi, std::vector<Vec> &out) {
    std::vector<std::vector<int>> sel(W, std::vector<int>(M * K));
    std::vector<Vec> rw(W, Vec(M * K));
    std::vector<std::vector<long>> cnt(W, std::vector<long>(E));    // num_local_tokens_per_expert
    std::vector<std::vector<int>> rmap(W, std::vector<int>(E * M)); // routing_map
    std::vector<std::vector<int>> perm(W);                          // sorted_indices
    for (int r = 0; r < W; r++) {
        for (int m = 0; m < M; m++) {
            float z[PK_MOE_EP_MAX_E], p[PK_MOE_EP_MAX_E];
            logits(R[r], E, m, z);
            pk_moe_ep_softmax(z, E, p);
            topk(p, E, K, hi, &sel[r][m * K], &rw[r][m * K]);
        }
        // expert_mask[e][k][m] = one_hot(selected)[m][k][e]; sums over (k, m) and over k.
        for (int e = 0; e < E; e++)
            for (int k = 0; k < K; k++)
                for (int m = 0; m < M; m++) {
                    const int v = sel[r][m * K + k] == e;
                    cnt[r][e] += v;
                    rmap[r][e * M + m] += v;
                }
        for (int e = 0; e < E; e++) // token_indices.masked_select(routing_map)
            for (int m = 0; m < M; m++)
                if (rmap[r][e * M + m])
                    perm[r].push_back(m);
    }
    // The EP groups (_resolve_ep_group_for_narrow_moe for 51; WORLD otherwise).
    for (int g0 = 0; g0 < W; g0 += std::min(E, W)) {
        const int G = std::min(E, W), El = E / G;
        std::vector<std::vector<long>> in_s(G), out_s(G), ngtle(G); // ngtle: G x El
        for (int me = 0; me < G; me++) {
            const int r = g0 + me;
            for (int p = 0; p < G; p++) { // input_splits
                long s = 0;
                for (int l = 0; l < El; l++)
                    s += cnt[r][p * El + l];
                in_s[me].push_back(s);
            }
            for (int s = 0; s < G; s++) { // all_gather, [:, me*El:(me+1)*El]
                long o = 0;
                for (int l = 0; l < El; l++) {
                    ngtle[me].push_back(cnt[g0 + s][me * El + l]);
                    o += cnt[g0 + s][me * El + l];
                }
                out_s[me].push_back(o);
            }
        }
        // Permuted rows of every rank, then all_to_all_single(output_splits, input_splits).
        std::vector<std::vector<Vec>> send(G), recv(G);
        for (int me = 0; me < G; me++)
            for (int m : perm[g0 + me])
                send[me].push_back(
                    Vec(R[g0 + me].x.begin() + m * N, R[g0 + me].x.begin() + (m + 1) * N));
        for (int me = 0; me < G; me++)
            for (int s = 0; s < G; s++) {
                long off = 0;
                for (int p = 0; p < me; p++)
                    off += in_s[s][p];
                for (long j = 0; j < in_s[s][me]; j++)
                    recv[me].push_back(send[s][off + j]);
            }
        std::vector<std::vector<Vec>> back(G);
        for (int me = 0; me < G; me++) {
            if ((long)recv[me].size() != std::accumulate(out_s[me].begin(), out_s[me].end(), 0L))
                abort();
            // permute_order = arange(E).reshape(-1, El).T.ravel(); split ngtle.ravel()
            std::vector<std::vector<Vec>> chunks;
            size_t at = 0;
            for (long c : ngtle[me]) {
                chunks.push_back(
                    std::vector<Vec>(recv[me].begin() + at, recv[me].begin() + at + c));
                at += c;
            }
            std::vector<Vec> glob;
            for (int l = 0; l < El; l++)
                for (int s = 0; s < G; s++)
                    for (auto &v : chunks[s * El + l])
                        glob.push_back(v);
            // expert_forward: the rank's MLP on every row
            for (auto &v : glob) {
                Vec y(N);
                mlp(R[g0 + me], v.data(), y.data());
                v = y;
            }
            // unpermute_order = arange(E).reshape(El, -1).T.ravel(); split ngtle.T.ravel()
            std::vector<std::vector<Vec>> ch2;
            at = 0;
            for (int l = 0; l < El; l++)
                for (int s = 0; s < G; s++) {
                    const long c = ngtle[me][s * El + l];
                    ch2.push_back(std::vector<Vec>(glob.begin() + at, glob.begin() + at + c));
                    at += c;
                }
            for (int s = 0; s < G; s++)
                for (int l = 0; l < El; l++)
                    for (auto &v : ch2[l * G + s])
                        back[me].push_back(v);
        }
        // all_to_all back: rank me sends out_s[me][p] rows to p, gets in_s[me][p] from p.
        for (int me = 0; me < G; me++) {
            const int r = g0 + me;
            std::vector<Vec> home;
            for (int p = 0; p < G; p++) {
                long off = 0;
                for (int q = 0; q < me; q++)
                    off += out_s[p][q];
                for (long j = 0; j < in_s[me][p]; j++)
                    home.push_back(back[p][off + j]);
            }
            // _generate_weights_idx, _unpermute
            Vec widx(M * E, 0.f);
            for (int m = 0; m < M; m++)
                for (int k = 0; k < K; k++)
                    widx[m * E + sel[r][m * K + k]] += rw[r][m * K + k];
            std::vector<float> tw;
            for (int e = 0; e < E; e++)
                for (int m = 0; m < M; m++)
                    if (rmap[r][e * M + m])
                        tw.push_back(widx[m * E + e]);
            out[r].assign(M * N, 0.f);
            for (size_t i = 0; i < home.size(); i++)
                for (int n = 0; n < N; n++)
                    out[r][perm[r][i] * N + n] += home[i][n] * tw[i];
        }
    }
}

// problem.cu's reference (pk_moe_ep_ref.cuh ep_reference) on rows: the same top-K and
// permutation as PKB, then the exchange plan of pk_moe_ep_plan (the header's own code): send
// A -> B, reorder to_l, the rank's MLP, reorder to_s, send back, weighted un-permutation.
static void reference_solution(std::vector<Rank> &R, int W, int E, int K, std::vector<Vec> &out) {
    std::vector<std::vector<int>> sel(W, std::vector<int>(M * K)), mapping(W);
    std::vector<Vec> rw(W, Vec(M * K));
    std::vector<std::vector<long long>> cnt(W, std::vector<long long>(E, 0));
    for (int r = 0; r < W; r++) {
        for (int m = 0; m < M; m++) {
            float z[PK_MOE_EP_MAX_E], p[PK_MOE_EP_MAX_E];
            logits(R[r], E, m, z);
            pk_moe_ep_softmax(z, E, p);
            topk(p, E, K, 0, &sel[r][m * K], &rw[r][m * K]);
            for (int k = 0; k < K; k++)
                cnt[r][sel[r][m * K + k]]++;
        }
        for (int e = 0; e < E; e++)
            for (int m = 0; m < M; m++)
                for (int k = 0; k < K; k++)
                    if (sel[r][m * K + k] == e)
                        mapping[r].push_back(m);
    }
    std::vector<std::vector<Vec>> A(W), B(W);
    std::vector<PkMoeEpPlan> pl(W);
    for (int r = 0; r < W; r++) {
        const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
        std::vector<long long> gc;
        for (int s = 0; s < g.size; s++)
            for (int e = 0; e < E; e++)
                gc.push_back(cnt[g.first + s][e]);
        if (pk_moe_ep_plan(gc.data(), E, g, &pl[r]) || pl[r].in_off[g.size] != (long long)M * K)
            abort();
        for (int m : mapping[r])
            A[r].push_back(Vec(R[r].x.begin() + m * N, R[r].x.begin() + (m + 1) * N));
    }
    for (int r = 0; r < W; r++) { // dispatch: member p's rows for r land at r's out_off[p]
        const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
        B[r].resize(pl[r].R);
        for (int p = 0; p < g.size; p++) {
            const PkMoeEpPlan &q = pl[g.first + p];
            for (long long j = 0; j < pl[r].out_n[p]; j++)
                B[r][pl[r].out_off[p] + j] = A[g.first + p][q.in_off[g.me] + j];
        }
    }
    std::vector<std::vector<Vec>> Y(W);
    for (int r = 0; r < W; r++) { // to_l, the MLP, to_s
        std::vector<Vec> C(pl[r].R), D(pl[r].R);
        for (long long o = 0; o < pl[r].R; o++)
            C[o] = B[r][pk_moe_ep_chunk_src(pl[r].to_l, o)];
        for (auto &v : C) {
            Vec y(N);
            mlp(R[r], v.data(), y.data());
            v = y;
        }
        for (long long o = 0; o < pl[r].R; o++)
            D[o] = C[pk_moe_ep_chunk_src(pl[r].to_s, o)];
        Y[r] = D;
    }
    for (int r = 0; r < W; r++) { // combine: back from p's out_off[r], into r's in_off[p]
        const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
        std::vector<Vec> home((size_t)M * K);
        for (int p = 0; p < g.size; p++) {
            const PkMoeEpPlan &q = pl[g.first + p];
            for (long long j = 0; j < pl[r].in_n[p]; j++)
                home[pl[r].in_off[p] + j] = Y[g.first + p][q.out_off[g.me] + j];
        }
        out[r].assign(M * N, 0.f);
        long long i = 0;
        for (int e = 0; e < E; e++) // position weights: expert-major, tokens ascending
            for (int m = 0; m < M; m++)
                for (int k = 0; k < K; k++)
                    if (sel[r][m * K + k] == e) {
                        for (int n = 0; n < N; n++)
                            out[r][m * N + n] += rw[r][m * K + k] * home[i][n];
                        i++;
                    }
    }
}

// The correct examples on rows (49's with El = 1; 50's and 51's generic one: destination =
// the owner's member index e / El in the group): slots taken at each destination in an
// arbitrary order (their atomics), rows stored at off[p] = the counts of members < me for p plus
// the slot, the owner's MLP over its R rows, each token's K rows pulled back and weighted.
static void correct_solution(std::vector<Rank> &R, int W, int E, int K, uint64_t seed,
                             std::vector<Vec> &out) {
    std::vector<std::vector<int>> sel(W, std::vector<int>(M * K)), pos(W, std::vector<int>(M * K));
    std::vector<Vec> wts(W, Vec(M * K));
    std::vector<std::vector<int>> cnt(W, std::vector<int>(W, 0)); // [rank][member]
    for (int r = 0; r < W; r++) {
        const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
        std::vector<int> order(M);
        std::iota(order.begin(), order.end(), 0);
        for (int i = M - 1; i > 0; i--) // the atomics' order: any
            std::swap(order[i], order[pk_splitmix64(seed + (uint64_t)(r * M + i)) % (i + 1)]);
        for (int m : order) {
            float z[PK_MOE_EP_MAX_E], p[PK_MOE_EP_MAX_E];
            logits(R[r], E, m, z);
            pk_moe_ep_softmax(z, E, p);
            const uint64_t top = pk_moe_ep_topk(z, E, K);
            int k = 0;
            for (int e = 0; e < E; e++)
                if ((top >> e) & 1) {
                    const int dm = e / g.El;
                    sel[r][m * K + k] = dm;
                    wts[r][m * K + k] = p[e];
                    pos[r][m * K + k] = cnt[r][dm]++;
                    k++;
                }
        }
    }
    std::vector<std::vector<Vec>> recv(W, std::vector<Vec>((size_t)M * W * 2));
    auto offset = [&](int r, int dm) { // rows of members < r's member for destination dm
        const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
        int off = 0;
        for (int s = 0; s < g.me; s++)
            off += cnt[g.first + s][dm];
        return off;
    };
    for (int r = 0; r < W; r++)
        for (int t = 0; t < M * K; t++) {
            const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
            const int dm = sel[r][t];
            recv[g.first + dm][offset(r, dm) + pos[r][t]] =
                Vec(R[r].x.begin() + (t / K) * N, R[r].x.begin() + (t / K + 1) * N);
        }
    for (int p = 0; p < W; p++) {
        const PkMoeEpGroup g = pk_moe_ep_group(W, E, p);
        int Rn = 0;
        for (int s = 0; s < g.size; s++)
            Rn += cnt[g.first + s][g.me];
        for (int i = 0; i < Rn; i++) {
            Vec y(N);
            mlp(R[p], recv[p][i].data(), y.data());
            recv[p][i] = y;
        }
    }
    for (int r = 0; r < W; r++) {
        const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
        out[r].assign(M * N, 0.f);
        for (int t = 0; t < M * K; t++) {
            const int dm = sel[r][t];
            for (int n = 0; n < N; n++)
                out[r][(t / K) * N + n] +=
                    wts[r][t] * recv[g.first + dm][offset(r, dm) + pos[r][t]][n];
        }
    }
}

// What a kernel computes for rank r: variant 0 the header's formulation, 1 the average of the
// admissible rows of tied tokens (hostile), 2 weights 1/K (shortcut_assumed_uniform_weights),
// 3 the rank's own MLP for every expert (shortcut_skip_exchange), 4 the softmax over the first
// half of the experts (shortcut_subsample_normaliser), 5 top-K weights renormalised to sum 1,
// 6 experts sorted by index with weights in probability order (49's wrong.cu), 7 the 2nd slot
// dropped where the 2nd and 3rd logits are within the margin (49's hostile_drop_tied_slot.cu).
static void kernel_out(std::vector<Rank> &R, int W, int E, int K, int r, int variant, Vec &out) {
    const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
    out.assign(M * N, 0.f);
    for (int m = 0; m < M; m++) {
        float z[PK_MOE_EP_MAX_E], p[PK_MOE_EP_MAX_E], y[N];
        logits(R[r], E, m, z);
        pk_moe_ep_softmax(z, E, p);
        if (variant == 4) { // correct.cu's twin: the normaliser of the first half, rescaled
            const int half = E / 2 > 0 ? E / 2 : 1;
            float mx = z[0], s = 0.f;
            for (int e = 1; e < E; e++)
                mx = fmaxf(mx, z[e]);
            for (int e = 0; e < half; e++)
                s += expf(z[e] - mx);
            s *= (float)E / (float)half;
            for (int e = 0; e < E; e++)
                p[e] = expf(z[e] - mx) / s;
        }
        const uint64_t top = pk_moe_ep_topk(z, E, K);
        float tot = 0.f;
        for (int e = 0; e < E; e++)
            tot += (top >> e) & 1 ? p[e] : 0.f;
        const PkMoeEpAdmissible a = pk_moe_ep_admissible(z, E, K, pk_moe_ep_margin(z, E, K));
        int first = -1, second = -1; // the top 2 by probability (ties to the lower index)
        for (int e = 0; e < E; e++)
            if ((top >> e) & 1) {
                if (first < 0 || p[e] > p[first]) {
                    second = first;
                    first = e;
                } else if (second < 0 || p[e] > p[second]) {
                    second = e;
                }
            }
        if (second >= 0 && p[second] > p[first])
            std::swap(first, second);
        for (int e = 0; e < E; e++) {
            float w = p[e];
            const int avg = variant == 1 && a.pick > 0 && ((a.tied >> e) & 1);
            if (!avg && !((top >> e) & 1))
                continue;
            if (avg)
                w = p[e] * (float)a.pick / (float)pk_moe_ep_popcount(a.tied);
            if (variant == 2)
                w = 1.f / (float)K;
            if (variant == 5)
                w = p[e] / tot;
            if (variant == 6 && K == 2 && second >= 0) // the lower index gets the top weight
                w = e == std::min(first, second) ? p[first] : p[second];
            if (variant == 7 && e == second)
                for (int c = 0; c < E; c++)
                    if (c != first && c != second &&
                        fabsf(z[c] - z[second]) <=
                            0.015625f * (1.f + fmaxf(fabsf(z[c]), fabsf(z[second]))))
                        w = 0.f;
            mlp(R[variant == 3 ? r : pk_moe_ep_owner(g, e)], &R[r].x[m * N], y);
            for (int n = 0; n < N; n++)
                out[m * N + n] += w * y[n];
        }
    }
}

// The checker on rank r's output: the number of tokens rejected.
static int check(std::vector<Rank> &R, int W, int E, int K, int r, const Vec &got, int *choices) {
    const PkMoeEpGroup g = pk_moe_ep_group(W, E, r);
    const PkMoeEpTol tol = {1e-4f, 1e-4f, 1e-4f}; // fp32 on both sides here
    int bad = 0;
    for (int m = 0; m < M; m++) {
        float z[PK_MOE_EP_MAX_E], p[PK_MOE_EP_MAX_E];
        logits(R[r], E, m, z);
        pk_moe_ep_softmax(z, E, p);
        const PkMoeEpAdmissible a = pk_moe_ep_admissible(z, E, K, pk_moe_ep_margin(z, E, K));
        *choices += a.pick > 0;
        std::vector<Vec> F(E, Vec(N));
        for (int e = 0; e < E; e++)
            mlp(R[pk_moe_ep_owner(g, e)], &R[r].x[m * N], F[e].data());
        float worst;
        uint64_t matched;
        bad += pk_moe_ep_row_match([&](int n) { return got[m * N + n]; },
                                   [&](int e, int n) { return F[e][n]; }, N, p, a, tol, &worst,
                                   &matched, 4096) < 0;
    }
    return bad;
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 16;
    const char *names[3] = {"49_moe_ep_balanced", "50_moe_ep_wide", "51_moe_ep_narrow"};
    const char *vnames[8] = {"direct",
                             "hostile_average_tied",
                             "shortcut_assumed_uniform_weights",
                             "shortcut_skip_exchange",
                             "shortcut_subsample_normaliser",
                             "wrong_renormalised",
                             "wrong_sorted_experts (49 wrong.cu)",
                             "hostile_drop_tied_slot"};
    int fails = 0;
    for (int prob = 0; prob < 3; prob++)
        for (int W = 2; W <= 8; W *= 2) {
            const int E = prob == 0 ? W : prob == 1 ? 2 * W : pk_moe_ep_narrow_experts(W);
            const int K = std::min(2, E), El = pk_moe_ep_group(W, E, 0).El;
            double maxd = 0;
            int pkb_bad = 0, flip_bad = 0, flips = 0, choices = 0;
            int rejected_calls[8] = {0}, differs_calls[8] = {0};
            double ref_d = 0, cor_d = 0;
            int ref_bad = 0, cor_bad = 0;
            for (int c = 0; c < calls; c++) {
                const uint64_t seed = 1000 + (uint64_t)c;
                const int key = c;
                std::vector<Rank> R(W);
                for (int r = 0; r < W; r++)
                    make_rank(seed, key, r, E, El, R[r]);
                std::vector<Vec> out(W), out_hi(W);
                pkb_solution(R, W, E, K, 0, out);
                pkb_solution(R, W, E, K, 1, out_hi);
                int rej[8] = {0}, dif[8] = {0};
                std::vector<Vec> ref(W), cor(W);
                reference_solution(R, W, E, K, ref);
                correct_solution(R, W, E, K, seed * 31, cor);
                for (int r = 0; r < W; r++) {
                    pkb_bad += check(R, W, E, K, r, out[r], &choices);
                    int dummy = 0;
                    flip_bad += check(R, W, E, K, r, out_hi[r], &dummy);
                    for (int i = 0; i < M * N; i++)
                        if (out[r][i] != out_hi[r][i]) {
                            flips++;
                            break;
                        }
                    int d2 = 0;
                    for (int i = 0; i < M * N; i++)
                        ref_d = std::max(ref_d, (double)fabsf(ref[r][i] - out[r][i]));
                    ref_bad += check(R, W, E, K, r, ref[r], &d2);
                    for (int i = 0; i < M * N; i++)
                        cor_d = std::max(cor_d, (double)fabsf(cor[r][i] - out[r][i]));
                    cor_bad += check(R, W, E, K, r, cor[r], &d2);
                    for (int v = 0; v < 8; v++) {
                        Vec k;
                        kernel_out(R, W, E, K, r, v, k);
                        double d = 0;
                        for (int i = 0; i < M * N; i++)
                            d = std::max(d, (double)fabsf(k[i] - out[r][i]));
                        if (v == 0)
                            maxd = std::max(maxd, d);
                        dif[v] |= d > 1e-6;
                        rej[v] |= check(R, W, E, K, r, k, &dummy) > 0;
                    }
                }
                for (int v = 0; v < 8; v++) {
                    rejected_calls[v] += rej[v];
                    differs_calls[v] += dif[v];
                }
            }
            printf("pkb/%s W=%d E=%d K=%d El=%d: %d calls x %d ranks x %d tokens\n", names[prob], W,
                   E, K, El, calls, W, M);
            printf("  PKB solution() vs direct: max |diff| %.2e; checker rejects PKB's tokens: %d "
                   "(ties to the lower index), %d (to the higher; %d rank-calls differ); tokens "
                   "with a choice: %d\n",
                   maxd, pkb_bad, flip_bad, flips, choices);
            printf("  problem.cu's reference layout (pk_moe_ep_plan) vs PKB: max |diff| %.2e, "
                   "checker rejects %d tokens\n",
                   ref_d, ref_bad);
            printf("  correct.cu's layout (slots in a shuffled order) vs PKB: max |diff| %.2e, "
                   "checker rejects %d tokens\n",
                   cor_d, cor_bad);
            fails += maxd > 1e-4 || pkb_bad || flip_bad || rejected_calls[0] || ref_d > 1e-4 ||
                     ref_bad || cor_d > 1e-4 || cor_bad;
            for (int v = 1; v < 8; v++) {
                printf("  %-34s differs from PKB in %2d/%d calls, rejected in %2d/%d\n", vnames[v],
                       differs_calls[v], calls, rejected_calls[v], calls);
                // The hostile average of two near-tied experts of one owner (50: the same MLP)
                // may stay within the checker's tolerance of an admissible row: it must be
                // caught in some call wherever it differs, never where it does not.
                fails += v == 1 || v == 7 ? rejected_calls[v] > differs_calls[v] ||
                                                (differs_calls[v] > 0 && rejected_calls[v] == 0)
                                          : rejected_calls[v] != differs_calls[v];
            }
        }
    printf(fails ? "FAIL (%d)\n" : "all as expected\n", fails);
    return fails != 0;
}
