/* The attention building blocks of the ring-attention references (problems/include/
 * pk_attention.cuh, issue #29), on the host. The tile itself (pk_attn_fwd_tile) runs under a
 * warp emulation (attention_emul.h, attention_tile_cxx.cpp) in pkb/54's ring, against causal
 * attention in double. The scalar math: the online softmax taken tile by tile gives the
 * softmax of the whole row (lse and output), masked (-inf) tiles and empty rows stay finite,
 * and the logsumexp merge of partial results over disjoint key blocks, in PKB's ring order,
 * gives the result over all the keys, also when scores differ by hundreds and when a block is
 * empty. Compared with a double-precision evaluation of the definition. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pk_splitmix.h"

void pk_test_attn_online(const float *s, const float *v, int n, int tile, float *out,
                         float *lse); /* attention_cxx.cpp */
void pk_test_attn_ring(const float *s, const float *v, const int *bounds, int W, int first,
                       int tile, float *out, float *lse);
void pk_test_attn_merge(float out_a, float lse_a, float out_b, float lse_b, float *out, float *lse);
double pk_test_attn_tile_ring(int W, int rank, int S, int B, int H, int fused, double spread,
                              double rtol, double atol_rms); /* attention_tile_cxx.cpp */
double pk_test_attn_bwd_ring(int W, int rank, int S, int H, int causal, double spread, double rtol,
                             double atol_rms); /* attention_tile_cxx.cpp */
double pk_test_attn_tile_gqa(int D, int H, int Hkv, int Sq, int Sk, int kv_packed, double spread,
                             double rtol, double atol_rms); /* attention_tile_cxx.cpp */
double pk_test_attn_tile_causal(int D, int H, int Hkv, int Sq, int Sk, long long q_pos0,
                                long long k_pos0, double spread, double rtol, double atol_rms);
double pk_test_attn_tile_p(int D, int split, int H, int Hkv, int Sq, int Sk, double spread,
                           double rtol, double atol_rms);

#define NMAX 4096

static float g_s[NMAX], g_v[NMAX];

static double normal(uint64_t key, uint64_t j) {
    double u1 = pk_splitmix_unit(key + 2 * j), u2 = pk_splitmix_unit(key + 2 * j + 1);
    return sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
}

/* Scores of spread `scale` (and `peaks` keys raised by `peak`), values N(0, 1). */
static void fill(uint64_t key, int n, double scale, int peaks, double peak) {
    for (int j = 0; j < n; j++) {
        g_s[j] = (float)(scale * normal(key, (uint64_t)j));
        g_v[j] = (float)normal(key ^ 0x5555, (uint64_t)j);
    }
    for (int p = 0; p < peaks; p++)
        g_s[pk_splitmix64(key + 77 + (uint64_t)p) % (uint64_t)n] += (float)peak;
}

/* The definition in double over keys [0, n) that are not -inf; *mass = sum p |v| (the scale
 * of the output's rounding error). */
static void exact(int n, double *out, double *lse, double *mass) {
    double m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = fmax(m, g_s[j]);
    double l = 0, acc = 0, am = 0;
    for (int j = 0; j < n; j++) {
        if (g_s[j] == -INFINITY)
            continue;
        double p = exp((double)g_s[j] - m);
        l += p;
        acc += p * g_v[j];
        am += p * fabs(g_v[j]);
    }
    *lse = l > 0 ? m + log(l) : -INFINITY;
    *out = l > 0 ? acc / l : 0;
    *mass = l > 0 ? am / l : 0;
}

static void assert_close(float out, float lse, int n) {
    double eo, el, mass;
    exact(n, &eo, &el, &mass);
    assert_false(isnan(out) || isnan(lse));
    assert_true(fabs(out - eo) <= 2e-5 * mass + 1e-30);
    assert_true(fabs(lse - el) <= 2e-6 * fmax(1.0, fabs(el)));
}

