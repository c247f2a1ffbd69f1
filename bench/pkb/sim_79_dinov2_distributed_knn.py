#!/usr/bin/env python3
"""Host simulation of pkb/79_dinov2_distributed_knn (pure Python).

Features are generate()'s (a port: the grid m 2^-9, |m| <= 127, from N(0, 1) draws; odd call
keys clustered with problem.cu's pk_splitmix64 streams), so every similarity is an exact integer
sum times 2^-18, rounded once to bf16 (what every honest GPU kernel gets). At W = 2, 4, 8 over
calls of both kinds it checks that
  - PKB's solution() (a line-by-line port: the owner loop, _broadcast_queries,
    _local_candidates with torch.topk's choice among ties drawn at random, _merge_on_owner's
    gather and topk) is accepted by check() (problem.cu's check_rows, ported) against
    problem.cu's reference (its local select, the extras of the K-th's ties, the send/recv to
    the owners, the merge and the tie record, ported; its selection step by step: the 16-bit
    keys, the two histogram passes, the collection, the bitonic sort), whatever the tie choices
    on either side;
  - correct.cu (its own tie choices) is accepted, and its sims equal the reference's exactly;
  - the tie record is complete: it equals the labels of every item, on any rank, whose
    similarity equals the K-th (by brute force), and no rank leaves more than TIE_R = 64 out;
  - hostile_tie_labels.cu is rejected on every call, while a checker of the sims alone (or of
    the labels above the K-th) accepts it;
  - wrong.cu (each shard's last item never a candidate) is rejected where a shard's last item is
    a neighbour (a call at these small sizes may escape; the count of calls it fails is printed);
  - shortcut_skip_exchange.cu is rejected on every call, shortcut_assumed_balanced.cu passes the
    i.i.d. calls and is rejected on every clustered one.
Usage: python3 bench/pkb/sim_79_dinov2_distributed_knn.py [calls per W]"""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_66_gnn_feature_exchange_all2all_backward import MASK, bf16, splitmix64  # noqa: E402

TIE_R = 64


def unit(x):  # pk_splitmix_unit
    return ((splitmix64(x & MASK) >> 11) + 1) * (1.0 / 9007199254740992.0)


def normal_at(h):  # problem.cu normal_at
    u1, u2 = unit(h), unit(h ^ 0x9E3779B97F4A7C15)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)


def on_grid(v, D):  # the integer m of problem.cu on_grid (fp32 details aside)
    m = round(v * 512.0 / math.sqrt(D))
    return max(-127, min(127, m))


