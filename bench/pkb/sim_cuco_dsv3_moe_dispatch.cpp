// Host simulation of cuco/dsv3_moe_dispatch (plain C++; the routing is the problem's own header,
// problems/include/pk_moe_routing_grouped.cuh, compiled for the host).
//
// A received row is named by its source token (s M + m): its int8 row and scale are functions of
// that token, so equal source sequences mean equal recv_x and recv_scale. Over calls of every
// routing mode (keys 0-7: trials and timed calls rotate key % 4) at W = 2, 4, 8, M = 4096
// (the problem's) and M = 512, it checks that
//   - the routing gives K distinct experts in range from at most TG groups per token, and the
//     hard cases: an expert no token chose, one that every token chose, zero (source, destination)
//     pairs, the busiest rank's rows against the capacity W M K;
//   - the PyTorch reference (bench/pkb-crosscheck/local/cuco_dsv3_moe_dispatch.py, solution(),
//     ported line by line: the mask, nonzero() of its transpose, the counts and their
//     all_to_all_single, the splits, the rows' all_to_all_single, the regroup to (expert, source)),
//   - problem.cu's reference (expert_scan's positions, prefix_counts, pack_rows, the counts
//     exchange, soff/roff, the staged rows, the chunk table, reorder_rows) and
//   - solutions/correct.cu (expert_lists, pull_rows' chunk starts and list lookup)
// give the same rows and counts on every rank; that hostile_order_within_expert.cu differs on
// every call (some chunk holds two tokens); and, on rows of Hd = 7168 bf16 normal values, how
// often wrong.cu's amax (all but the last 8 elements) and shortcut_subsample_amax.cu's (the first
// half) change a token's int8 row or scale.
// Build and run: g++ -O2 -std=c++17 -Iproblems/include -Icommon/include -I/usr/local/cuda/include
//   bench/pkb/sim_cuco_dsv3_moe_dispatch.cpp -o /tmp/sim_dsv3 && /tmp/sim_dsv3 [seeds | quick]
// (ctest problems_cuco_dsv3_moe_dispatch_sim runs it with `quick`).
#include "pk_moe_routing_grouped.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

typedef std::vector<long long> Vec;

struct Rank {
    Vec src;    // received rows, by source token
    Vec counts; // per local expert
};

// topk[s][m * K + k]
static std::vector<std::vector<int>> route_all(const PkGroupedRouting &r, int W, long long M, int K,
                                               long long *bad) {
    std::vector<std::vector<int>> t(W, std::vector<int>(M * K));
    for (int s = 0; s < W; s++)
        for (long long m = 0; m < M; m++) {
            int ex[PK_GR_MAX_K];
            pk_gr_route(r, s, (uint64_t)m, ex);
            int groups[PK_GR_MAX_G] = {0}, ng = 0;
            for (int k = 0; k < K; k++) {
                if (ex[k] < 0 || ex[k] >= r.E) {
                    (*bad)++;
                    continue;
                }
                for (int k2 = 0; k2 < k; k2++)
                    *bad += ex[k2] == ex[k];
                ng += !groups[ex[k] / (r.E / r.G)]++;
                t[s][m * K + k] = ex[k];
            }
            *bad += ng > r.TG;
        }
    return t;
}

