// Runs pkb/77's correct.cu (or wrong.cu, a twin) on the host under the warp emulation of
// tests/problems/attention_emul.h: its pull kernel (the LSA loads through ncclGetLsaPointer into
// per-rank arenas; barriers are no-ops: the driver runs every rank's pull before any attention)
// and its attend kernel, launched per source segment as its solution() does (the loop is copied
// here: src order from the own rank, seg_keys from the solution, first / last; OWN_ONLY=1 for
// shortcut_skip_exchange.cu, whose loop keeps only the own rank), storing into the query's
// rank's out. Compares every rank's out with the closed form in double (pkb/77's tolerance:
// rtol 0.05, atol_rms 0.15, norm_rtol 0.02).
// Usage (run77.sh): emul W R SPB CLIP HQ HKV SCALE
#include "kern77.inc"
#include "pk_splitmix.h"
#include <cstdio>
#include <cstdlib>
thread_local PkEmulIdx threadIdx;
thread_local PkEmulCta *pk_emul_cta;
thread_local PkDim3 blockIdx, gridDim;
thread_local unsigned char *pk_emul_smem;

static float bfv(uint64_t key, uint64_t i, double sc, double off) {
    double u1 = pk_splitmix_unit(key + 2 * i), u2 = pk_splitmix_unit(key + 2 * i + 1);
    return pk_emul_bf16_to_float(__float2bfloat16(
        (float)(sc * sqrt(-2 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2) + off)));
}

// Runs fn on every CTA of a (gx, gy) grid of nthreads threads, one CTA at a time.
template <class F> static void grid(unsigned gx, unsigned gy, int nthreads, size_t smem, F fn) {
    std::vector<unsigned char> sm(smem + 128);
    for (unsigned by = 0; by < gy; by++)
        for (unsigned bx = 0; bx < gx; bx++) {
            std::barrier<> block(nthreads);
            PkEmulCta cta = {};
            cta.block = &block;
            for (int w = 0; w < nthreads / 32; w++)
                cta.warp[w] = new std::barrier<>(32);
            std::vector<std::thread> th;
            for (int t = 0; t < nthreads; t++)
                th.emplace_back([&, t] {
                    threadIdx.x = t;
                    pk_emul_cta = &cta;
                    blockIdx = {bx, by, 0};
                    gridDim = {gx, gy, 1};
                    pk_emul_smem = sm.data();
                    fn();
                });
            for (auto &x : th)
                x.join();
            for (int w = 0; w < nthreads / 32; w++)
                delete cta.warp[w];
        }
}

