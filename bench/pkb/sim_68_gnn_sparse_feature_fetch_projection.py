#!/usr/bin/env python3
"""Host simulation of pkb/68_gnn_sparse_feature_fetch_projection (pure Python).

1. Index arithmetic. Table rows are symbols (global row id), so a fetched row is exactly the row
   it copies (the projection, the same on both sides, is left out here). Over calls of every
   split mode (problems/include/pk_splits.cuh, salt 0x68326100), every row mode and PKB's own
   ids (key % 12 == 0) at W = 2, 4, 8, it checks that problem.cu's generate() (ids_kernel,
   ported with pk_splitmix64) gives ids in [0, N), PKB's exact ids on key 0, a hot owner, zero
   counts and shard-edge rows; that problem.cu's reference (owners, counts, stable sort, the
   ids out, the owner's fetch, the rows back, the unsort) and solutions/correct.cu's pull
   (owner = id / S, row = id - owner S) give PKB's emb (a line-by-line port of
   68_gnn_sparse_feature_fetch_projection.py's solution() up to emb @ proj_matrix); and counts
   the calls on which wrong.cu (owner (id + 1) / S) differs: every call with shard-edge rows.
2. Tolerance. bf16 rows and proj (random, rounded to bf16), K = E = 256: each output element
   as an fp32 sum in three orders (sequential, reversed, pairwise: cuBLAS's and other kernels'
   orders differ), rounded to bf16, against fp64; the largest error of the fp32 order (before
   the rounding) over rms, the largest relative error of the rounded output (where |fp64| >=
   1e-3 max), the 4x rule, and shortcut_bf16_accumulate.cu's running bf16
   sum against the tolerance (rtol 0.016, atol_rms 1e-4).
Usage: python3 bench/pkb/sim_68_gnn_sparse_feature_fetch_projection.py [calls]"""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_66_gnn_feature_exchange_all2all_backward import (  # noqa: E402 (pk_splits.cuh, ported)
    MASK, bf16, f32, pk_skewed_id, pk_splits_make, splitmix64)

SALT = 0x68326100


def generate(seed, key, W, r, N, Q):  # problem.cu generate() and ids_kernel
    S = pk_splits_make(seed, SALT, key, W, Q, W * Q)
    start = [0]
    for j in range(W):
        start.append(start[-1] + S[r][j])
    base = splitmix64(seed ^ splitmix64((0x68696400 ^ ((key & 0xFFFFFFFF) << 8) ^ r) & MASK))
    a = 1 + splitmix64(base ^ 0xA) % Q
    while math.gcd(a, Q) != 1:
        a = a % Q + 1
    b = splitmix64(base ^ 0xB) % Q
    sh = N // W
    mode = key % 3
    ids = []
    for i in range(Q):
        if key % 12 == 0:
            owner, row = (i + r) % W, (7 * i + r) % sh
        else:
            p = (a * i + b) % Q
            j = 0
            while j < W - 1 and p >= start[j + 1]:
                j += 1
            owner = j
            h = splitmix64((base + i) & MASK)
            if mode == 0:
                row = (7 * i + r) % sh
            elif mode == 1:
                row = pk_skewed_id(h, 1, sh)
            elif h & 1:
                owner = splitmix64(h ^ 0x5) % W
                row = sh - 1 if (h >> 1) & 1 else 0
            else:
                row = splitmix64(h) % sh
        ids.append(owner * sh + row)
    return S, ids


