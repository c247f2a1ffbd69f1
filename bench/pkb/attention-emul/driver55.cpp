// Runs attend() of one pkb/55 solution (kern.inc, from extract.py) for every CP rank under the
// warp emulation: qkv per CP rank in PKB's (B, S, 3, HL, HD) view, k and v packed and
// all-gathered as the solution's pack_kv and ncclAllGather leave them, compared with causal
// attention in double (the attention output ctx; the projections and the TP sum are cuBLAS and
// NCCL, not emulated). B = 2, HL = 2.
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
    int CP = atoi(argv[1]), S = atoi(argv[2]), B = 2, H = 2;
    double rtol = 0.05, arms = 0.05;
    size_t rows = (size_t)B * S, n = rows * H * D, W3 = 3 * H * D;
    std::vector<std::vector<bf16>> qkv(CP);
    std::vector<bf16> gathered((size_t)CP * 2 * n);
    for (int j = 0; j < CP; j++) {
        qkv[j].resize(rows * W3);
        for (size_t i = 0; i < rows * W3; i++)
            qkv[j][i] = __float2bfloat16(bfv(77 + j, i, (i % W3) < 2 * (size_t)H * D ? 1.68 : 1.0));
        // PKB's view (3, H, D): k at H*D + h*D, v at 2*H*D + h*D
        for (size_t r = 0; r < rows; r++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++) {
                    gathered[(size_t)j * 2 * n + (r * H + h) * D + d] =
                        qkv[j][r * W3 + (H + h) * D + d];
                    gathered[(size_t)j * 2 * n + n + (r * H + h) * D + d] =
                        qkv[j][r * W3 + (2 * H + h) * D + d];
                }
    }
    for (int r = 0; r < CP; r++) {
        std::vector<bf16> out(n);
        Args a = {qkv[r].data(), gathered.data(), out.data(), B, S, H, r, (long long)W3, 0.125f};
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
        std::vector<double> want(n);
        double ss = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < S; i++)
                for (int h = 0; h < H; h++) {
                    long long p = (long long)r * S + i;
                    std::vector<double> s(p + 1);
                    double m = -INFINITY;
                    const bf16 *qr = &qkv[r][((size_t)b * S + i) * W3 + h * D];
                    for (long long g = 0; g <= p; g++) {
                        int j = g / S, kk = g % S;
                        const bf16 *kr = &qkv[j][((size_t)b * S + kk) * W3 + (H + h) * D];
                        double x = 0;
                        for (int d = 0; d < D; d++)
                            x +=
                                (double)pk_emul_bf16_to_float(qr[d]) * pk_emul_bf16_to_float(kr[d]);
                        s[g] = x * 0.125;
                        m = fmax(m, s[g]);
                    }
                    double l = 0, o[D] = {0};
                    for (long long g = 0; g <= p; g++) {
                        int j = g / S, kk = g % S;
                        const bf16 *vr = &qkv[j][((size_t)b * S + kk) * W3 + (2 * H + h) * D];
                        double e = exp(s[g] - m);
                        l += e;
                        for (int d = 0; d < D; d++)
                            o[d] += e * pk_emul_bf16_to_float(vr[d]);
                    }
                    for (int d = 0; d < D; d++) {
                        size_t x = (((size_t)b * S + i) * H + h) * D + d;
                        want[x] = o[d] / l;
                        ss += want[x] * want[x];
                    }
                }
        double rms = sqrt(ss / n), worst = 0;
        for (size_t x = 0; x < n; x++) {
            double gg = pk_emul_bf16_to_float(out[x]);
            worst = fmax(worst, fabs(gg - want[x]) / (rtol * fabs(want[x]) + arms * rms));
        }
        printf("  cp rank %d: worst ratio %.3g\n", r, worst);
    }
}
