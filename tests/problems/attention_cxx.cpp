// The C++ half of test_attention: pk_attention.cuh is C++ (the references' tile and merge,
// shared with the problem modules' kernels); its scalar math is compiled here for the host.
#include "pk_attention.cuh"

// Online softmax of n scores s with one value each (v), taken `tile` at a time as the tile
// kernel does (tile max, rescale, add exp(s - m)); gives the normalised output and the lse.
extern "C" void pk_test_attn_online(const float *s, const float *v, int n, int tile, float *out,
                                    float *lse) {
    PkSoftmaxRow row = pk_softmax_row_init();
    float acc = 0.f;
    for (int t0 = 0; t0 < n; t0 += tile) {
        const int t1 = t0 + tile < n ? t0 + tile : n;
        float tmax = -INFINITY;
        for (int j = t0; j < t1; j++)
            tmax = fmaxf(tmax, s[j]);
        const float alpha = pk_softmax_row_rescale(&row, tmax);
        acc *= alpha;
        for (int j = t0; j < t1; j++) {
            const float p = pk_softmax_row_p(&row, s[j]);
            row.l += p;
            acc += p * v[j];
        }
    }
    *lse = pk_softmax_row_lse(&row);
    *out = row.l > 0.f ? acc / row.l : 0.f;
}

// Ring order: blocks [bounds[i], bounds[i + 1]) of the keys, W of them; the running result
// starts from block `first` and merges the others in the order first - 1, ..., 0 (PKB's causal
// ring on rank `first`: its own block, then the earlier ranks'), then first + 1 .. W - 1.
extern "C" void pk_test_attn_ring(const float *s, const float *v, const int *bounds, int W,
                                  int first, int tile, float *out, float *lse) {
    float o = 0.f, l = -INFINITY;
    for (int step = 0; step < W; step++) {
        const int blk = step <= first ? first - step : step;
        float ob, lb;
        pk_test_attn_online(s + bounds[blk], v + bounds[blk], bounds[blk + 1] - bounds[blk], tile,
                            &ob, &lb);
        if (step == 0) {
            o = ob;
            l = lb;
            continue;
        }
        const float w = pk_lse_merge_weight(l, lb);
        o = pk_lse_merge_out(o, ob, w);
        l = pk_lse_merge(l, lb);
    }
    *out = o;
    *lse = l;
}

extern "C" void pk_test_attn_merge(float out_a, float lse_a, float out_b, float lse_b, float *out,
                                   float *lse) {
    *out = pk_lse_merge_out(out_a, out_b, pk_lse_merge_weight(lse_a, lse_b));
    *lse = pk_lse_merge(lse_a, lse_b);
}