static void online_matches_the_definition(void **state) {
    (void)state;
    const int ns[] = {1, 7, 64, 100, 4096}, tiles[] = {1, 16, 64};
    const double scales[] = {1.0, 30.0}; /* scores within +-5, and within +-150 */
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof tiles / sizeof *tiles; b++)
            for (size_t c = 0; c < 2; c++) {
                fill(1000 * a + 10 * b + c, ns[a], scales[c], 2, 50.0);
                float out, lse;
                pk_test_attn_online(g_s, g_v, ns[a], tiles[b], &out, &lse);
                assert_close(out, lse, ns[a]);
            }
}

static void masked_tiles_and_empty_rows(void **state) {
    (void)state;
    fill(5, 200, 1.0, 0, 0);
    for (int j = 0; j < 64; j++) /* a whole first tile masked, then half of the next */
        g_s[j] = -INFINITY;
    for (int j = 64; j < 200; j += 2)
        g_s[j] = -INFINITY;
    float out, lse;
    pk_test_attn_online(g_s, g_v, 200, 64, &out, &lse);
    assert_close(out, lse, 200);
    for (int j = 0; j < 100; j++) /* a row with no key: lse -inf, output 0, no NaN */
        g_s[j] = -INFINITY;
    pk_test_attn_online(g_s, g_v, 100, 64, &out, &lse);
    assert_true(isinf(lse) && lse < 0);
    assert_true(out == 0.f);
}

/* PKB's causal ring on rank `first`: its block first, then the earlier ranks' down to 0. The
 * merged result is the softmax over all keys, for equal, unequal and empty blocks. */
static void ring_merge_matches_the_whole_row(void **state) {
    (void)state;
    const int worlds[] = {2, 4, 8};
    for (size_t w = 0; w < 3; w++)
        for (int shape = 0; shape < 3; shape++)
            for (int big = 0; big < 2; big++) {
                const int W = worlds[w], n = 512 * W;
                int bounds[9];
                for (int i = 0; i <= W; i++)
                    bounds[i] = n * i / W;
                if (shape == 1) /* unequal blocks */
                    for (int i = 1; i < W; i++)
                        bounds[i] = bounds[i] - 200 + 37 * i;
                if (shape == 2) /* an empty block (lse -inf) in the middle of the ring */
                    bounds[1] = bounds[2];
                fill(7000 + 100 * w + 10 * shape + big, n, big ? 40.0 : 1.0, 3, 60.0);
                for (int first = 0; first < W; first++) {
                    float out, lse;
                    pk_test_attn_ring(g_s, g_v, bounds, W, first, 64, &out, &lse);
                    assert_close(out, lse, n);
                }
            }
}

static void merge_edge_cases(void **state) {
    (void)state;
    float out, lse;
    pk_test_attn_merge(0.25f, 3.f, 7.f, -INFINITY, &out, &lse); /* b empty: a unchanged */
    assert_true(out == 0.25f && lse == 3.f);
    pk_test_attn_merge(7.f, -INFINITY, 0.25f, 3.f, &out, &lse); /* a empty: b */
    assert_true(out == 0.25f && lse == 3.f);
    pk_test_attn_merge(1.f, 0.f, 2.f, 0.f, &out, &lse); /* equal mass: the mean, lse + log 2 */
    assert_true(fabs(out - 1.5) < 1e-6 && fabs(lse - log(2.0)) < 1e-6);
    pk_test_attn_merge(1.f, 300.f, 2.f, 0.f, &out, &lse); /* 300 apart: a alone, finite */
    assert_true(out == 1.f && lse == 300.f);
    pk_test_attn_merge(1.f, 0.f, 2.f, 300.f, &out, &lse);
    assert_true(out == 2.f && lse == 300.f);
    float o2, l2; /* symmetric */
    pk_test_attn_merge(0.3f, 1.7f, -0.9f, 2.2f, &out, &lse);
    pk_test_attn_merge(-0.9f, 2.2f, 0.3f, 1.7f, &o2, &l2);
    assert_true(fabs(out - o2) < 1e-6 && fabs(lse - l2) < 1e-6);
}

