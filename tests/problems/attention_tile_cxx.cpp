// The tile of pk_attention.cuh (pk_attn_fwd_tile) run on the host under the warp emulation of
// attention_emul.h: 128 threads (fibers) per CTA, CTAs one after another. The ring of pkb/54's
// reference (own block causal, then the earlier ranks' blocks merged in the epilogue, the last
// writing bf16) against causal attention in double over the global keys.
#include <math.h>
#include <stdint.h>

#include <vector>

#include "attention_emul.h"
#include "pk_attention.cuh"
#include "pk_splitmix.h"

PkEmulIdx threadIdx;
PkEmulCta *pk_emul_cta;
unsigned pk_emul_phase;

// One CTA of f's CUDA threads under the emulation (fibers, attention_fiber.h).
template <class F> static void run_cta_fn(F f) {
    PkEmulCta *cta = new PkEmulCta(); // ~70 KiB of exchange slots: kept off the stack
    cta->block = PkEmulBarrier{PK_ATTN_THREADS, 0, 0};
    for (int w = 0; w < PK_ATTN_WARPS; w++)
        cta->warp[w] = PkEmulBarrier{32, 0, 0};
    pk_emul_cta = cta;
    pk_emul_run_cta(
        PK_ATTN_THREADS, [](void *fn) { (*static_cast<F *>(fn))(); }, &f);
    pk_emul_cta = nullptr;
    delete cta;
}

static void run_cta(const PkAttnBlock &a, int b, int h, int qt, PkAttnSmem *sm) {
    run_cta_fn(
        [&] { pk_attn_fwd_tile<PK_ATTN_D, PK_ATTN_P_SPLIT>(a, b, h, qt, *sm); }); // pkb/54-56's
}