def pkb_emb(shards, ids, N, W):
    """PKB's solution() on every rank at once, up to emb (emb @ proj_matrix left out)."""
    shard_size = (N + W - 1) // W
    per = []
    for r in range(W):
        owner = [min(i // shard_size, W - 1) for i in ids[r]]
        sort_idx = sorted(range(len(owner)), key=lambda i: owner[i])  # stable
        sorted_ids = [ids[r][i] for i in sort_idx]
        send_counts = [0] * W
        for o in (owner[i] for i in sort_idx):
            send_counts[o] += 1
        per.append((sort_idx, sorted_ids, send_counts))
    recv_ids = []
    for r in range(W):  # all_to_all_single of the ids: chunk q from q
        got = []
        for q in range(W):
            off = sum(per[q][2][:r])
            got += per[q][1][off:off + per[q][2][r]]
        recv_ids.append(got)
    fetched = [[shards[r][i - r * shard_size] for i in recv_ids[r]] for r in range(W)]
    out = []
    for r in range(W):  # all_to_all_single of the rows back, split by recv / send counts
        gathered = []
        for q in range(W):
            recv_q = [per[p][2][q] for p in range(W)]  # q's recv_splits
            off = sum(recv_q[:r])
            gathered += fetched[q][off:off + recv_q[r]]
        inv = sorted(range(len(per[r][0])), key=lambda j: per[r][0][j])  # argsort(sort_idx)
        out.append([gathered[j] for j in inv])
    return out


def reference(shards, ids, r, N, W):  # problem.cu reference(), up to the GEMM's input
    S = N // W
    def plan(q):
        owner = [min(max(i // S, 0), W - 1) for i in ids[q]]
        perm = sorted(range(len(owner)), key=lambda i: owner[i])
        cnt = [owner.count(o) for o in range(W)]
        return perm, [ids[q][i] for i in perm], cnt
    plans = [plan(q) for q in range(W)]
    perm, srt, sent = plans[r]
    so = [sum(sent[:q]) for q in range(W + 1)]
    gat = [None] * len(ids[r])
    for q in range(W):  # q receives our chunk q, fetches, sends it back into gat[so[q]..]
        for k in range(sent[q]):
            g = srt[so[q] + k]
            gat[so[q] + k] = shards[q][min(max(g - q * S, 0), S - 1)]
    emb = [None] * len(ids[r])
    for j, p in enumerate(perm):  # unsort_rows
        emb[p] = gat[j]
    return emb


def pull(shards, ids, r, N, W, variant):  # correct.cu / wrong.cu pull_rows
    S = N // W
    out = []
    for i in ids[r]:
        o = (i + 1) // S if variant == 'wrong' else i // S
        o = min(max(o, 0), W - 1)
        row = min(max(i - o * S, 0), S - 1)
        out.append(shards[o][row])
    return out


def check_indices(calls):
    rng = random.Random(68)
    Q = 96
    fails = {}
    seen = set()
    for W in (2, 4, 8):
        N = 32 * W
        shards = [[('row', o * (N // W) + k) for k in range(N // W)] for o in range(W)]
        for key in range(calls):
            seed = rng.getrandbits(64)
            ids, Ss = [], None
            for r in range(W):
                Ss, x = generate(seed, key, W, r, N, Q)
                assert all(0 <= i < N for i in x)
                if key % 12 == 0:
                    assert x == [((i + r) % W) * (N // W) + (7 * i + r) % (N // W)
                                 for i in range(Q)]
                ids.append(x)
            if any(v == 0 for row in Ss for v in row):
                seen.add((W, 'zero count', key % 4))
            if key % 12 and key % 4 == 2:
                seen.add((W, 'hot owner serves W Q', key % 4))
            if any(i % (N // W) == N // W - 1 and i < N - N // W for x in ids for i in x):
                seen.add((W, 'shard last row below the last rank', key % 3))
            want = pkb_emb(shards, ids, N, W)
            bad = False
            for r in range(W):
                want_r = want[r]
                assert [x[1] for x in want_r] == ids[r]  # PKB's emb is the table's rows in order
                assert reference(shards, ids, r, N, W) == want_r, (W, key, r)
                assert pull(shards, ids, r, N, W, 'correct') == want_r, (W, key, r)
                bad |= pull(shards, ids, r, N, W, 'wrong') != want_r
            edge = any(i % (N // W) == N // W - 1 and i < N - N // W for x in ids for i in x)
            f = fails.setdefault((W, key % 3), [0, 0, 0])
            f[0] += bad
            f[1] += 1
            f[2] += edge
    print('1. generate() as documented (PKB\'s exact ids on key % 12 == 0); reference and '
          'correct.cu equal PKB at every rank, W = 2, 4, 8')
    print('   seen:', sorted(seen))
    ok = True
    for (W, mode), (b, n, e) in sorted(fails.items()):
        print(f'   wrong  W={W} row mode {mode}: differs on {b}/{n} calls; calls with a query at '
              f'a shard\'s last row below the last rank: {e}')
        if b != e or (mode == 2 and b != n):
            ok = False
            print('   UNEXPECTED')
    return ok


def check_tolerance(rtol, atol_rms, n_out=384, K=256):
    rng = random.Random(6802)
    print(f'2. bf16 projection, K = {K}, {n_out} outputs per regime')
    worst_abs = worst_rel = 0.0
    twin = 1e30
    for regime in ('iid', 'heavy', 'rank'):
        want, got = [], {'sequential': [], 'reversed': [], 'pairwise': []}
        raw = {'sequential': [], 'reversed': [], 'pairwise': []}  # fp32 sums before rounding
        twin_got = []
        for _ in range(n_out):
            if regime == 'iid':
                a = [bf16(rng.gauss(0, 1)) for _ in range(K)]
            elif regime == 'heavy':
                a = [bf16(rng.gauss(0, 1) * min(16.0, 0.24 / max(rng.random(), 1e-9) ** 0.5))
                     for _ in range(K)]
            else:
                a = [bf16(rng.gauss(0, 1) * 2.0 ** rng.uniform(-8, -2)) for _ in range(K)]
            b = [bf16(rng.gauss(0, 1)) for _ in range(K)]
            prods = [f32(x * y) for x, y in zip(a, b)]  # exact: bf16 x bf16 fits fp32
            want.append(math.fsum(prods))

            def seq(ps):
                acc = 0.0
                for p in ps:
                    acc = f32(acc + p)
                return acc

            def pairwise(ps):
                while len(ps) > 1:
                    ps = [f32(ps[i] + ps[i + 1]) if i + 1 < len(ps) else ps[i]
                          for i in range(0, len(ps), 2)]
                return ps[0]
            raw['sequential'].append(seq(prods))
            raw['reversed'].append(seq(prods[::-1]))
            raw['pairwise'].append(pairwise(list(prods)))
            for name in raw:
                got[name].append(bf16(raw[name][-1]))
            acc = 0.0
            for p in prods:
                acc = bf16(acc + p)
            twin_got.append(acc)
        rms = math.sqrt(sum(x * x for x in want) / len(want))
        big = max(abs(x) for x in want)
        line = []
        for name, g in got.items():  # abs: the order's error before the rounding, over rms
            ea = max(abs(x - y) for x, y in zip(raw[name], want)) / rms
            er = max(abs(x - y) / abs(y) for x, y in zip(g, want) if abs(y) >= 1e-3 * big)
            worst_abs, worst_rel = max(worst_abs, ea), max(worst_rel, er)
            line.append(f'{name} {ea:.2e} rms / {er:.2e} rel')
        t = max(abs(x - y) / (atol_rms * rms + rtol * abs(y)) for x, y in zip(twin_got, want))
        twin = min(twin, t)
        print(f'   {regime:5s}: ' + ', '.join(line) + f'; bf16 accumulation: {t:.1f} x tol')
    print(f'   largest: fp32 order {worst_abs:.2e} x rms, rounded {worst_rel:.2e} relative; '
          f'4x rule: rtol '
          f'{4 * worst_rel:.3g} (bf16 output: at least 0.016), atol_rms {4 * worst_abs:.2g}; '
          f'meta.json rtol {rtol}, atol_rms {atol_rms}')
    return 4 * worst_rel <= rtol and 4 * worst_abs <= atol_rms and twin > 1.0


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    ok = check_indices(calls)
    ok = check_tolerance(0.016, 1e-4) and ok
    print('all as expected' if ok else 'NOT as expected')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
