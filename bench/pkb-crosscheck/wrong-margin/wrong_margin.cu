// The margin of pkb/43, 44, 46 and 52's wrong solutions against their tolerances, before and
// after the widening to the 4x rule (docs/problems.md, "Tolerances"): a host simulation at W = 2
// and the problems' default dims, inputs N(0,1) rounded to bf16, the reference's rounding points
// (problem.cu) against the wrong solution's. Prints the failing elements per trial. See README.md.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static uint64_t sm64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
static double unit(uint64_t x) {
    return (double)((sm64(x) >> 11) + 1) * (1.0 / 9007199254740992.0);
}
static double normal(uint64_t key, uint64_t i) {
    double u1 = unit(key + 2 * i), u2 = unit(key + 2 * i + 1);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}
static float r16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}
static float bfn(uint64_t key, uint64_t i) {
    return r16((float)normal(key, i));
}
struct tol {
    double atol, rtol;
};
static int fails(double got, double want, tol t, double rms_term) {
    return !(fabs(got - want) <= t.atol + rms_term + t.rtol * fabs(want));
}

// ---- 43: peers' blocks hold the old weights ----
struct adam_consts {
    float beta1, omb1, beta2, omb2, inv_bc1, inv_bc2, eps, neg_lr;
};
static float adam_w(float w, float m0, float v0, float g, adam_consts c) {
    const float m = r16(fmaf(c.omb1, g, r16(m0 * c.beta1)));
    const float v = r16(fmaf(c.omb2, g * g, r16(v0 * c.beta2)));
    const float m_hat = r16(m * c.inv_bc1), v_hat = r16(v * c.inv_bc2);
    const float denom = r16(r16(sqrtf(v_hat)) + c.eps);
    const float step = r16(r16(m_hat / denom) * c.neg_lr);
    return r16(w + step);
}
static void sim43(void) {
    const size_t P = 16777216;
    const tol old_t = {2e-4, 5e-2}, new_t = {3.2e-4, 8e-2};
    for (int step = 1; step <= 7; step++) {
        const double bc1 = 1.0 - pow(0.9, step), bc2 = 1.0 - pow(0.999, step);
        adam_consts c = {0.9f,
                         (float)(1.0 - 0.9),
                         0.999f,
                         (float)(1.0 - 0.999),
                         (float)(1.0 / bc1),
                         (float)(1.0 / bc2),
                         1e-8f,
                         -1e-3f};
        long nold = 0, nnew = 0;
        const uint64_t k = sm64(1000 + step);
        for (size_t i = 0; i < P; i++) {
            float g = bfn(k, i), w = bfn(k + 0x10000000, i), m = bfn(k + 0x20000000, i);
            float v = r16((float)(0.01 + 0.99 * unit(k + 0x30000000 + i)));
            float want = adam_w(w, m, v, g, c);
            nold += fails(w, want, old_t, 0);
            nnew += fails(w, want, new_t, 0);
        }
        printf("43 step %d: peer block of %zu elements, failing old %ld, new %ld\n", step, P, nold,
               nnew);
    }
}

// ---- 44: IEEE amax / 127 instead of amax * (1/127) ----
static void quant(const float *x, float *deq, size_t n, int ieee) {
    for (size_t b = 0; b < n / 128; b++) {
        float amax = 0;
        for (int k = 0; k < 128; k++)
            amax = fmaxf(amax, fabsf(x[b * 128 + k]));
        const float scale =
            ieee ? fmaxf(amax, 1e-8f) / 127.0f : fmaxf(amax, 1e-8f) * (1.0f / 127.0f);
        for (int k = 0; k < 128; k++) {
            const float q = fminf(fmaxf(rintf(x[b * 128 + k] / scale), -127.0f), 127.0f);
            deq[b * 128 + k] = q * scale;
        }
    }
}
static void sim44(void) {
    const size_t n = 8388608;
    const tol old_t = {5e-5, 1e-2}, new_t = {1e-4, 2e-2};
    std::vector<float> x(n), dr0(n), dr1(n), dw0(n), dw1(n);
    for (int trial = 0; trial < 3; trial++) {
        for (int r = 0; r < 2; r++) {
            const uint64_t k = sm64(4400 + trial * 16 + r);
            for (size_t i = 0; i < n; i++)
                x[i] = bfn(k, i);
            quant(x.data(), r ? dr1.data() : dr0.data(), n, 0);
            quant(x.data(), r ? dw1.data() : dw0.data(), n, 1);
        }
        long nold = 0, nnew = 0, flips = 0;
        double worst_new = 0;
        for (size_t i = 0; i < n; i++) {
            const float want = r16((dr0[i] + dr1[i]) * 0.5f), got = r16((dw0[i] + dw1[i]) * 0.5f);
            nold += fails(got, want, old_t, 0);
            nnew += fails(got, want, new_t, 0);
            flips += fabsf(dw0[i] - dr0[i]) > 1e-3f * fabsf(dr0[i]) + 1e-6f;
            flips += fabsf(dw1[i] - dr1[i]) > 1e-3f * fabsf(dr1[i]) + 1e-6f;
            double e = fabs(got - want) / (new_t.atol + new_t.rtol * fabs(want));
            if (e > worst_new)
                worst_new = e;
        }
        printf("44 trial %d: n = %zu, codes flipped %ld, failing old %ld, new %ld (worst "
               "error/new allowance %.2f)\n",
               trial, n, flips, nold, nnew, worst_new);
    }
}