static void run_block(const PkAttnBlock &a) {
    PkAttnSmem *sm = new PkAttnSmem;
    for (int b = 0; b < a.B; b++)
        for (int h = 0; h < a.H; h++)
            for (int qt = 0; qt < (a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM; qt++)
                run_cta(a, b, h, qt, sm);
    delete sm;
}

static float bf(uint64_t key, uint64_t i, double scale) { // N(0, scale^2), rounded to bf16
    const double u1 = pk_splitmix_unit(key + 2 * i), u2 = pk_splitmix_unit(key + 2 * i + 1);
    const double x = scale * sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
    return pk_emul_bf16_to_float(__float2bfloat16((float)x));
}

// Rank `rank` of W, shards of S positions, B batches, H heads. fused: q, k, v are views of one
// (B, S, 3, H, D) tensor per rank (ld_q = ld_kv = 3 H D). Scores of spread ~`spread`. Returns
// the largest |got - want| / (rtol |want| + atol_rms rms(want)).
extern "C" double pk_test_attn_tile_ring(int W, int rank, int S, int B, int H, int fused,
                                         double spread, double rtol, double atol_rms) {
    const int D = PK_ATTN_D;
    const long long row = (long long)(fused ? 3 : 1) * H * D; // elements per position
    const size_t per_rank = (size_t)B * S * row;
    // x[j]: rank j's q, k, v; unfused: three tensors, fused: one with q, k, v interleaved.
    std::vector<std::vector<__nv_bfloat16>> q(W), k(W), v(W);
    const double sq = sqrt(spread) / pow(D, 0.25) * 2.8284271247461903; // q.k/8 ~ spread
    for (int j = 0; j < W; j++) {
        const uint64_t key = pk_splitmix64(0x617474ULL + (uint64_t)j);
        if (fused) {
            q[j].resize(per_rank);
            for (size_t i = 0; i < per_rank; i++) {
                const int part = (int)((i / (size_t)(H * D)) % 3); // 0 q, 1 k, 2 v
                q[j][i] = __float2bfloat16(bf(key, i, part == 2 ? 1.0 : sq));
            }
        } else {
            for (auto *t : {&q[j], &k[j], &v[j]})
                t->resize(per_rank);
            for (size_t i = 0; i < per_rank; i++) {
                q[j][i] = __float2bfloat16(bf(key, i, sq));
                k[j][i] = __float2bfloat16(bf(key + 0x1000000, i, sq));
                v[j][i] = __float2bfloat16(bf(key + 0x2000000, i, 1.0));
            }
        }
    }
    auto Q = [&](int j) { return q[j].data(); };
    auto K = [&](int j) { return fused ? q[j].data() + H * D : k[j].data(); };
    auto V = [&](int j) { return fused ? q[j].data() + 2 * H * D : v[j].data(); };
    const size_t n_out = (size_t)B * S * H * D;
    std::vector<float> acc(n_out), lse((size_t)B * S * H);
    std::vector<__nv_bfloat16> out(n_out);
    for (int step = 0; step <= rank; step++) { // problem.cu's ring on this rank
        PkAttnBlock a = {};
        a.q = Q(rank);
        a.k = K(rank - step);
        a.v = V(rank - step);
        a.B = B;
        a.Sq = a.Sk = S;
        a.H = H;
        a.ld_q = a.ld_kv = fused ? row : 0;
        a.q_pos0 = (long long)rank * S;
        a.k_pos0 = (long long)(rank - step) * S;
        a.causal = step == 0;
        a.scale = 0.125f;
        a.acc_in = step == 0 ? nullptr : acc.data();
        a.lse_in = step == 0 ? nullptr : lse.data();
        a.acc_out = acc.data();
        a.lse_out = lse.data();
        a.out_bf16 = step == rank ? out.data() : nullptr;
        run_block(a);
    }
    std::vector<double> want(n_out);
    double ss = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < S; i++)
            for (int h = 0; h < H; h++) {
                const long long p = (long long)rank * S + i;
                const __nv_bfloat16 *qr = Q(rank) + ((size_t)b * S + i) * row + (size_t)h * D;
                std::vector<double> s((size_t)p + 1);
                double m = -INFINITY;
                for (long long g = 0; g <= p; g++) {
                    const int j = (int)(g / S), kk = (int)(g % S);
                    const __nv_bfloat16 *kr = K(j) + ((size_t)b * S + kk) * row + (size_t)h * D;
                    double x = 0;
                    for (int d = 0; d < D; d++)
                        x += (double)pk_emul_bf16_to_float(qr[d]) * pk_emul_bf16_to_float(kr[d]);
                    s[(size_t)g] = 0.125 * x;
                    m = fmax(m, s[(size_t)g]);
                }
                double l = 0, o[PK_ATTN_D] = {0};
                for (long long g = 0; g <= p; g++) {
                    const int j = (int)(g / S), kk = (int)(g % S);
                    const __nv_bfloat16 *vr = V(j) + ((size_t)b * S + kk) * row + (size_t)h * D;
                    const double e = exp(s[(size_t)g] - m);
                    l += e;
                    for (int d = 0; d < D; d++)
                        o[d] += e * pk_emul_bf16_to_float(vr[d]);
                }
                for (int d = 0; d < D; d++) {
                    const size_t x = (((size_t)b * S + i) * H + h) * D + d;
                    want[x] = o[d] / l;
                    ss += want[x] * want[x];
                }
            }
    const double rms = sqrt(ss / (double)n_out);
    double worst = 0;
    for (size_t x = 0; x < n_out; x++) {
        const double got = pk_emul_bf16_to_float(out[x]);
        if (isnan(got))
            return INFINITY;
        worst = fmax(worst, fabs(got - want[x]) / (rtol * fabs(want[x]) + atol_rms * rms));
    }
    return worst;
}

// ---- The backward tiles (pk_attn_bwd_dq_tile, pk_attn_bwd_dkdv_tile) ----

