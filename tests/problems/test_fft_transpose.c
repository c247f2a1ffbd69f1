/* The distributed transposes and the Hermitian completion of pkb/59 and 60
 * (problems/include/pk_fft_transpose.cuh), on the host: W ranks of small tensors with distinct
 * values go through pack, the all-to-all (send chunk k of rank q = receive chunk q of rank k) and
 * unpack, and must land where PKB's torch.split / dist.all_to_all / torch.cat put them; the
 * completion must equal a transcription of PKB's _conj_pad_2d (zero pad, flip of the conjugate,
 * all-gather along H, flip along H, scatter). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_fft_transpose.cuh"

/* A distinct value for element e of rank q. */
static double val(int q, long long e) {
    return q * 1000003.0 + (double)e;
}

static void run_transpose(int orient, int W, long long O, long long A, long long C) {
    const long long total = O * A * C, n = total / W;
    double *send = malloc(sizeof(double) * (size_t)(W * total));
    double *out = malloc(sizeof(double) * (size_t)(W * total));
    for (int q = 0; q < W; q++)
        for (long long p = 0; p < total; p++) {
            const long long src = pk_xpose_pack_src(orient, p, O, A, C, W);
            assert_true(src >= 0 && src < total);
            send[q * total + p] = val(q, src);
        }
    for (int r = 0; r < W; r++) {
        double *o = out + r * total;
        for (long long i = 0; i < total; i++)
            o[i] = -1;
        for (int q = 0; q < W; q++) /* receive chunk q of rank r = send chunk r of rank q */
            for (long long e = 0; e < n; e++) {
                const long long dst = pk_xpose_unpack_dst(orient, q * n + e, O, A, C, W);
                assert_true(dst >= 0 && dst < total);
                assert_true(o[dst] == -1); /* every result element filled once */
                o[dst] = send[q * total + r * n + e];
            }
        /* PKB: split along A (or C), all_to_all, cat along C (or A) */
        for (long long i = 0; i < total; i++) {
            double want;
            if (orient == PK_XPOSE_ROWS) { /* result (O, A/W, W C) */
                const long long a = A / W, oo = i / (a * W * C), ii = i / (W * C) % a,
                                col = i % (W * C), q = col / C, j = col % C;
                want = val((int)q, (oo * A + r * a + ii) * C + j);
            } else { /* result (O, W A, C/W) */
                const long long c = C / W, oo = i / (W * A * c), row = i / c % (W * A), q = row / A,
                                ii = row % A, j = i % c;
                want = val((int)q, (oo * A + ii) * C + r * c + j);
            }
            assert_true(o[i] == want);
        }
    }
    free(send);
    free(out);
}

static void transposes_match_pkb(void **state) {
    (void)state;
    for (int W = 2; W <= 8; W *= 2)
        for (int orient = 0; orient < 2; orient++) {
            run_transpose(orient, W, 3, 2 * W, 5 * W); /* A and C both divisible: both orients */
            run_transpose(orient, W, 1, W, W);
            run_transpose(orient, W, 2, 3 * W, 2 * W);
        }
}

/* PKB's _conj_pad_2d on one plane of H x (Wd/2 + 1) complex values (re, im), H split over W
 * ranks, transcribed op by op; compared with pk_hermitian_src. */
static void conj_pad_matches_pkb(void **state) {
    (void)state;
    for (int W = 2; W <= 8; W *= 2)
        for (long long H = W; H <= 3 * W; H += W)
            for (long long Wd = 2; Wd <= 10; Wd += 2) {
                const long long half = Wd / 2 + 1, Hl = H / W;
                double *re = malloc(sizeof(double) * (size_t)(H * Wd));
                double *im = malloc(sizeof(double) * (size_t)(H * Wd));
                /* per rank: tensor_pad = pad(x, Wd); [.., orig:] = flip(conj([.., 1:Wd-orig+1])) */
                for (long long h = 0; h < H; h++) {
                    for (long long k = 0; k < Wd; k++) {
                        re[h * Wd + k] = k < half ? (double)(h * 100 + k) : 0;
                        im[h * Wd + k] = k < half ? (double)(h * 100 + k) + 0.5 : 0;
                    }
                    const long long m = Wd - half; /* slice [1, m + 1) flipped into [half, Wd) */
                    for (long long t = 0; t < m; t++) {
                        re[h * Wd + half + t] = re[h * Wd + m - t];
                        im[h * Wd + half + t] = -im[h * Wd + m - t];
                    }
                }
                /* the all-gather along H (the planes above, rank by rank, are already whole),
                 * then [1:H, orig:] = flip along H */
                for (long long k = half; k < Wd; k++)
                    for (long long h = 1; h < 1 + (H - 1) / 2; h++) {
                        const long long g = H - h;
                        double t = re[h * Wd + k];
                        re[h * Wd + k] = re[g * Wd + k];
                        re[g * Wd + k] = t;
                        t = im[h * Wd + k];
                        im[h * Wd + k] = im[g * Wd + k];
                        im[g * Wd + k] = t;
                    }
                /* scatter: rank r keeps rows [r Hl, (r+1) Hl); each must match */
                for (int r = 0; r < W; r++)
                    for (long long h = r * Hl; h < (r + 1) * Hl; h++)
                        for (long long k = 0; k < Wd; k++) {
                            long long sh, sk;
                            const int cj = pk_hermitian_src(h, k, H, Wd, &sh, &sk);
                            assert_true(sk < half && sh < H);
                            const double wr = (double)(sh * 100 + sk),
                                         wi = ((double)(sh * 100 + sk) + 0.5) * (cj ? -1 : 1);
                            assert_true(re[h * Wd + k] == wr);
                            assert_true(im[h * Wd + k] == wi);
                        }
                free(re);
                free(im);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transposes_match_pkb),
        cmocka_unit_test(conj_pad_matches_pkb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