def generate(seed, key, W, Q, T, D, rng):
    """Per rank: test (Q lists of D ints), train (T lists of D ints: item j), labels (T)."""
    clustered = key % 2 == 1
    k0 = splitmix64(seed ^ splitmix64(((0x79C1 << 32) ^ key) & MASK))
    kc = splitmix64((k0 + 1) & MASK)
    centre = {}

    def c_at(c, d):
        if (c, d) not in centre:
            centre[(c, d)] = normal_at((kc + c * D + d) & MASK)
        return centre[(c, d)]

    test, train, labels = [], [], []
    for r in range(W):
        kq = splitmix64((k0 + 2 + r) & MASK)
        kt = splitmix64((k0 + 100 + r) & MASK)
        rows = []
        for i in range(Q):
            c = splitmix64((kq + i) & MASK) % 64
            rows.append([on_grid((0.6 * c_at(c, d) + 0.8 * rng.gauss(0, 1)) if clustered
                                 else rng.gauss(0, 1), D) for d in range(D)])
        test.append(rows)
        items = []
        for j in range(T):
            h = splitmix64((kt + j) & MASK)
            if (h >> 32) % 10 < 8:
                c = W * (h % (64 // W)) + r
            else:
                c = (h >> 8) % 64
            items.append([on_grid((0.6 * c_at(c, d) + 0.8 * rng.gauss(0, 1)) if clustered
                                  else rng.gauss(0, 1), D) for d in range(D)])
        train.append(items)
        labels.append([(r * T + j) % 1000 for j in range(T)])
    return test, train, labels


def sim(q, item):  # bf16(fp32 sum): the integer sum is exact in fp32 (|s| < 2^24)
    return bf16(sum(a * b for a, b in zip(q, item)) * 2.0 ** -18)


def topk(vals, labs, k, rng):
    """torch.topk(sorted=True): the k largest, descending; any choice among ties (random)."""
    order = list(range(len(vals)))
    rng.shuffle(order)
    order.sort(key=lambda j: -vals[j])
    return [vals[j] for j in order[:k]], [labs[j] for j in order[:k]], order


def pkb_solution(test, train, labels, W, K, rng, S):
    """PKB's solution() on every rank at once; queries @ train_T is S (the same exact sums)."""
    result = [None] * W
    for owner in range(W):
        queries = test[owner]  # _broadcast_queries
        cand = []
        for p in range(W):  # _local_candidates on rank p
            rows = []
            for i, q in enumerate(queries):
                s = S[owner][i][p]  # sim(q, item) for every item of rank p's shard
                v, l, _ = topk(s, labels[p], K, rng)
                rows.append((v, l))
            cand.append(rows)
        out = []  # _merge_on_owner: gather, cat(dim=1), topk
        for i in range(len(queries)):
            v = sum((cand[p][i][0] for p in range(W)), [])
            l = sum((cand[p][i][1] for p in range(W)), [])
            vv, ll, _ = topk(v, l, K, rng)
            out.append((vv, ll))
        result[owner] = out
    return result


def all_sims(test, train, W):  # S[o][i][p] = sims of owner o's query i against rank p's shard
    return [[[[sim(q, it) for it in train[p]] for p in range(W)] for q in test[o]]
            for o in range(W)]


def local_select(s, labs, K, rng, limit=None):
    """problem.cu local_topk / correct.cu top_k: every value above the K-th, the first `need` of
    its ties to arrive (atomics: a random order), the rest of the ties spilled (extras)."""
    n = len(s) if limit is None else limit
    srt = sorted(s[:n], reverse=True)
    t = srt[K - 1]
    above = [j for j in range(n) if s[j] > t]
    eq = [j for j in range(n) if s[j] == t]
    rng.shuffle(eq)
    need = K - len(above)
    chosen = above + eq[:need]
    rng.shuffle(chosen)
    chosen.sort(key=lambda j: -s[j])
    extras = [labs[j] for j in eq[need:]]
    return [s[j] for j in chosen], [labs[j] for j in chosen], extras


THREADS = 256


def key16(v):  # problem.cu key16 of a bf16 value (its upper 16 fp32 bits; -0 as +0)
    u = struct.unpack('I', struct.pack('f', v))[0] >> 16
    if u == 0x8000:
        u = 0
    return (~u & 0xFFFF) if u & 0x8000 else (u | 0x8000)


def cuda_select(s, labs, K, rng):
    """problem.cu select_top, step by step: kth_key's two 8-bit histogram passes, the collection
    (atomics: arrival order random), sort_desc's bitonic network over THREADS slots of
    (key + 1) << 32 | index; returns (sims, labels, spilled labels) like local_select."""
    keys = [key16(v) for v in s]
    hist = [0] * 256
    for k in keys:
        hist[k >> 8] += 1
    cum, b = 0, 255
    while b > 0 and cum + hist[b] < K:
        cum += hist[b]
        b -= 1
    hi, hist = b, [0] * 256
    for k in keys:
        if k >> 8 == hi:
            hist[k & 255] += 1
    b = 255
    while b > 0 and cum + hist[b] < K:
        cum += hist[b]
        b -= 1
    t, above = hi << 8 | b, cum
    sel, n_above, n_eq, spill = [0] * THREADS, 0, 0, []
    order = list(range(len(s)))
    rng.shuffle(order)
    for j in order:
        k = keys[j]
        if k > t:
            sel[n_above] = (k + 1) << 32 | j
            n_above += 1
        elif k == t:
            if n_eq < K - above:
                sel[above + n_eq] = (k + 1) << 32 | j
            else:
                spill.append(labs[j])
            n_eq += 1
    size = 2
    while size <= THREADS:
        stride = size // 2
        while stride > 0:
            for i in range(THREADS):
                j = i ^ stride
                if j > i:
                    desc = (i & size) == 0
                    if (sel[i] < sel[j]) if desc else (sel[i] > sel[j]):
                        sel[i], sel[j] = sel[j], sel[i]
            stride //= 2
        size *= 2
    idx = [e & 0xFFFFFFFF for e in sel[:K]]
    assert all(e > 0 for e in sel[:K]) and all(e == 0 for e in sel[K:])
    return [s[j] for j in idx], [labs[j] for j in idx], spill


def reference(S, labels, W, K, rng):
    """problem.cu reference(): local selects, the exchange, the merges and the tie records."""
    out, recs, max_extra = [], [], 0
    for o in range(W):
        rows, rec_rows = [], []
        for i in range(len(S[o])):
            cands = []
            for p in range(W):
                v, l, ex = cuda_select(S[o][i][p], labels[p], K, rng)
                max_extra = max(max_extra, len(ex))
                cands.append((v, l, ex))
            v = sum((c[0] for c in cands), [])
            l = sum((c[1] for c in cands), [])
            mv, ml, _ = cuda_select(v, l, K, rng)
            t = mv[K - 1]
            rec = [l[j] for j in range(len(v)) if v[j] == t]
            overflow = False
            for c in cands:
                if c[0][K - 1] == t:
                    overflow |= len(c[2]) > TIE_R
                    rec += c[2][:TIE_R]
            rows.append((mv, ml))
            rec_rows.append(None if overflow else rec)
        out.append(rows)
        recs.append(rec_rows)
    return out, recs, max_extra


def check_row(want, got, rec):  # topk_sims' exact check, then problem.cu check_rows
    (ws, wl), (gs, gl) = want, got
    K = len(ws)
    if ws != gs:
        return False
    last, j0 = ws[K - 1], 0
    while j0 < K:
        j1 = j0 + 1
        while j1 < K and ws[j1] == ws[j0]:
            j1 += 1
        tail = ws[j0] == last
        for j in range(j0, j1):
            in_got = sum(1 for x in range(j0, j1) if gl[x] == gl[j])
            if tail:
                assert rec is not None, "tie record overflow"
                in_want = sum(1 for x in rec if x == gl[j])
                if in_got > in_want:
                    return False
            elif in_got != sum(1 for x in range(j0, j1) if wl[x] == gl[j]):
                return False
        j0 = j1
    return True


def merged(S, labels, W, K, rng, o, i, send):
    """correct.cu and its variants: rank p's candidates (send(p, s, labs)) merged at the owner."""
    v, l = [], []
    for p in range(W):
        cv, cl = send(p, S[o][i][p], labels[p])
        v += cv
        l += cl
    mv, ml, _ = local_select(v, l, K, rng)
    return mv, ml, v, l


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    rng = random.Random(79)
    # T large enough that a cluster's items outnumber K (as at pkgym's and PKB's sizes)
    sizes = {2: (2, 8192, 64, 128), 4: (2, 4096, 64, 128), 8: (2, 2048, 64, 128)}
    for W, (Q, T, D, K) in sizes.items():
        fails = {n: 0 for n in ("pkb", "correct", "wrong", "hostile", "hostile_lax", "skip",
                                "balanced_iid", "balanced_clustered")}
        n_iid = n_cl = 0
        max_extra = max_tie = 0
        for key in range(calls):
            seed = splitmix64(0x79 * 1000 + W * 100 + key)
            test, train, labels = generate(seed, key, W, Q, T, D, rng)
            if key == 0:  # planted: a query duplicated at the last rank's shard edge (wrong.cu)
                train[W - 1][T - 1] = list(test[0][0])
            S = all_sims(test, train, W)
            want, recs, mx = reference(S, labels, W, K, rng)
            max_extra = max(max_extra, mx)
            pkb = pkb_solution(test, train, labels, W, K, rng, S)
            clustered = key % 2 == 1
            n_cl += clustered
            n_iid += not clustered
            f = {n: False for n in fails}
            Kb = min(K, 3 * K // (2 * W) + 8)
            for o in range(W):
                for i in range(Q):
                    w, rec = want[o][i], recs[o][i]
                    every = sum((S[o][i][p] for p in range(W)), [])
                    every_l = sum((labels[p] for p in range(W)), [])
                    t = w[0][K - 1]
                    brute = sorted(every_l[j] for j in range(len(every)) if every[j] == t)
                    assert sorted(rec) == brute, "tie record incomplete"
                    max_tie = max(max_tie, len(rec))
                    assert w[0] == sorted(every, reverse=True)[:K]
                    f["pkb"] |= not check_row(w, pkb[o][i], rec)

                    def full(p, s, labs):
                        v, l_, _ = local_select(s, labs, K, rng)
                        return v, l_

                    c = merged(S, labels, W, K, rng, o, i, full)
                    f["correct"] |= not check_row(w, c[:2], rec)

                    def edge(p, s, labs):
                        v, l_, _ = local_select(s, labs, K, rng, limit=len(s) - 1)
                        return v, l_

                    bad = not check_row(w, merged(S, labels, W, K, rng, o, i, edge)[:2], rec)
                    # rejected iff some shard's last item is strictly above the K-th
                    assert bad == any(S[o][i][p][T - 1] > t for p in range(W))
                    f["wrong"] |= bad
                    # hostile: the K-th's run gets the label of the best candidate below it
                    mv, ml, v, l_ = c
                    below = max((j for j in range(len(v)) if v[j] < mv[K - 1]),
                                key=lambda j: v[j])
                    hl = [l_[below] if mv[x] == mv[K - 1] else ml[x] for x in range(K)]
                    f["hostile"] |= not check_row(w, (mv, hl), rec)
                    f["hostile_lax"] |= mv != w[0]  # a checker of the sims alone

                    sv, sl, _ = local_select(S[o][i][o], labels[o], K, rng)
                    f["skip"] |= not check_row(w, (sv, sl), rec)

                    def bal(p, s, labs):
                        v, l_, _ = local_select(s, labs, K, rng)
                        return v[:Kb] + [-math.inf] * (K - Kb), l_[:Kb] + [-1] * (K - Kb)

                    b = merged(S, labels, W, K, rng, o, i, bal)[:2]
                    f["balanced_clustered" if clustered else "balanced_iid"] |= not check_row(
                        w, b, rec)
            for n in fails:
                fails[n] += f[n]
        print(f"W={W} Q={Q} T={T} D={D} K={K}: {calls} calls ({n_iid} iid, {n_cl} clustered); "
              f"max extras left out by one rank {max_extra} (TIE_R {TIE_R}), "
              f"max tie set {max_tie}; calls failed: {fails}")
        assert max_extra <= TIE_R
        assert fails["pkb"] == 0 and fails["correct"] == 0 and fails["hostile_lax"] == 0
        assert fails["wrong"] >= 1 and fails["hostile"] == calls and fails["skip"] == calls
        assert fails["balanced_iid"] == 0 and fails["balanced_clustered"] == n_cl
    print("ok")


if __name__ == "__main__":
    main()
