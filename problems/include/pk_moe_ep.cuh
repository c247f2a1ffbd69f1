// pk_moe_ep.cuh: the expert-parallel MoE forward of PKB 49-51 (moe_ep_balanced, moe_ep_wide,
// moe_ep_narrow; issue #29), the pieces their references, generators and checkers share.
//
// Prompt: the router softmax, top-K (ties to the lower index) and expert-major permutation shared
// by the expert-parallel MoE reference and its checker.
//
// The three are one workload with three expert counts: every rank routes its own M tokens with
// its own router (softmax of x gate_weight^T + gate_bias, top-K), sends each (token, expert) row
// to the expert's owner, runs its experts (one SiLU-gated MLP per rank: PKB applies the rank's
// gate_proj/up_proj/down_proj to every row it received, whatever its local expert) and sends
// the rows back, where out[m] = sum over the token's K experts e of p_e(m) f_owner(e)(x_m).
//   49 balanced  E = W: one expert per rank;
//   50 wide      E = 2 W: two per rank (PKB's _sort_chunks_by_idxs reorders them);
//   51 narrow    E < W, W % E == 0 (the largest such E, 1 at W = 2): groups of E consecutive
//                ranks, each an EP group of its own (PKB's _resolve_ep_group_for_narrow_moe).
//
// Routing is a selection, and its ties are real: two experts whose probabilities are equal (or
// equal after an honest rounding of the logits: bf16 logits, another summation order) may be
// chosen either way, and the output row differs by a whole expert's output. So the checker does
// not compare with the reference's choice: it accepts a row when it is the output of some
// admissible set of experts (pk_moe_ep_admissible: the experts surely in the top K, plus any
// choice among those within `margin` of the K-th) weighted by their probabilities, and rejects
// everything else, including the average of two admissible rows or a row that drops the tied
// slot (what a checker that exempts tied tokens would accept).
//
// Every function is host and device code (the problems' check() runs it on the GPU; the host
// tests and bench/pkb/sim_49_51_moe_ep.cpp on the CPU).
#ifndef PK_MOE_EP_CUH
#define PK_MOE_EP_CUH

#include "pk_splitmix.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define PK_MOE_EP_MAX_E 64

// The EP group of `rank` (PKB's group argument): W ranks when E >= W, else the E consecutive
// ranks [first, first + E) (W % E == 0). El experts per rank; expert e (0..E-1) lives on rank
// first + e / El; a rank's local experts are [(rank - first) El, (rank - first + 1) El).
struct PkMoeEpGroup {
    int size, first, El, me; // me: rank's index in its group
};

static inline PK_HD PkMoeEpGroup pk_moe_ep_group(int world, int E, int rank) {
    PkMoeEpGroup g;
    g.size = E >= world ? world : E;
    g.first = E >= world ? 0 : rank / E * E;
    g.El = E / g.size;
    g.me = rank - g.first;
    return g;
}

static inline PK_HD int pk_moe_ep_owner(const PkMoeEpGroup &g, int e) {
    return g.first + e / g.El;
}

// PKB's expert counts per world size: 49 E = W, 50 E = 2 W, 51 the largest E < W with W % E
// == 0 (1 when there is none: W = 2), K = min(2, E).
static inline PK_HD int pk_moe_ep_narrow_experts(int world) {
    for (int E = world / 2; E > 1; E--)
        if (world % E == 0)
            return E;
    return 1;
}

// The rounding margin of the router at the K-th place, in logits: two honest implementations
// differ by a bf16 rounding of each logit (2^-9 relative, 2^-8 between two) plus the order of an
// fp32 sum over N products, and PKB rounds the probabilities to bf16 before its top-k (a ratio
// of 2^-8, a logit difference of 2^-8). 2^-6 (1 + |z|) of the K-th and (K+1)-th largest logits
// covers both with a factor of 2 (not of the largest |z|: an expert pushed to -60 so that it
// gets no token would widen every token's margin to a logit).
static inline PK_HD float pk_moe_ep_margin(const float *z, int E, int K) {
    float mx = 0.f;
    for (int e = 0; e < E; e++) {
        int above = 0; // experts ranked before e (ties to the lower index)
        for (int j = 0; j < E; j++)
            above += j != e && (z[j] > z[e] || (z[j] == z[e] && j < e));
        if (above == K - 1 || above == K)
            mx = fmaxf(mx, fabsf(z[e]));
    }
    return 0.015625f * (1.f + mx);
}

