// Host check of pkb/64's generator: prints an FNV-1a hash of problem.cu's gen_graph (owners,
// colptr, seeds; and local_adj_col through fill_col's col_value for N <= 1500) for N = 600, 1500,
// 10000 (S = 40, 40, 512, DM = 16), W = 2, 4, 8, keys 0-7, every rank; `python3
// bench/pkb/sim_64_gnn_neighbor_sampling.py --gen-hashes` prints the same lines from the
// simulation's Python port (no GPU needed: gen_graph is host code):
//   nvcc -std=c++17 -arch=sm_90a -Iproblems/include -Icommon/include
//     -Iproblems/include/candidate -DPK_DEVICE_API -o /tmp/gen64 bench/pkb/gen_64_graph_check.cu
//     -lnccl   (one command line)
//   diff <(/tmp/gen64) <(python3 bench/pkb/sim_64_gnn_neighbor_sampling.py --gen-hashes)
#include "../../problems/pkb/64_gnn_neighbor_sampling/problem.cu"
#include <stdio.h>

static unsigned long long fnv(unsigned long long h, const std::vector<int64_t> &x) {
    for (auto v : x)
        h = (h ^ (unsigned long long)v) * 1099511628211ULL;
    return h;
}

int main() {
    const long long cases[][3] = {{600, 40, 16}, {1500, 40, 16}, {10000, 512, 16}};
    const uint64_t seed = 0x5EED64ULL;
    for (auto &c : cases)
        for (int W = 2; W <= 8; W *= 2)
            for (int key = 0; key < 8; key++)
                for (int r = 0; r < W; r++) {
                    const long long N = c[0], S = c[1], E = c[0] * c[2];
                    std::vector<int64_t> o(N), cp(N + 1), sd(S);
                    gen_graph(seed, key, W, r, N, S, E, o.data(), cp.data(), sd.data());
                    const unsigned long long h = fnv(fnv(fnv(1469598103934665603ULL, o), cp), sd);
                    if (N > 1500) {
                        printf("%lld %d %d %d %llu -\n", N, W, key, r, h);
                        continue;
                    }
                    // fill_col's entries, through the same col_value, on the host
                    const uint64_t base = gen_base(seed, key);
                    const uint64_t nbase = pk_splitmix64(base ^ 0x6e62ULL),
                                   jbase = pk_splitmix64(base ^ (0x6a756e6bULL + (uint64_t)r));
                    std::vector<int64_t> col(E);
                    for (long long e = cp[N]; e < E; e++)
                        col[e] = col_value(N, cp[N], e, false, nbase, jbase, gen_mode(key), W, N);
                    for (long long v = 0; v < N; v++)
                        for (long long e = cp[v]; e < cp[v + 1]; e++)
                            col[e] = col_value(v, cp[v], e, gen_mode(key) == 0 || o[v] == r, nbase,
                                               jbase, gen_mode(key), W, N);
                    printf("%lld %d %d %d %llu %llu\n", N, W, key, r, h,
                           fnv(1469598103934665603ULL, col));
                }
}