// ---- 46: every rank adds its own bias to all W blocks ----
static void sim46(void) {
    const size_t T = 8, V = 131072, Vl = V / 2, H = 4096;
    const double old_rms = 0.015625, new_rms = 0.046875;
    const tol old_t = {0, 0.01}, new_t = {0, 0.03};
    for (int trial = 0; trial < 1; trial++) {
        const uint64_t k = sm64(4600 + trial);
        std::vector<float> h(T * H), b(V);
        for (size_t i = 0; i < T * H; i++)
            h[i] = bfn(k, i);
        for (size_t i = 0; i < V; i++)
            b[i] = bfn(k + 0x40000000, i);
        // Rank 0's logits: dots of h with bf16 N(0,1) weight rows (exact sums, one rounding).
        std::vector<float> want(T * V), got(T * V);
        double ss = 0;
        std::vector<float> w(H);
        for (size_t v = 0; v < V; v++) {
            for (size_t j = 0; j < H; j++)
                w[j] = bfn(k + 0x50000000 + v * H, j);
            for (size_t t = 0; t < T; t++) {
                double d = 0;
                for (size_t j = 0; j < H; j++)
                    d += (double)h[t * H + j] * w[j];
                const float dot = r16((float)d);
                want[t * V + v] = r16(dot + b[v]);
                got[t * V + v] = r16(dot + b[v % Vl]); // rank 0 adds its own shard everywhere
                ss += (double)want[t * V + v] * want[t * V + v];
            }
        }
        const double rms = sqrt(ss / (T * V));
        long nold = 0, nnew = 0;
        for (size_t i = 0; i < T * V; i++) {
            nold += fails(got[i], want[i], old_t, old_rms * rms);
            nnew += fails(got[i], want[i], new_t, new_rms * rms);
        }
        printf("46 trial %d: rms %.1f, rank 0 logits %zu, failing old %ld, new %ld\n", trial, rms,
               T * V, nold, nnew);
    }
}

// ---- 52: the scale ignores the amax history ----
static float recon(float x, float scale) {
    __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E4M3);
    __half_raw hr = __nv_cvt_fp8_to_halfraw(q, __NV_E4M3);
    __half hh;
    memcpy(&hh, &hr, sizeof hh);
    return r16(__half2float(hh) * scale);
}
static void sim52(void) {
    const size_t P = 16777216, n = 2 * P;
    const tol old_t = {1e-2, 1e-2}, new_t = {1.5e-2, 1.5e-2};
    std::vector<float> x0(n), x1(n);
    const float ratios[3] = {1.25f, 1.375f, 1.5f}; // history max / amax in regime 1
    for (int trial = 0; trial < 3; trial++) {
        float amax[2] = {0, 0};
        for (int r = 0; r < 2; r++) {
            std::vector<float> &x = r ? x1 : x0;
            const uint64_t k = sm64(5200 + trial * 16 + r);
            for (size_t i = 0; i < n; i++) {
                x[i] = bfn(k, i);
                amax[r] = fmaxf(amax[r], fabsf(x[i]));
            }
        }
        float sr[2], sw[2];
        for (int r = 0; r < 2; r++) {
            const float hmax = r16(amax[r] * ratios[trial]);
            sr[r] = fmaxf(hmax, 1e-12f) * (1.0f / 448.0f);
            sw[r] = fmaxf(amax[r], 1e-12f) * (1.0f / 448.0f);
        }
        long nold = 0, nnew = 0;
        double worst_new = 0;
        for (size_t i = 0; i < P; i++) { // shard 0, rank 0's output
            const float want = r16(r16(recon(x0[i], sr[0]) + recon(x1[i], sr[1])) * 0.5f);
            const float got = r16(r16(recon(x0[i], sw[0]) + recon(x1[i], sw[1])) * 0.5f);
            nold += fails(got, want, old_t, 0);
            nnew += fails(got, want, new_t, 0);
            double e = fabs(got - want) / (new_t.atol + new_t.rtol * fabs(want));
            if (e > worst_new)
                worst_new = e;
        }
        printf("52 regime 1, history/amax %.3f: amax %.3f %.3f, shard of %zu, failing old %ld, "
               "new %ld (worst error/new allowance %.2f)\n",
               ratios[trial], amax[0], amax[1], P, nold, nnew, worst_new);
    }
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "all";
    if (!strcmp(which, "43") || !strcmp(which, "all"))
        sim43();
    if (!strcmp(which, "44") || !strcmp(which, "all"))
        sim44();
    if (!strcmp(which, "52") || !strcmp(which, "all"))
        sim52();
    if (!strcmp(which, "46") || !strcmp(which, "all"))
        sim46();
    return 0;
}