/* What the checks above would catch: merging two blocks of unequal mass by their mean (or by
 * their maxima alone) is far from the definition, so a cheat of the merge cannot pass them. */
static void a_wrong_merge_is_caught(void **state) {
    (void)state;
    fill(99, 1024, 1.0, 0, 0);
    const int bounds[3] = {0, 256, 1024};
    float oa, la, ob, lb;
    pk_test_attn_online(g_s, g_v, 256, 64, &oa, &la);
    pk_test_attn_online(g_s + 256, g_v + 256, 768, 64, &ob, &lb);
    double eo, el, mass;
    exact(1024, &eo, &el, &mass);
    assert_true(fabs(0.5 * (oa + ob) - eo) > 1e-3 * mass);
    float out, lse;
    pk_test_attn_ring(g_s, g_v, bounds, 2, 1, 64, &out, &lse);
    assert_true(fabs(out - eo) <= 2e-5 * mass);
}

/* The tile in pkb/54's ring (own block causal, earlier blocks merged in the epilogue, in place,
 * the last one writing bf16) on every rank of W = 2..4: within half of pkb/54's tolerance
 * (rtol 0.05, atol_rms 0.05) of the double evaluation. Shards of 64 (whole tiles) and 70 (a
 * partial tile), PKB's tiny shards (8), a fused QKV layout (positions 3 H D apart), and scores
 * of spread 30 (the running max matters). An error of indexing, masking or merging is off by
 * the output's own size (ratios of 40-90 before the merge's lse race was fixed). */
static void tile_in_the_ring(void **state) {
    (void)state;
    for (int W = 2; W <= 4; W++)
        for (int rank = 0; rank < W; rank++) {
            assert_true(pk_test_attn_tile_ring(W, rank, 64, 1, 1, 0, 1.0, 0.05, 0.05) <= 0.5);
            assert_true(pk_test_attn_tile_ring(W, rank, 70, 1, 2, rank & 1, 1.0, 0.05, 0.05) <=
                        0.5);
        }
    assert_true(pk_test_attn_tile_ring(3, 2, 8, 2, 3, 1, 1.0, 0.05, 0.05) <= 0.5);
    assert_true(pk_test_attn_tile_ring(2, 1, 130, 1, 1, 0, 30.0, 0.05, 0.05) <= 0.5);
}

/* The backward tiles (pk_attn_bwd_dq_tile, pk_attn_bwd_dkdv_tile) in PKB's ring backward
 * (pkb/57: dQ accumulated over the blocks, each block's dK, dV through the accumulate path), on
 * every rank of W = 1..3, non-causal and causal (PKB's: blocks s <= rank, the own one masked):
 * dq, dk and dv within half of rtol 0.05, atol_rms 0.05 of the double evaluation of P = exp(scale
 * q k^T - lse), dS = P (dO v^T - D). Shards of 64 and 70 (partial tiles, both in queries and
 * keys), 2 heads, and scores of spread 30. */
static void backward_tiles_in_the_ring(void **state) {
    (void)state;
    for (int W = 1; W <= 3; W++)
        for (int rank = 0; rank < W; rank++)
            for (int causal = 0; causal <= 1; causal++) {
                assert_true(pk_test_attn_bwd_ring(W, rank, 64, 1, causal, 1.0, 0.05, 0.05) <= 0.5);
                assert_true(pk_test_attn_bwd_ring(W, rank, 70, 2, causal, 1.0, 0.05, 0.05) <= 0.5);
            }
    assert_true(pk_test_attn_bwd_ring(2, 1, 70, 1, 0, 30.0, 0.05, 0.05) <= 0.5);
}

