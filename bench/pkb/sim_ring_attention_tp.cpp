// Host simulation of pkb/55_ring_attention_tp's numerics (no GPU): inputs as its generate()
// draws them (hidden ~ N(0, 1) per CP rank times a scale, weights ~ N(0, 0.02^2) per TP rank),
// out = sum over the TP pair of bf16(bf16(attention(bf16(hidden w_qkv^T))) w_o^T) evaluated in
// double and emulated as the reference does it (fp32 dot products rounded to bf16 after every
// op, P rounded to bf16 in the PV product; "fp32p": P in fp32), and checked against the
// problem's tolerance. Prints per CP rank and call the worst ratio error / tolerance and the
// norm-wise error.
// Build: g++ -O2 -std=c++17 -Icommon/include bench/pkb/sim_ring_attention_tp.cpp -o /tmp/sim55
// Run: /tmp/sim55 [W [T [calls]]]
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "pk_splitmix.h"

enum { NH = 4, HL = 2, HD = 64, HID = NH * HD };
static double RTOL = 0.05, ATOL_RMS = 0.1, NORM_RTOL = 0.02; // meta.json's; SIM_TOL=rtol,atol_rms

static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static float normal(uint64_t key, uint64_t i, double scale) {
    const double u1 = pk_splitmix_unit(key + 2 * i), u2 = pk_splitmix_unit(key + 2 * i + 1);
    return bf16(
        (float)(scale * sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2)));
}

// One TP rank's partial output for the queries of CP rank c: mode 0 double, 1 reference (bf16
// P), 2 fp32 P. hid[j]: CP rank j's hidden (S x HID); wq (3 HL HD x HID), wo (HID x HL HD).
static void partial(int mode, const std::vector<std::vector<float>> &hid, const float *wq,
                    const float *wo, int S, int c, std::vector<double> &out) {
    const int cp = (int)hid.size(), Q = 3 * HL * HD;
    std::vector<std::vector<double>> qkv(cp, std::vector<double>((size_t)S * Q));
    for (int j = 0; j < cp; j++)
        for (int s = 0; s < S; s++)
            for (int o = 0; o < Q; o++) {
                double d = 0;
                float f = 0;
                for (int i = 0; i < HID; i++) {
                    d += (double)hid[j][(size_t)s * HID + i] * wq[(size_t)o * HID + i];
                    f += hid[j][(size_t)s * HID + i] * wq[(size_t)o * HID + i];
                }
                qkv[j][(size_t)s * Q + o] = mode ? bf16(f) : d;
            }
    std::vector<double> ctx((size_t)S * HL * HD);
    for (int i = 0; i < S; i++)
        for (int h = 0; h < HL; h++) {
            const long long p = (long long)c * S + i;
            std::vector<double> sc((size_t)p + 1);
            double m = -INFINITY;
            for (long long g = 0; g <= p; g++) {
                const int j = (int)(g / S), kk = (int)(g % S);
                double x = 0;
                for (int d = 0; d < HD; d++)
                    x += qkv[c][(size_t)i * Q + h * HD + d] *
                         qkv[j][(size_t)kk * Q + (HL + h) * HD + d];
                sc[(size_t)g] = mode ? (double)((float)x * 0.125f) : 0.125 * x;
                m = fmax(m, sc[(size_t)g]);
            }
            double l = 0, o[HD] = {0};
            for (long long g = 0; g <= p; g++) {
                const int j = (int)(g / S), kk = (int)(g % S);
                const double e =
                    mode ? (double)expf((float)(sc[(size_t)g] - m)) : exp(sc[(size_t)g] - m);
                l += e;
                const double pe = mode == 1 ? (double)bf16((float)e) : e;
                for (int d = 0; d < HD; d++)
                    o[d] += pe * qkv[j][(size_t)kk * Q + (2 * HL + h) * HD + d];
            }
            for (int d = 0; d < HD; d++) {
                const double v = o[d] / l;
                ctx[((size_t)i * HL + h) * HD + d] = mode ? bf16((float)v) : v;
            }
        }
    out.assign((size_t)S * HID, 0);
    for (int s = 0; s < S; s++)
        for (int o = 0; o < HID; o++) {
            double d = 0;
            float f = 0;
            for (int i = 0; i < HL * HD; i++) {
                d += ctx[(size_t)s * HL * HD + i] * wo[(size_t)o * HL * HD + i];
                f += (float)ctx[(size_t)s * HL * HD + i] * wo[(size_t)o * HL * HD + i];
            }
            out[(size_t)s * HID + o] = mode ? bf16(f) : d;
        }
}