// The softmax of E logits (fp32, max-subtracted): PKB's torch.softmax(router_logits), whose
// top-K values are the routing weights (not renormalised).
static inline PK_HD void pk_moe_ep_softmax(const float *z, int E, float *p) {
    float mx = z[0], s = 0.f;
    for (int e = 1; e < E; e++)
        mx = fmaxf(mx, z[e]);
    for (int e = 0; e < E; e++) {
        p[e] = expf(z[e] - mx);
        s += p[e];
    }
    for (int e = 0; e < E; e++)
        p[e] /= s;
}

// The top K of z, ties to the lower index (what the reference picks): a bit mask.
static inline PK_HD uint64_t pk_moe_ep_topk(const float *z, int E, int K) {
    uint64_t set = 0;
    for (int e = 0; e < E; e++) {
        int above = 0; // experts ranked before e
        for (int j = 0; j < E; j++)
            above += j != e && (z[j] > z[e] || (z[j] == z[e] && j < e));
        if (above < K)
            set |= 1ULL << e;
    }
    return set;
}

// Which top-K sets are admissible when every logit may be off by up to margin / 2: `must`, the
// experts that stay in the top K however the others move (fewer than K others can reach them);
// `tied`, the other experts that can enter it (fewer than K others are surely above them);
// every admissible set is `must` plus `pick` = K - |must| experts of `tied`.
struct PkMoeEpAdmissible {
    uint64_t must, tied;
    int pick;
};

static inline PK_HD PkMoeEpAdmissible pk_moe_ep_admissible(const float *z, int E, int K,
                                                           float margin) {
    PkMoeEpAdmissible a;
    a.must = a.tied = 0;
    int n_must = 0;
    for (int e = 0; e < E; e++) {
        int reach = 0, above = 0;
        for (int j = 0; j < E; j++) {
            if (j == e)
                continue;
            reach += z[j] + margin >= z[e];
            above += z[j] - margin > z[e];
        }
        if (reach < K) {
            a.must |= 1ULL << e;
            n_must++;
        } else if (above < K) {
            a.tied |= 1ULL << e;
        }
    }
    a.pick = K - n_must;
    return a;
}