/* The forward tile at pkb/77's head dim 128 (and 64), non-causal, grouped-query (query head h
 * reading key/value head h / (H / Hkv): PKB's repeat_interleave), with k, v as PKB's packed
 * key_value (per head D key then D value columns) or separate: within half of rtol 0.05,
 * atol_rms 0.05 of softmax attention in double. Partial query and key tiles (70, 150), and
 * scores of spread 30. A wrong head mapping or column split is off by the output's size. */
static void tile_head_dim_128_grouped_query(void **state) {
    (void)state;
    assert_true(pk_test_attn_tile_gqa(128, 4, 2, 70, 150, 1, 1.0, 0.05, 0.05) <= 0.5);
    assert_true(pk_test_attn_tile_gqa(128, 3, 1, 64, 64, 0, 1.0, 0.05, 0.05) <= 0.5);
    assert_true(pk_test_attn_tile_gqa(128, 2, 2, 20, 130, 1, 30.0, 0.05, 0.05) <= 0.5);
    assert_true(pk_test_attn_tile_gqa(64, 4, 2, 70, 150, 1, 1.0, 0.05, 0.05) <= 0.5);
    /* Hkv == H: plain multi-head attention, packed */
    assert_true(pk_test_attn_tile_gqa(128, 4, 4, 40, 100, 1, 1.0, 0.05, 0.05) <= 0.5);
}

/* The forward tile, causal with positions offset: keys start at position 100 (k_pos0) while the
 * queries start at 0, so the first query tile sees no key at all (no key tile is loaded: its
 * rows must come out 0) and the second sees keys from row 100 on (rows with no key inside a tile
 * that has some); and the end-aligned causal case (queries at the last positions, partial
 * tiles). Grouped-query, packed key_value, D = 64 and 128, against double. */
static void tile_causal_offsets(void **state) {
    (void)state;
    assert_true(pk_test_attn_tile_causal(64, 2, 1, 200, 133, 0, 100, 1.0, 0.05, 0.05) <= 0.5);
    assert_true(pk_test_attn_tile_causal(128, 2, 2, 70, 150, 80, 0, 30.0, 0.05, 0.05) <= 0.5);
    assert_true(pk_test_attn_tile_causal(128, 2, 1, 130, 70, 3, 60, 1.0, 0.05, 0.05) <= 0.5);
}

/* The forward tile's split P (PK_ATTN_P_SPLIT: P = bf16(P) + bf16(P - bf16(P)), ~16 bits) with
 * fp32 outputs: within a hundredth of the bf16 P's error bound (rtol = atol_rms = 1e-4; bf16 P,
 * relative error up to 2^-8, is far outside it, which shows the check can tell them apart). */
static void tile_split_p(void **state) {
    (void)state;
    for (int D = 64; D <= 128; D *= 2) {
        const double split = pk_test_attn_tile_p(D, 1, 2, 1, 70, 150, 1.0, 1e-4, 1e-4);
        const double bf16 = pk_test_attn_tile_p(D, 0, 2, 1, 70, 150, 1.0, 1e-4, 1e-4);
        print_message("D %d: worst error / (1e-4 |want| + 1e-4 rms): split P %.3f, bf16 P %.3f\n",
                      D, split, bf16);
        assert_true(split <= 0.5);
        assert_true(bf16 > 2.0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(online_matches_the_definition),
        cmocka_unit_test(masked_tiles_and_empty_rows),
        cmocka_unit_test(ring_merge_matches_the_whole_row),
        cmocka_unit_test(merge_edge_cases),
        cmocka_unit_test(a_wrong_merge_is_caught),
        cmocka_unit_test(tile_in_the_ring),
        cmocka_unit_test(backward_tiles_in_the_ring),
        cmocka_unit_test(tile_head_dim_128_grouped_query),
        cmocka_unit_test(tile_causal_offsets),
        cmocka_unit_test(tile_split_p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