// local/cuco_dsv3_moe_dispatch.py solution(), every rank at once.
static std::vector<Rank> torch_solution(const std::vector<std::vector<int>> &topk, int W,
                                        long long M, int K, int E) {
    const int El = E / W;
    std::vector<Vec> send_src(W), counts(W, Vec(E, 0));
    for (int rank = 0; rank < W; rank++) {
        std::vector<char> mask(M * E, 0); // mask[m, topk] = True
        for (long long m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                mask[m * E + topk[rank][m * K + k]] = 1;
        for (int e = 0; e < E; e++) // mask.t().nonzero(): expert-major, tokens ascending
            for (long long m = 0; m < M; m++)
                if (mask[m * E + e]) {
                    send_src[rank].push_back(rank * M + m); // rank * M + send_tok
                    counts[rank][e]++;                      // mask.sum(dim=0)
                }
    }
    std::vector<Rank> out(W);
    for (int rank = 0; rank < W; rank++) {
        Vec recv_counts(E); // all_to_all_single(recv_counts, counts): chunk El from each rank
        for (int s = 0; s < W; s++)
            for (int e = 0; e < El; e++)
                recv_counts[s * El + e] = counts[s][rank * El + e];
        Vec stage; // all_to_all_single of the rows: from each s, its rows for our experts
        for (int s = 0; s < W; s++) {
            long long before = 0, n = 0; // in_splits of s: rows to ranks < rank, then ours
            for (int q = 0; q < rank; q++)
                for (int e = 0; e < El; e++)
                    before += counts[s][q * El + e];
            for (int e = 0; e < El; e++)
                n += counts[s][rank * El + e];
            stage.insert(stage.end(), send_src[s].begin() + before,
                         send_src[s].begin() + before + n);
        }
        std::vector<Vec> chunks; // torch.split(t, sizes): (source, local expert) order
        long long at = 0;
        for (int c = 0; c < W * El; c++) {
            chunks.push_back(Vec(stage.begin() + at, stage.begin() + at + recv_counts[c]));
            at += recv_counts[c];
        }
        for (int e = 0; e < El; e++) // order = arange(W El).view(W, El).t().reshape(-1)
            for (int s = 0; s < W; s++)
                out[rank].src.insert(out[rank].src.end(), chunks[s * El + e].begin(),
                                     chunks[s * El + e].end());
        out[rank].counts.assign(El, 0); // recv_counts.view(W, El).sum(dim=0)
        for (int s = 0; s < W; s++)
            for (int e = 0; e < El; e++)
                out[rank].counts[e] += recv_counts[s * El + e];
    }
    return out;
}

// problem.cu reference().
static std::vector<Rank> module_reference(const std::vector<std::vector<int>> &topk, int W,
                                          long long M, int K, int E) {
    const int El = E / W;
    std::vector<Vec> send(W), counts(W, Vec(E, 0));
    for (int r = 0; r < W; r++) {
        std::vector<int> pos(M * K, -1);
        for (int e = 0; e < E; e++) { // expert_scan: a running exclusive scan over the tokens
            long long running = 0;
            for (long long m = 0; m < M; m++) {
                int slot = -1;
                for (int k = 0; k < K; k++)
                    if (topk[r][m * K + k] == e)
                        slot = k;
                if (slot >= 0)
                    pos[m * K + slot] = (int)running++;
            }
            counts[r][e] = running;
        }
        Vec off(E);
        long long acc = 0; // prefix_counts
        for (int e = 0; e < E; e++) {
            off[e] = acc;
            acc += counts[r][e];
        }
        send[r].assign(M * K, -1);
        for (long long w = 0; w < M * K; w++) // pack_rows
            send[r][off[topk[r][w]] + pos[w]] = (long long)r * M + w / K;
    }
    std::vector<Rank> out(W);
    for (int r = 0; r < W; r++) {
        Vec rcounts(E); // the counts' send/recv: rcounts[q El + e] = counts_q[r El + e]
        for (int q = 0; q < W; q++)
            for (int e = 0; e < El; e++)
                rcounts[q * El + e] = counts[q][r * El + e];
        long long roff[PK_MAX_RANKS + 1] = {0};
        for (int q = 0; q < W; q++) {
            long long m = 0;
            for (int e = 0; e < El; e++)
                m += rcounts[q * El + e];
            roff[q + 1] = roff[q] + m;
        }
        Vec stage(roff[W]);
        for (int q = 0; q < W; q++) { // q's soff[r] .. soff[r + 1] lands at roff[q]
            long long soff = 0;
            for (int e = 0; e < r * El; e++)
                soff += counts[q][e];
            for (long long i = 0; i < roff[q + 1] - roff[q]; i++)
                stage[roff[q] + i] = send[q][soff + i];
        }
        Vec out_start(E), stage_off(E);
        long long acc = 0;
        out[r].counts.assign(El, 0);
        for (int e = 0; e < El; e++)
            for (int q = 0; q < W; q++) {
                long long within = 0;
                for (int e2 = 0; e2 < e; e2++)
                    within += rcounts[q * El + e2];
                out_start[e * W + q] = acc;
                stage_off[e * W + q] = roff[q] + within;
                acc += rcounts[q * El + e];
                out[r].counts[e] += rcounts[q * El + e];
            }
        out[r].src.assign(acc, -1);
        for (long long j = 0; j < acc; j++) { // reorder_rows' binary search
            int lo = 0, hi = El * W - 1;
            while (lo < hi) {
                const int mid = (lo + hi + 1) / 2;
                if (out_start[mid] <= j)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            out[r].src[j] = stage[stage_off[lo] + (j - out_start[lo])];
        }
    }
    return out;
}

// solutions/correct.cu (descending = hostile_order_within_expert.cu).
static std::vector<Rank> pull(const std::vector<std::vector<int>> &topk, int W, long long M, int K,
                              int E, bool descending) {
    const int El = E / W;
    std::vector<std::vector<int>> lists(W, std::vector<int>((size_t)E * M, -1));
    std::vector<Vec> counts(W, Vec(E, 0));
    for (int s = 0; s < W; s++) // expert_lists
        for (int e = 0; e < E; e++) {
            long long running = 0;
            for (long long m = 0; m < M; m++) {
                int hit = 0;
                for (int k = 0; k < K; k++)
                    hit |= topk[s][m * K + k] == e;
                if (hit)
                    lists[s][(size_t)e * M + running++] = (int)m;
            }
            counts[s][e] = running;
        }
    std::vector<Rank> out(W);
    for (int rank = 0; rank < W; rank++) {
        const int chunks = El * W;
        Vec start(chunks + 1, 0);
        for (int c = 0; c < chunks; c++)
            start[c + 1] = counts[c % W][rank * El + c / W];
        for (int c = 0; c < chunks; c++)
            start[c + 1] += start[c];
        out[rank].counts.assign(El, 0);
        for (int e = 0; e < El; e++)
            out[rank].counts[e] = start[(e + 1) * W] - start[e * W];
        out[rank].src.assign(start[chunks], -1);
        for (long long j = 0; j < start[chunks]; j++) {
            int lo = 0, hi = chunks - 1;
            while (lo < hi) {
                const int mid = (lo + hi + 1) / 2;
                if (start[mid] <= j)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            const int e = lo / W, s = lo % W;
            const long long i = descending ? start[lo + 1] - 1 - j : j - start[lo];
            out[rank].src[j] = (long long)s * M + lists[s][(size_t)(rank * El + e) * M + i];
        }
    }
    return out;
}

static bool same(const std::vector<Rank> &a, const std::vector<Rank> &b) {
    for (size_t r = 0; r < a.size(); r++)
        if (a[r].src != b[r].src || a[r].counts != b[r].counts)
            return false;
    return true;
}

// bf16 round to nearest even of a float, as __float2bfloat16.
static float to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

// One token's int8 row and scale, the amax taken over [0, n) of the row.
static void quantize(const float *x, int Hd, int n, signed char *q, float *scale) {
    float amax = 0.f;
    for (int i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    *scale = amax / 127.f;
    for (int i = 0; i < Hd; i++) {
        float v = *scale > 0.f ? rintf(x[i] / *scale) : 0.f;
        q[i] = (signed char)fminf(fmaxf(v, -127.f), 127.f);
    }
}

int main(int argc, char **argv) {
    // "quick" (the ctest): one seed at M = 512 only; else SEEDS seeds at M = 512 and 4096.
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    const int seeds = quick ? 1 : argc > 1 ? atoi(argv[1]) : 2;
    const std::vector<long long> sizes =
        quick ? std::vector<long long>{512} : std::vector<long long>{512, 4096};
    const int E = 256, K = 8, G = 8, TG = 4;
    static PkGroupedRouting rt;
    long long calls = 0, agree = 0, hostile_differs = 0, bad = 0, over = 0;
    long long empty_expert_calls = 0, all_tokens_expert_calls = 0, zero_pair_calls = 0;
    double max_share = 0;
    for (long long M : sizes)
        for (int W = 2; W <= 8; W *= 2)
            for (int sd = 0; sd < seeds; sd++)
                for (int key = 0; key < 8; key++) {
                    const uint64_t seed = pk_splitmix64(0xd5e3ULL + 1000 * sd + W);
                    pk_gr_make(seed, key, W, E, G, TG, K, &rt);
                    auto topk = route_all(rt, W, M, K, &bad);
                    auto want = torch_solution(topk, W, M, K, E);
                    bool ok = same(module_reference(topk, W, M, K, E), want) &&
                              same(pull(topk, W, M, K, E, false), want);
                    agree += ok;
                    hostile_differs += !same(pull(topk, W, M, K, E, true), want);
                    calls++;
                    Vec per_expert(E, 0);
                    std::vector<long long> pair(W * W, 0);
                    for (int s = 0; s < W; s++)
                        for (long long w = 0; w < M * K; w++) {
                            per_expert[topk[s][w]]++;
                            pair[s * W + topk[s][w] / (E / W)]++;
                        }
                    long long busiest = 0;
                    for (int r = 0; r < W; r++)
                        busiest = std::max(busiest, (long long)want[r].src.size());
                    over += busiest > W * M * K;
                    max_share = std::max(max_share, busiest / (double)(M * K));
                    empty_expert_calls +=
                        *std::min_element(per_expert.begin(), per_expert.end()) == 0;
                    all_tokens_expert_calls +=
                        *std::max_element(per_expert.begin(), per_expert.end()) == W * M;
                    zero_pair_calls += *std::min_element(pair.begin(), pair.end()) == 0;
                }
    printf("calls %lld (M = %s, W = 2, 4, 8, keys 0-7 = every mode twice, %d seeds)\n", calls,
           quick ? "512" : "512 and 4096", seeds);
    printf("routing: %lld bad tokens (experts repeated, out of range or > TG groups)\n", bad);
    printf("hard cases: calls with an expert no token chose %lld, with an expert every token chose "
           "%lld, with a zero (source, destination) pair %lld; busiest rank %.2f M K rows, over "
           "the capacity W M K in %lld calls\n",
           empty_expert_calls, all_tokens_expert_calls, zero_pair_calls, max_share, over);
    printf("reference == correct == PyTorch reference: %lld / %lld\n", agree, calls);
    printf("hostile_order_within_expert differs: %lld / %lld\n", hostile_differs, calls);
    // Quantization on i.i.d. N(0, 1) rows in bf16 (Box-Muller from splitmix64).
    const int Hd = 7168, rows = 20000;
    std::vector<float> x(Hd);
    std::vector<signed char> q0(Hd), q1(Hd), q2(Hd);
    long long wrong_rows = 0, sub_rows = 0;
    for (int row = 0; row < rows; row++) {
        for (int i = 0; i < Hd; i++) {
            const uint64_t k = 0x51u + (uint64_t)row * Hd + i;
            const double u1 = pk_splitmix_unit(2 * k), u2 = pk_splitmix_unit(2 * k + 1);
            x[i] = to_bf16((float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)));
        }
        float s0, s1, s2;
        quantize(x.data(), Hd, Hd, q0.data(), &s0);
        quantize(x.data(), Hd, Hd - 8, q1.data(), &s1);
        quantize(x.data(), Hd, Hd / 2, q2.data(), &s2);
        wrong_rows += s1 != s0 || q1 != q0;
        sub_rows += s2 != s0 || q2 != q0;
    }
    printf("i.i.d. rows (Hd = 7168, %d rows): wrong.cu's amax changes %lld (%.3f%%: %.1f tokens "
           "per rank of M = 4096), shortcut_subsample_amax.cu's %lld (%.1f%%)\n",
           rows, wrong_rows, 100.0 * wrong_rows / rows, 4096.0 * wrong_rows / rows, sub_rows,
           100.0 * sub_rows / rows);
    const bool ok = !bad && !over && agree == calls && hostile_differs == calls &&
                    empty_expert_calls > 0 && all_tokens_expert_calls > 0 && zero_pair_calls > 0 &&
                    wrong_rows > 0 && sub_rows > rows / 3;
    printf("%s\n", ok ? "all as expected" : "MISMATCH");
    return ok ? 0 : 1;
}