int main(int argc, char **argv) {
    if (argc < 8)
        return 2;
    Geo g;
    g.W = atoi(argv[1]);
    g.R = atoi(argv[2]);
    g.SPB = atoll(argv[3]);
    g.CLIP = atoll(argv[4]);
    g.HQ = atoi(argv[5]);
    g.HKV = atoi(argv[6]);
    const double scale_in = atof(argv[7]);
    const int own_only = getenv("OWN_ONLY") && atoi(getenv("OWN_ONLY"));
    g.HL = g.HQ / g.W;
    g.KL = g.HKV / g.W;
    g.T = (long long)g.R * g.SPB;
    const size_t nq = (size_t)g.T * g.HQ * D, nkv = (size_t)g.T * g.HKV * 2 * D;
    // arena per rank: query, key_value, out (bf16); scratch apart
    const size_t q_off = 0, kv_off = nq * 2, out_off = kv_off + nkv * 2, arena = out_off + nq * 2;
    std::vector<std::vector<unsigned char>> mem(g.W, std::vector<unsigned char>(arena));
    std::vector<unsigned char *> win(g.W);
    for (int r = 0; r < g.W; r++) {
        win[r] = mem[r].data();
        bf16 *q = reinterpret_cast<bf16 *>(win[r] + q_off);
        bf16 *kv = reinterpret_cast<bf16 *>(win[r] + kv_off);
        bf16 *out = reinterpret_cast<bf16 *>(win[r] + out_off);
        for (size_t i = 0; i < nq; i++) {
            q[i] = __float2bfloat16(bfv(11 + r, i, scale_in, 0));
            out[i] = __float2bfloat16(NAN); // poison
        }
        // keys offset per rank (segment maxima differ), values N(0, 1) plus a rank offset
        for (size_t i = 0; i < nkv; i++) {
            const bool is_v = i % (2 * D) >= D;
            kv[i] = __float2bfloat16(
                bfv(1000 + r, i, is_v ? 1.0 : scale_in, is_v ? 0.25 * r : 0.1 * r * scale_in));
        }
    }
    const size_t rows = (size_t)g.R * g.W * g.SPB * g.HL;
    std::vector<std::vector<unsigned char>> scratch(
        g.W, std::vector<unsigned char>((nq + nkv) * 2 + rows * (D + 1) * 4));
    // 1. every rank's pull (two CTAs: the grid-stride loops)
    for (int r = 0; r < g.W; r++) {
        Geo gr = g;
        gr.rank = r;
        bf16 *qloc = reinterpret_cast<bf16 *>(scratch[r].data()), *kvloc = qloc + nq;
        ncclDevComm comm = {0};
        grid(2, 1, COPY_THREADS, 0, [&] {
            pull(comm, win.data(), q_off, kv_off, reinterpret_cast<uint4 *>(qloc),
                 reinterpret_cast<uint4 *>(kvloc), gr);
        });
    }
    // 2. every rank's attention launches, as solution() makes them
    for (int r = 0; r < g.W; r++) {
        Geo gr = g;
        gr.rank = r;
        bf16 *qloc = reinterpret_cast<bf16 *>(scratch[r].data()), *kvloc = qloc + nq;
        float *acc = reinterpret_cast<float *>(kvloc + nkv), *lse = acc + rows * D;
        int src[PK_MAX_RANKS], n_src = 0;
        for (int k = 0; k < g.W; k++) {
            const int s = (r + k) % g.W;
            if (seg_keys(gr, s) > 0 && (!own_only || s == r))
                src[n_src++] = s;
        }
        for (int k = 0; k < n_src; k++) {
            Blk a;
            a.q = qloc;
            a.kv = kvloc + (size_t)src[k] * g.R * g.SPB * g.KL * 2 * D;
            a.nk = (int)seg_keys(gr, src[k]);
            a.first = k == 0;
            a.last = k == n_src - 1;
            a.acc = acc;
            a.lse = lse;
            a.win = win.data();
            a.out_off = out_off;
            a.g = gr;
            a.scale = (float)(1.0 / sqrt((double)D));
            grid((unsigned)((g.W * g.SPB + BM - 1) / BM), (unsigned)(g.R * g.HL), THREADS,
                 sizeof(Smem), [&] { attend(a); });
        }
    }
    // 3. the closed form, every rank
    double worst_all = 0, norm_all = 0;
    int nonfinite = 0;
    for (int r = 0; r < g.W; r++) {
        const bf16 *q = reinterpret_cast<const bf16 *>(win[r] + q_off);
        const bf16 *out = reinterpret_cast<const bf16 *>(win[r] + out_off);
        std::vector<double> want(nq);
        for (long long t = 0; t < g.T; t++)
            for (int h = 0; h < g.HQ; h++) {
                const long long i = t / g.SPB;
                const int kh = h / (g.HQ / g.HKV);
                std::vector<double> s(g.CLIP);
                double m = -INFINITY, l = 0, o[D] = {0};
                for (long long j = 0; j < g.CLIP; j++) {
                    const int sr = (int)(j / g.SPB);
                    const long long tt = i * g.SPB + j % g.SPB;
                    const bf16 *k = reinterpret_cast<const bf16 *>(win[sr] + kv_off) +
                                    (tt * g.HKV + kh) * 2 * D;
                    double x = 0;
                    for (int d = 0; d < D; d++)
                        x += (double)pk_emul_bf16_to_float(q[(t * g.HQ + h) * D + d]) *
                             pk_emul_bf16_to_float(k[d]);
                    s[j] = x / sqrt((double)D);
                    m = fmax(m, s[j]);
                }
                for (long long j = 0; j < g.CLIP; j++) {
                    const int sr = (int)(j / g.SPB);
                    const long long tt = i * g.SPB + j % g.SPB;
                    const bf16 *v = reinterpret_cast<const bf16 *>(win[sr] + kv_off) +
                                    (tt * g.HKV + kh) * 2 * D + D;
                    const double e = exp(s[j] - m);
                    l += e;
                    for (int d = 0; d < D; d++)
                        o[d] += e * pk_emul_bf16_to_float(v[d]);
                }
                for (int d = 0; d < D; d++)
                    want[(t * g.HQ + h) * D + d] = o[d] / l;
            }
        double ss = 0, ee = 0, worst = 0;
        for (double x : want)
            ss += x * x;
        const double rms = sqrt(ss / nq);
        for (size_t x = 0; x < nq; x++) {
            const double gv = pk_emul_bf16_to_float(out[x]);
            if (!std::isfinite(gv)) {
                nonfinite++;
                continue;
            }
            if (getenv("EMUL_DEBUG") && fabs(gv - want[x]) > 0.05 * fabs(want[x]) + 0.15 * rms &&
                nonfinite++ < 8) // counted as bad, printed
                printf("    rank %d elem %zu (token %zu head %zu d %zu): got %g want %g\n", r, x,
                       x / D / g.HQ, x / D % g.HQ, x % D, gv, want[x]);
            ee += (gv - want[x]) * (gv - want[x]);
            worst = fmax(worst, fabs(gv - want[x]) / (0.05 * fabs(want[x]) + 0.15 * rms));
        }
        printf("  rank %d: worst ratio %.3g, norm-wise %.3g\n", r, worst, sqrt(ee / ss));
        worst_all = fmax(worst_all, worst);
        norm_all = fmax(norm_all, sqrt(ee / ss));
    }
    const int pass = !nonfinite && worst_all <= 1 && norm_all <= 0.02;
    printf("W=%d R=%d SPB=%lld CLIP=%lld HQ=%d HKV=%d scale %g: worst %.3g norm %.3g "
           "non-finite %d: %s\n",
           g.W, g.R, g.SPB, g.CLIP, g.HQ, g.HKV, scale_in, worst_all, norm_all, nonfinite,
           pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