static inline PK_HD int pk_moe_ep_popcount(uint64_t x) {
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

// The next subset of `of` with the same number of members as s, in increasing order of their
// ranks in `of` (Gosper's hack on the compressed bits); 0 after the last one.
static inline PK_HD uint64_t pk_moe_ep_next_subset(uint64_t s, uint64_t of) {
    // Compress s to the positions of `of`, step, expand.
    uint64_t c = 0, bit = 1;
    int n = 0;
    for (uint64_t o = of; o; o &= o - 1, bit <<= 1, n++)
        if (s & (o & ~(o - 1)))
            c |= bit;
    if (!c)
        return 0;
    const uint64_t low = c & (~c + 1), ripple = c + low;
    if (ripple == 0)
        return 0;
    c = ripple | (((c ^ ripple) >> 2) / low);
    if (n < 64 && (c >> n) != 0)
        return 0;
    uint64_t out = 0;
    bit = 1;
    for (uint64_t o = of; o; o &= o - 1, bit <<= 1)
        if (c & bit)
            out |= o & ~(o - 1);
    return out;
}

// The first subset of `of` with k members (its k lowest), 0 when `of` has fewer.
static inline PK_HD uint64_t pk_moe_ep_first_subset(uint64_t of, int k) {
    uint64_t s = 0;
    for (uint64_t o = of; o && k > 0; o &= o - 1, k--)
        s |= o & ~(o - 1);
    return k > 0 ? 0 : s;
}

// A row's tolerance against one admissible set A with weights p: element n passes when
//   |got_n - want_n| <= atol + rtol |want_n| + wtol sum_{e in A} p_e |F_en|,
// want_n = sum_{e in A} p_e F_en: rtol for the rounding of the expert outputs and of the sum,
// wtol for the routing weights (a probability moves by about twice its logits' error).
struct PkMoeEpTol {
    float atol, rtol, wtol;
};

// F(e, n): expert e's output for this token (the output of the MLP of e's owner), element n.
// Tries every admissible set (at most max_sets) and keeps the best: *worst gets the smallest
// over the sets of each set's largest |got - want| / allowed (<= 1 passes), *matched that set
// (0 if none passes). Returns the best set's index in enumeration order if it passes, else -1.
// (The best, not the first that passes: the norm-wise check and the report use the row's
// closest admissible output.)
template <typename Got, typename Fn>
static inline PK_HD int pk_moe_ep_row_match(const Got &got, const Fn &F, int N, const float *p,
                                            PkMoeEpAdmissible a, PkMoeEpTol tol, float *worst,
                                            uint64_t *matched, int max_sets) {
    float best = INFINITY;
    int best_idx = -1;
    uint64_t best_set = 0, sub = a.pick > 0 ? pk_moe_ep_first_subset(a.tied, a.pick) : 0;
    *matched = 0;
    if (a.pick > 0 && !sub)
        return *worst = INFINITY, -1;
    for (int idx = 0; idx < max_sets; idx++) {
        const uint64_t set = a.must | sub;
        float ratio = 0.f;
        for (int n = 0; n < N && ratio < best; n++) { // stop once no better than the best
            float want = 0.f, mag = 0.f;
            for (uint64_t s = set; s; s &= s - 1) {
                const int e = pk_moe_ep_popcount((s & ~(s - 1)) - 1);
                const float f = F(e, n);
                want += p[e] * f;
                mag += p[e] * fabsf(f);
            }
            const float allowed = tol.atol + tol.rtol * fabsf(want) + tol.wtol * mag;
            const float g = got(n), d = fabsf(g - want);
            const float r = d != d || g != g ? INFINITY : d / allowed;
            ratio = fmaxf(ratio, r);
        }
        if (ratio < best) {
            best = ratio;
            best_idx = idx;
            best_set = set;
        }
        if (a.pick <= 0)
            break;
        sub = pk_moe_ep_next_subset(sub, a.tied);
        if (!sub)
            break;
    }
    *worst = best;
    if (!(best <= 1.f))
        return -1;
    *matched = best_set;
    return best_idx;
}

// The exchange plan of one rank (PKB's _preprocess and the chunk orders of
// _sort_chunks_by_idxs), from the group's gathered counts gc[s * E + e] (member s's tokens for
// expert e): in_n[p] rows this rank sends member p (input_splits), out_n[p] rows it receives
// from p (output_splits), their offsets; to_l the reorder of the received rows from (source,
// local expert) to (local expert, source) order, to_s the way back. Output chunk c of a reorder
// is rows [out[c], out[c + 1]) copied from row src[c] on.
struct PkMoeEpChunks {
    long long out[PK_MOE_EP_MAX_E + 1], src[PK_MOE_EP_MAX_E];
    int n;
};

struct PkMoeEpPlan {
    long long in_n[PK_MOE_EP_MAX_E], out_n[PK_MOE_EP_MAX_E];
    long long in_off[PK_MOE_EP_MAX_E + 1], out_off[PK_MOE_EP_MAX_E + 1];
    PkMoeEpChunks to_l, to_s;
    long long R; // rows received
};

// Returns 0, or 1 when a count is negative.
static inline int pk_moe_ep_plan(const long long *gc, int E, PkMoeEpGroup g, PkMoeEpPlan *pl) {
    const int G = g.size, El = g.El, me = g.me;
    pl->in_off[0] = pl->out_off[0] = 0;
    for (int p = 0; p < G; p++) {
        pl->in_n[p] = pl->out_n[p] = 0;
        for (int l = 0; l < El; l++) {
            if (gc[me * E + p * El + l] < 0 || gc[p * E + me * El + l] < 0)
                return 1;
            pl->in_n[p] += gc[me * E + p * El + l];  // we send p (input_splits)
            pl->out_n[p] += gc[p * E + me * El + l]; // p sends us (output_splits)
        }
        pl->in_off[p + 1] = pl->in_off[p] + pl->in_n[p];
        pl->out_off[p + 1] = pl->out_off[p] + pl->out_n[p];
    }
    pl->R = pl->out_off[G];
    pl->to_l.n = pl->to_s.n = G * El;
    long long o = 0;
    for (int l = 0; l < El; l++) // permute_order: chunk (l, p) from p's block, after p's l' < l
        for (int p = 0; p < G; p++) {
            long long src = pl->out_off[p];
            for (int j = 0; j < l; j++)
                src += gc[p * E + me * El + j];
            pl->to_l.out[l * G + p] = o;
            pl->to_l.src[l * G + p] = src;
            o += gc[p * E + me * El + l];
        }
    pl->to_l.out[G * El] = o;
    o = 0;
    for (int p = 0; p < G; p++) // unpermute_order: back to (source, local expert)
        for (int l = 0; l < El; l++) {
            pl->to_s.out[p * El + l] = o;
            pl->to_s.src[p * El + l] = pl->to_l.out[l * G + p];
            o += gc[p * E + me * El + l];
        }
    pl->to_s.out[G * El] = o;
    return 0;
}

// The source row of output row o of a reorder.
static inline PK_HD long long pk_moe_ep_chunk_src(const PkMoeEpChunks &ch, long long o) {
    int c = 0;
    while (c + 1 < ch.n && o >= ch.out[c + 1])
        c++;
    return ch.src[c] + o - ch.out[c];
}

// Inputs the checker must be able to recompute on any rank: every rank's expert weights (the
// check of rank r's tokens needs the MLPs of every expert they could have gone to). Drawn from
// (seed, key, rank, tensor, index) like the harness's own generators, PyTorch's nn.Linear
// initialisation U(-1/sqrt(in), 1/sqrt(in)) for weights and biases; `which` names the tensor.
enum {
    PK_MOE_EP_GATE_W = 0, // I x N
    PK_MOE_EP_GATE_B,     // I
    PK_MOE_EP_UP_W,       // I x N
    PK_MOE_EP_UP_B,       // I
    PK_MOE_EP_DOWN_W,     // N x I
    PK_MOE_EP_DOWN_B,     // N
    PK_MOE_EP_TENSORS
};

static inline PK_HD uint64_t pk_moe_ep_key(uint64_t seed, int key, int rank, int which) {
    return pk_splitmix64(seed ^ pk_splitmix64(0x6d6f65657000ULL + (uint64_t)(unsigned)key)) +
           ((uint64_t)(unsigned)rank << 56) + ((uint64_t)(unsigned)which << 48);
}

static inline PK_HD float pk_moe_ep_param(uint64_t seed, int key, int rank, int which, size_t i,
                                          int fan_in) {
    const double u = pk_splitmix_unit(pk_moe_ep_key(seed, key, rank, which) + (uint64_t)i);
    return (float)((2.0 * u - 1.0) / sqrt((double)fan_in));
}

// The router of a call (rank's own gate_weight E x N and gate_bias E), shaped by the routing
// mode of the call (pk_moe_routing.cuh's key % 4) so that the hard cases occur:
//   0 balanced   gate_weight ~ N(0, 1/N) (logits ~ N(0, 1) on PKB's inputs), bias ~ N(0, 1/16);
//   1 skewed     biases spread over [0, 3), different on every rank;
//   2 hot_empty  one expert (the same on every rank) +6, another -60: the hot one is in almost
//                every token's top K, the empty one in none (E > K; at E = K, every token has
//                every expert);
//   3 tied       two experts of neighbouring ranks (t and t + El) share their gate_weight row
//                and bias: where exactly K - 1 others are above them (E > K), they tie for
//                the K-th place, an exact tie between two different MLPs the checker must
//                allow (one pair only: pairs everywhere would never straddle the K-th place);
// gate_weight's N(0, 1/N) is not PKB's N(0, 1): PKB's logits have a std of sqrt(N) (64 at
// N = 4096), where one bf16 ulp of a logit (0.25-0.5) moves a probability by e^0.25-e^0.5, so
// no two honest implementations agree on the weights.
static inline PK_HD float pk_moe_ep_router(uint64_t seed, int key, int rank, int E, int El, int N,
                                           int e, int n /* -1: the bias */) {
    const int mode = ((key % 4) + 4) % 4;
    const int hot =
        (int)(pk_splitmix64(seed ^ (0x686f7400ULL + (uint64_t)(unsigned)key)) % (uint64_t)E);
    const int empty = (hot + 1) % E;
    const int row = mode == 3 && E > 2 && e == (hot + El) % E ? hot : e;
    const uint64_t k = pk_moe_ep_key(seed, key, rank, 8) + (uint64_t)row * ((uint64_t)N + 1) +
                       (uint64_t)(n < 0 ? N : n);
    const double u1 = pk_splitmix_unit(k), u2 = pk_splitmix_unit(k ^ 0x5bd1e995ULL);
    const double g = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    if (n >= 0)
        return (float)(g / sqrt((double)N));
    if (mode == 1)
        return (float)(3.0 * u1);
    if (mode == 2 && E > 2)
        return e == hot ? 6.f : e == empty ? -60.f : (float)(0.25 * g);
    return (float)(0.25 * g);
}

// f(x) = down(silu(gate(x)) * up(x)) for one row, fp32 (biases included): the expert MLP as the
// checker and the host simulation evaluate it. W(which, i) gives the owner's parameters.
template <typename X, typename Wt>
static inline PK_HD void pk_moe_ep_mlp_row(const X &x, const Wt &W, int N, int I, float *h,
                                           float *y) {
    for (int i = 0; i < I; i++) {
        float g = W(PK_MOE_EP_GATE_B, (size_t)i), u = W(PK_MOE_EP_UP_B, (size_t)i);
        for (int n = 0; n < N; n++) {
            g += x(n) * W(PK_MOE_EP_GATE_W, (size_t)i * N + n);
            u += x(n) * W(PK_MOE_EP_UP_W, (size_t)i * N + n);
        }
        h[i] = g / (1.f + expf(-g)) * u;
    }
    for (int n = 0; n < N; n++) {
        float s = W(PK_MOE_EP_DOWN_B, (size_t)n);
        for (int i = 0; i < I; i++)
            s += h[i] * W(PK_MOE_EP_DOWN_W, (size_t)n * I + i);
        y[n] = s;
    }
}

#endif
