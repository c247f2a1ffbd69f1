// Runs attend() of one pkb/54 solution (kern.inc, from extract.py) for every rank of W under the
// warp emulation, with the earlier ranks' k, v already in the copies buffer (what the LSA
// gather leaves there), and compares with causal attention in double. B = 1, H = 2.
#include "kern.inc"
#include "pk_splitmix.h"
thread_local PkEmulIdx threadIdx;
thread_local PkEmulCta *pk_emul_cta;
thread_local PkDim3 blockIdx, gridDim;
thread_local unsigned char *pk_emul_smem;
static float bfv(uint64_t key, uint64_t i, double sc) {
    double u1 = pk_splitmix_unit(key + 2 * i), u2 = pk_splitmix_unit(key + 2 * i + 1);
    return pk_emul_bf16_to_float(__float2bfloat16(
        (float)(sc * sqrt(-2 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2))));
}
int main(int argc, char **argv) {
    int W = atoi(argv[1]), S = atoi(argv[2]), B = 1, H = 2;
    double rtol = 0.05, arms = 0.05;
    size_t n = (size_t)B * S * H * D;
    std::vector<std::vector<bf16>> q(W), k(W), v(W);
    for (int j = 0; j < W; j++) {
        q[j].resize(n);
        k[j].resize(n);
        v[j].resize(n);
        for (size_t i = 0; i < n; i++) {
            q[j][i] = __float2bfloat16(bfv(11 + j, i, 1.68));
            k[j][i] = __float2bfloat16(bfv(1000 + j, i, 1.68));
            v[j][i] = __float2bfloat16(bfv(2000 + j, i, 1));
        }
    }
    double worst_all = 0;
    for (int r = 0; r < W; r++) {
        std::vector<bf16> copies(2 * n * (r > 0 ? r : 1)), out(n);
        for (int j = 0; j < r; j++) {
            std::copy(k[j].begin(), k[j].end(), copies.begin() + 2 * n * j);
            std::copy(v[j].begin(), v[j].end(), copies.begin() + 2 * n * j + n);
        }
        Args a = {q[r].data(), k[r].data(), v[r].data(), copies.data(), out.data(), B,
                  S,           H,           r,           0.125f};
        unsigned gx = (S + BM - 1) / BM, gy = B * H;
        std::vector<unsigned char> smem(sizeof(Smem) + 128);
        for (unsigned by = 0; by < gy; by++)
            for (unsigned bx = 0; bx < gx; bx++) {
                std::barrier<> block(THREADS);
                PkEmulCta cta = {};
                cta.block = &block;
                for (int w = 0; w < WARPS; w++)
                    cta.warp[w] = new std::barrier<>(32);
                std::vector<std::thread> th;
                for (int t = 0; t < THREADS; t++)
                    th.emplace_back([&, t] {
                        threadIdx.x = t;
                        pk_emul_cta = &cta;
                        blockIdx = {bx, by, 0};
                        gridDim = {gx, gy, 1};
                        pk_emul_smem = smem.data();
                        attend(a);
                    });
                for (auto &x : th)
                    x.join();
                for (int w = 0; w < WARPS; w++)
                    delete cta.warp[w];
            }
        // reference
        std::vector<double> want(n);
        double ss = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < S; i++)
                for (int h = 0; h < H; h++) {
                    long long p = (long long)r * S + i;
                    std::vector<double> s(p + 1);
                    double m = -INFINITY;
                    for (long long g = 0; g <= p; g++) {
                        int j = g / S, kk = g % S;
                        double x = 0;
                        for (int d = 0; d < D; d++)
                            x +=
                                (double)pk_emul_bf16_to_float(q[r][((b * S + i) * H + h) * D + d]) *
                                pk_emul_bf16_to_float(k[j][((b * S + kk) * H + h) * D + d]);
                        s[g] = x * 0.125;
                        m = fmax(m, s[g]);
                    }
                    double l = 0, o[D] = {0};
                    for (long long g = 0; g <= p; g++) {
                        int j = g / S, kk = g % S;
                        double e = exp(s[g] - m);
                        l += e;
                        for (int d = 0; d < D; d++)
                            o[d] += e * pk_emul_bf16_to_float(v[j][((b * S + kk) * H + h) * D + d]);
                    }
                    for (int d = 0; d < D; d++) {
                        size_t x = ((b * S + i) * H + h) * D + d;
                        want[x] = o[d] / l;
                        ss += want[x] * want[x];
                    }
                }
        double rms = sqrt(ss / n), worst = 0;
        int nan = 0;
        for (size_t x = 0; x < n; x++) {
            double g = pk_emul_bf16_to_float(out[x]);
            if (isnan(g) || isinf(g)) {
                nan++;
                continue;
            }
            worst = fmax(worst, fabs(g - want[x]) / (rtol * fabs(want[x]) + arms * rms));
        }
        printf("  rank %d: worst ratio %.3g%s\n", r, worst, nan ? " (non-finite)" : "");
    }
}
