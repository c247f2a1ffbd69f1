// Host check of pkb/29_moe_post_all2all's generator (no GPU: host code of problem.cu only):
// for W = 2, 4, 8 and keys 0..4 (the 5 trials), the split matrix S (rows and columns sum to
// T), every rank's tokens_per_local_expert (row s sums to S[s][rank]), zero split lengths,
// empty (source, expert) chunks, an expert that gets no token on any rank, an expert that gets
// most of the tokens, and tokens whose selected experts are not in ascending order.
// Build and run:
//   nvcc -std=c++17 -Iproblems/include -Icommon/include bench/pkb/gen_29_cases.cu \
//        -lnccl -o /tmp/gen_29_cases && /tmp/gen_29_cases
#include "../../problems/pkb/29_moe_post_all2all/problem.cu"

#include <stdio.h>

int main() {
    const int E = 8, K = 2, M = 4096;
    const long long T = (long long)K * M;
    const uint64_t seed = 0x2929292929ULL;
    int bad = 0;
    static PkMoeRouting rt;
    static Splits S;
    for (int W = 2; W <= 8; W *= 2) {
        const int El = E / W;
        for (int key = 0; key < 5; key++) {
            pk_moe_routing_make(seed, key, W, E, K, &rt);
            long long per_e[PK_MOE_MAX_E] = {0};
            long long unsorted = 0;
            for (int g = 0; g < W; g++)
                for (int m = 0; m < M; m++) {
                    int ex[8];
                    pk_moe_route(rt, g, (uint64_t)m, ex);
                    for (int k = 0; k < K; k++)
                        per_e[ex[k]]++;
                    unsorted += ex[0] > ex[1];
                }
            long long emax = 0, emin = T * W;
            for (int e = 0; e < E; e++) {
                emax = per_e[e] > emax ? per_e[e] : emax;
                emin = per_e[e] < emin ? per_e[e] : emin;
            }
            int zero_split = 0, empty_chunk = 0;
            long long S0[PK_MAX_RANKS][PK_MAX_RANKS];
            for (int g = 0; g < W; g++) {
                make_splits(seed, key, W, g, El, T, &S);
                for (int i = 0; i < W; i++)
                    for (int j = 0; j < W; j++) {
                        if (g == 0)
                            S0[i][j] = S.s[i][j];
                        else if (S0[i][j] != S.s[i][j]) {
                            printf("S differs between ranks\n");
                            bad++;
                        }
                    }
                for (int s = 0; s < W; s++) {
                    long long sum = 0;
                    for (int l = 0; l < El; l++) {
                        sum += S.tpe[s][l];
                        empty_chunk += S.tpe[s][l] == 0;
                        bad += S.tpe[s][l] < 0;
                    }
                    if (sum != S.s[s][g]) {
                        printf("W=%d key=%d rank %d: tpe row %d sums to %lld, S says %lld\n", W,
                               key, g, s, sum, S.s[s][g]);
                        bad++;
                    }
                }
            }
            for (int i = 0; i < W; i++) {
                long long rs = 0, cs = 0;
                for (int j = 0; j < W; j++) {
                    rs += S0[i][j];
                    cs += S0[j][i];
                    zero_split += S0[i][j] == 0;
                }
                if (rs != T || cs != T) {
                    printf("W=%d key=%d: S row/col %d sums %lld/%lld\n", W, key, i, rs, cs);
                    bad++;
                }
            }
            printf("W=%d key=%d mode=%d: expert tokens min %lld max %lld (of %lld slots: %.0f%%), "
                   "zero splits %d of %d, empty chunks %d of %d, unsorted tokens %.0f%%\n",
                   W, key, pk_moe_mode(key), emin, emax, T * W, 100.0 * emax / (double)(M * W),
                   zero_split, W * W, empty_chunk, W * W * El, 100.0 * unsorted / (M * W));
        }
    }
    printf(bad ? "FAIL\n" : "OK\n");
    return bad ? 1 : 0;
}