static void run_bwd(const PkAttnBwdBlock &a) {
    PkAttnBwdSmem *sm = new PkAttnBwdSmem;
    for (int b = 0; b < a.B; b++)
        for (int h = 0; h < a.H; h++) {
            if (a.dq_out || a.dq_bf16)
                for (int qt = 0; qt < (a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM; qt++)
                    run_cta_fn([&] { pk_attn_bwd_dq_tile(a, b, h, qt, *sm); });
            if (a.dk_out || a.dk_bf16)
                for (int kt = 0; kt < (a.Sk + PK_ATTN_BN - 1) / PK_ATTN_BN; kt++)
                    run_cta_fn([&] { pk_attn_bwd_dkdv_tile(a, b, h, kt, *sm); });
        }
    delete sm;
}

// PKB's ring backward (_ring_attn_backward, non-causal, or causal as PKB: block s <= rank, the
// own block masked) for rank `rank` of W shards of S positions (B 1, H heads), run with the
// tiles as pk_attn_ring_backward does it (dQ accumulated through dq_in, each block's dK, dV
// accumulated through dk_in / dv_in in PKB's order), against the double evaluation of the same
// formulas: P = exp(scale q k^T - lse), dS = P (dO v^T - D), with lse and D (rowsum(dO * O))
// the forward's over the rank's own keys (PKB's generator) or over all earlier ones. Returns
// the largest |got - want| / (rtol |want| + atol_rms rms(want)) over dq, dk, dv (dk, dv: the
// gradients of every rank's keys from this rank's queries, fp32).
extern "C" double pk_test_attn_bwd_ring(int W, int rank, int S, int H, int causal, double spread,
                                        double rtol, double atol_rms) {
    const int D = PK_ATTN_D;
    const size_t per = (size_t)S * H * D;
    const double sq = sqrt(spread) / pow(D, 0.25) * 2.8284271247461903;
    std::vector<std::vector<__nv_bfloat16>> q(W), k(W), v(W);
    std::vector<__nv_bfloat16> dout(per);
    for (int j = 0; j < W; j++) {
        const uint64_t key = pk_splitmix64(0x62776400ULL + (uint64_t)j);
        for (auto *t : {&q[j], &k[j], &v[j]})
            t->resize(per);
        for (size_t i = 0; i < per; i++) {
            q[j][i] = __float2bfloat16(bf(key, i, sq));
            k[j][i] = __float2bfloat16(bf(key + 0x1000000, i, sq));
            v[j][i] = __float2bfloat16(bf(key + 0x2000000, i, 1.0));
        }
    }
    for (size_t i = 0; i < per; i++)
        dout[i] = __float2bfloat16(bf(0x646f7574ULL, i, 1.0));
    auto f = [](const __nv_bfloat16 &x) { return (double)pk_emul_bf16_to_float(x); };
    // lse and O over the keys this rank's queries see (causal: up to its own position).
    std::vector<float> lse((size_t)H * S), dd((size_t)H * S);
    const long long n_keys = (long long)W * S;
    auto qk = [&](int h, int i, long long g) {
        double x = 0;
        for (int d = 0; d < D; d++)
            x += f(q[rank][((size_t)i * H + h) * D + d]) *
                 f(k[g / S][((size_t)(g % S) * H + h) * D + d]);
        return 0.125 * x;
    };
    auto sees = [&](int i, long long g) { return !causal || g <= (long long)rank * S + i; };
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++) {
            double m = -INFINITY, l = 0, o[PK_ATTN_D] = {0};
            for (long long g = 0; g < n_keys; g++)
                if (sees(i, g))
                    m = fmax(m, qk(h, i, g));
            for (long long g = 0; g < n_keys; g++)
                if (sees(i, g)) {
                    const double e = exp(qk(h, i, g) - m);
                    l += e;
                    for (int d = 0; d < D; d++)
                        o[d] += e * f(v[g / S][((size_t)(g % S) * H + h) * D + d]);
                }
            lse[(size_t)h * S + i] = (float)(m + log(l));
            double x = 0;
            for (int d = 0; d < D; d++) // D from the bf16-rounded output, as the rowdot kernel
                x += f(dout[((size_t)i * H + h) * D + d]) * f(__float2bfloat16((float)(o[d] / l)));
            dd[(size_t)h * S + i] = (float)x;
        }
    // The tiles in PKB's ring order: step s attends to rank (rank - s)'s block.
    std::vector<float> dq(per), dk((size_t)W * per), dv((size_t)W * per);
    for (int step = 0; step < W; step++) {
        const int j = (rank - step + W) % W;
        if (causal && step > rank)
            continue;
        PkAttnBwdBlock a = {};
        a.q = q[rank].data();
        a.dout = dout.data();
        a.k = k[j].data();
        a.v = v[j].data();
        a.lse = lse.data();
        a.dd = dd.data();
        a.B = 1;
        a.Sq = a.Sk = S;
        a.H = H;
        a.q_pos0 = (long long)rank * S;
        a.k_pos0 = (long long)j * S;
        a.causal = causal && step == 0;
        a.scale = 0.125f;
        a.dq_in = step == 0 ? nullptr : dq.data();
        a.dq_out = dq.data();
        a.dk_in = dk.data() + (size_t)j * per; // zeros: exercises the accumulate path
        a.dv_in = dv.data() + (size_t)j * per;
        a.dk_out = dk.data() + (size_t)j * per;
        a.dv_out = dv.data() + (size_t)j * per;
        run_bwd(a);
    }
    // The double evaluation.
    std::vector<double> wq(per, 0.0), wk((size_t)W * per, 0.0), wv((size_t)W * per, 0.0);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++)
            for (long long g = 0; g < n_keys; g++) {
                if (!sees(i, g))
                    continue;
                const double p = exp(qk(h, i, g) - lse[(size_t)h * S + i]);
                double dp = 0;
                for (int d = 0; d < D; d++)
                    dp += f(dout[((size_t)i * H + h) * D + d]) *
                          f(v[g / S][((size_t)(g % S) * H + h) * D + d]);
                const double ds = p * (dp - dd[(size_t)h * S + i]);
                for (int d = 0; d < D; d++) {
                    const size_t qi = ((size_t)i * H + h) * D + d;
                    const size_t ki = (size_t)(g / S) * per + ((size_t)(g % S) * H + h) * D + d;
                    wq[qi] += 0.125 * ds * f(k[g / S][((size_t)(g % S) * H + h) * D + d]);
                    wk[ki] += 0.125 * ds * f(q[rank][qi]);
                    wv[ki] += p * f(dout[qi]);
                }
            }
    double worst = 0;
    auto cmp = [&](const std::vector<float> &got, const std::vector<double> &want) {
        double ss = 0;
        for (double x : want)
            ss += x * x;
        const double rms = sqrt(ss / (double)want.size());
        for (size_t x = 0; x < want.size(); x++) {
            if (!std::isfinite(got[x]))
                worst = INFINITY;
            else
                worst =
                    fmax(worst, fabs(got[x] - want[x]) / (rtol * fabs(want[x]) + atol_rms * rms));
        }
    };
    cmp(dq, wq);
    cmp(dk, wk);
    cmp(dv, wv);
    return worst;
}