int main(int argc, char **argv) {
    const int W = argc > 1 ? atoi(argv[1]) : 2, T = argc > 2 ? atoi(argv[2]) : 128;
    const int calls = argc > 3 ? atoi(argv[3]) : 2, cp = W / 2, S = T / cp;
    if (getenv("SIM_TOL"))
        sscanf(getenv("SIM_TOL"), "%lf,%lf", &RTOL, &ATOL_RMS);
    printf("W %d (CP %d), T %d, S %d, NH %d, HD %d; tolerance rtol %g atol_rms %g norm %g\n", W, cp,
           T, S, NH, HD, RTOL, ATOL_RMS, NORM_RTOL);
    for (int call = 0; call < calls; call++) {
        const uint64_t base = pk_splitmix64(0x3535ULL + (uint64_t)call);
        std::vector<std::vector<float>> hid(cp, std::vector<float>((size_t)S * HID));
        for (int j = 0; j < cp; j++) {
            const double sc =
                call & 1 ? exp2(2.0 * pk_splitmix_unit(base + 7 + (uint64_t)j) - 1.0) : 1.0;
            for (size_t i = 0; i < hid[j].size(); i++)
                hid[j][i] = normal(pk_splitmix64(base + 100 + (uint64_t)j), i, sc);
        }
        std::vector<float> wq[2], wo[2];
        for (int t = 0; t < 2; t++) {
            wq[t].resize((size_t)3 * HL * HD * HID);
            wo[t].resize((size_t)HID * HL * HD);
            for (size_t i = 0; i < wq[t].size(); i++)
                wq[t][i] = normal(pk_splitmix64(base + 200 + (uint64_t)t), i, 0.02);
            for (size_t i = 0; i < wo[t].size(); i++)
                wo[t][i] = normal(pk_splitmix64(base + 300 + (uint64_t)t), i, 0.02);
        }
        for (int c = 0; c < cp; c++) {
            std::vector<double> want, emu[3], p0, p1;
            for (int mode = 0; mode < 3; mode++) {
                partial(mode, hid, wq[0].data(), wo[0].data(), S, c, p0);
                partial(mode, hid, wq[1].data(), wo[1].data(), S, c, p1);
                emu[mode].resize(p0.size());
                for (size_t x = 0; x < p0.size(); x++)
                    emu[mode][x] = mode ? bf16((float)p0[x] + (float)p1[x]) : p0[x] + p1[x];
            }
            want = emu[0];
            double ss = 0;
            for (double w : want)
                ss += w * w;
            const double rms = sqrt(ss / want.size());
            printf("call %d cp rank %d (rms %.3g):", call, c, rms);
            for (int mode = 1; mode < 3; mode++) {
                double worst = 0, ne = 0;
                for (size_t x = 0; x < want.size(); x++) {
                    const double e = fabs(emu[mode][x] - want[x]);
                    worst = fmax(worst, e / (RTOL * fabs(want[x]) + ATOL_RMS * rms));
                    ne += e * e;
                }
                printf("  %s ratio %.3g norm %.2g", mode == 1 ? "ref" : "fp32p", worst,
                       sqrt(ne / ss));
            }
            printf("\n");
        }
    }
    return 0;
}