// ---- The forward tile at head dim 128, grouped-query, non-causal (pkb/77) ----

template <int D, int PM> static void run_block_d(const PkAttnBlock &a) {
    PkAttnSmemD<D> *sm = new PkAttnSmemD<D>;
    for (int b = 0; b < a.B; b++)
        for (int h = 0; h < a.H; h++)
            for (int qt = 0; qt < (a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM; qt++)
                run_cta_fn([&] { pk_attn_fwd_tile<D, PM>(a, b, h, qt, *sm); });
    delete sm;
}

// One block, H query heads over Hkv key/value heads (query head h reads h / (H / Hkv)), Sq
// queries against Sk keys, non-causal, scale 1 / sqrt(D), k and v packed as PKB's key_value
// (positions 2 Hkv D apart: k's D columns, then v's, per head, as pkb/77's kv after its
// redistribution) when kv_packed. causal: key positions k_pos0 + j above the query's q_pos0 + i
// masked (a row with none left must come out 0). Against softmax attention in double over the
// bf16 inputs. Returns the largest |got - want| / (rtol |want| + atol_rms rms(want)). PM: the
// tile's P precision; fp32_out: the output stored fp32 (acc_out), not rounded to bf16.
template <int D, int PM = PK_ATTN_P_BF16>
static double attn_tile_gqa(int H, int Hkv, int Sq, int Sk, int kv_packed, double spread,
                            double rtol, double atol_rms, int causal = 0, long long q_pos0 = 0,
                            long long k_pos0 = 0, int fp32_out = 0) {
    const double scale = 1.0 / sqrt((double)D);
    const double sq = sqrt(spread / (scale * sqrt((double)D))); // q.k scale ~ spread
    const long long ldkv = (long long)(kv_packed ? 2 : 1) * Hkv * D;
    std::vector<__nv_bfloat16> q((size_t)Sq * H * D), kv((size_t)Sk * ldkv), vs;
    const uint64_t key = pk_splitmix64(0x677161ULL + (uint64_t)D);
    for (size_t i = 0; i < q.size(); i++)
        q[i] = __float2bfloat16(bf(key, i, sq));
    for (size_t i = 0; i < kv.size(); i++) // packed: per head D k columns then D v columns
        kv[i] = __float2bfloat16(bf(key + 0x1000000, i, (i / D) % 2 && kv_packed ? 1.0 : sq));
    if (!kv_packed) {
        vs.resize(kv.size());
        for (size_t i = 0; i < vs.size(); i++)
            vs[i] = __float2bfloat16(bf(key + 0x2000000, i, 1.0));
    }
    PkAttnBlock a = {};
    a.q = q.data();
    a.k = kv.data();
    a.v = kv_packed ? kv.data() + D : vs.data();
    a.B = 1;
    a.Sq = Sq;
    a.Sk = Sk;
    a.H = H;
    a.Hkv = Hkv;
    a.ld_kv = kv_packed ? ldkv : 0;
    a.hs_kv = kv_packed ? 2 * D : 0;
    a.scale = (float)scale;
    a.causal = causal;
    a.q_pos0 = q_pos0;
    a.k_pos0 = k_pos0;
    std::vector<__nv_bfloat16> out((size_t)Sq * H * D);
    std::vector<float> out32(out.size()), lse32((size_t)Sq * H);
    if (fp32_out) {
        a.acc_out = out32.data();
        a.lse_out = lse32.data();
    } else {
        a.out_bf16 = out.data();
    }
    run_block_d<D, PM>(a);
    auto f = [](const __nv_bfloat16 &x) { return (double)pk_emul_bf16_to_float(x); };
    std::vector<double> want(out.size());
    double ss = 0;
    for (int i = 0; i < Sq; i++)
        for (int h = 0; h < H; h++) {
            const int g = h / (H / Hkv);
            const __nv_bfloat16 *kb = kv.data() + (size_t)g * (kv_packed ? 2 * D : D);
            const __nv_bfloat16 *vb = kv_packed ? kb + D : vs.data() + (size_t)g * D;
            const size_t ld = (size_t)(kv_packed ? ldkv : (long long)Hkv * D);
            // causal: keys [0, n_see) are the row's
            const int n_see =
                causal ? (int)std::max(0LL, std::min((long long)Sk, q_pos0 + i - k_pos0 + 1)) : Sk;
            std::vector<double> s((size_t)Sk);
            double m = -INFINITY, l = 0, o[128] = {0};
            for (int j = 0; j < n_see; j++) {
                double x = 0;
                for (int d = 0; d < D; d++)
                    x += f(q[((size_t)i * H + h) * D + d]) * f(kb[(size_t)j * ld + d]);
                s[(size_t)j] = scale * x;
                m = fmax(m, s[(size_t)j]);
            }
            for (int j = 0; j < n_see; j++) {
                const double e = exp(s[(size_t)j] - m);
                l += e;
                for (int d = 0; d < D; d++)
                    o[d] += e * f(vb[(size_t)j * ld + d]);
            }
            for (int d = 0; d < D; d++) {
                const size_t x = ((size_t)i * H + h) * D + d;
                want[x] = l > 0 ? o[d] / l : 0.0;
                ss += want[x] * want[x];
            }
        }
    const double rms = sqrt(ss / (double)want.size());
    double worst = 0;
    for (size_t x = 0; x < out.size(); x++) {
        const double got = fp32_out ? (double)out32[x] : f(out[x]);
        if (!std::isfinite(got))
            return INFINITY;
        worst = fmax(worst, fabs(got - want[x]) / (rtol * fabs(want[x]) + atol_rms * rms));
    }
    return worst;
}

extern "C" double pk_test_attn_tile_gqa(int D, int H, int Hkv, int Sq, int Sk, int kv_packed,
                                        double spread, double rtol, double atol_rms) {
    if (D == 128)
        return attn_tile_gqa<128>(H, Hkv, Sq, Sk, kv_packed, spread, rtol, atol_rms);
    if (D == 64)
        return attn_tile_gqa<64>(H, Hkv, Sq, Sk, kv_packed, spread, rtol, atol_rms);
    return INFINITY;
}

// The forward tile, causal, with query and key positions offset (k_pos0 > q_pos0: query tiles
// that see no key at all, rows with none inside a tile that has keys), grouped-query, packed.
extern "C" double pk_test_attn_tile_causal(int D, int H, int Hkv, int Sq, int Sk, long long q_pos0,
                                           long long k_pos0, double spread, double rtol,
                                           double atol_rms) {
    if (D == 128)
        return attn_tile_gqa<128>(H, Hkv, Sq, Sk, 1, spread, rtol, atol_rms, 1, q_pos0, k_pos0);
    if (D == 64)
        return attn_tile_gqa<64>(H, Hkv, Sq, Sk, 1, spread, rtol, atol_rms, 1, q_pos0, k_pos0);
    return INFINITY;
}

// The forward tile's P precision, fp32 outputs, against double: PK_ATTN_P_BF16 (P rounded to bf16)
// or PK_ATTN_P_SPLIT (P = P_hi + P_lo).
extern "C" double pk_test_attn_tile_p(int D, int split, int H, int Hkv, int Sq, int Sk,
                                      double spread, double rtol, double atol_rms) {
    if (D == 128)
        return split ? attn_tile_gqa<128, PK_ATTN_P_SPLIT>(H, Hkv, Sq, Sk, 1, spread, rtol,
                                                           atol_rms, 0, 0, 0, 1)
                     : attn_tile_gqa<128>(H, Hkv, Sq, Sk, 1, spread, rtol, atol_rms, 0, 0, 0, 1);
    if (D == 64)
        return split ? attn_tile_gqa<64, PK_ATTN_P_SPLIT>(H, Hkv, Sq, Sk, 1, spread, rtol, atol_rms,
                                                          0, 0, 0, 1)
                     : attn_tile_gqa<64>(H, Hkv, Sq, Sk, 1, spread, rtol, atol_rms, 0, 0, 0, 1);
    return INFINITY;
}
