#!/usr/bin/env python3
"""Host simulation of pkb/65_gnn_feature_exchange_all2all's index arithmetic (pure Python).

Feature rows are symbols (rank, row), so an output row is exactly the row it copies. Over calls
of every split mode (problem.cu's make_splits, pkb/27's, ported with pk_splitmix64) and every
degree mode at W = 2, 4, 8, it checks that
  - the counts are consistent (what rank p sends to r is what r expects from p), rows sum to T,
    columns to at most O, and the modes give zeros, a hot receiver and mostly-local splits;
  - problem.cu's reference (host offsets, the gather, send of chunk k to (r + k) % W, receive of
    chunk k from (r + k) % W, own chunk copied, tail zeroed) and
  - solutions/correct.cu's pull (source p = (r + k) % W, p's in_off = prefix of
    counts_received_p up to (r - p) % W)
give PKB's result (a line-by-line port of 65_gnn_feature_exchange_all2all.py's solution():
gather, _shift of both chunk lists, all_to_all) padded with zero rows to O;
and counts the calls on which wrong.cu and shortcut_assumed_equal_splits.cu differ (expected:
wrong on every call, equal splits on every call but the balanced ones).
Usage: python3 bench/pkb/sim_65_gnn_feature_exchange_all2all.py [calls]"""
import math
import random
import sys

MASK = (1 << 64) - 1
ZERO = ('zero',)


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def unit(base, i):
    return ((splitmix64((base + i) & MASK) >> 11) + 1) * (1.0 / 9007199254740992.0)


def draw(base, i):
    return splitmix64((base + i) & MASK)


def apportion(total, w):
    s = sum(w)
    big = 0
    for j in range(len(w)):
        big = j if w[j] > w[big] else big
    out = [math.floor(total * (x / s)) for x in w]
    out[big] += total - sum(out)
    return out


def make_splits(seed, key, W, M, C, MAXR=8):  # problem.cu make_splits (pkb/27's)
    base = splitmix64(seed ^ splitmix64(0x65326100 + key))
    mode = key % 4
    hot = draw(base, 1) % W
    S = []
    for i in range(W):
        w = []
        for j in range(W):
            k = 16 + i * MAXR + j
            w.append(0.0 if unit(base, 1000 + k) < 0.3 else math.exp(4.0 * unit(base, k)))
        w[draw(base, 2000 + i) % W] += 1.0
        if mode == 0:
            row = [M // W] * W
            row[W - 1] += M % W
        elif mode == 1:
            row = apportion(M, w)
        elif mode == 2:
            to_hot = min(C // W, M)
            w[hot] = 0.0
            if sum(w) <= 0.0:
                w[(hot + 1) % W] = 1.0
            row = apportion(M - to_hot, w)
            row[hot] += to_hot
        else:
            peer = (i + 1 + draw(base, 3000 + i) % (W - 1)) % W
            row = [0] * W
            row[peer] = M // 5
            row[i] = M - M // 5
        S.append(row)
    for j in range(W):
        col = [sum(S[i][k] for i in range(W)) for k in range(W)]
        for i in range(W):
            if col[j] <= C:
                break
            for k in range(W):
                if col[j] <= C:
                    break
                if k == j or col[k] >= C:
                    continue
                mv = min(col[j] - C, S[i][j], C - col[k])
                S[i][j] -= mv
                S[i][k] += mv
                col[j] -= mv
                col[k] += mv
    return S


def pkb_solution(features, ids, counts_sent, counts_received, world):
    """PKB's solution() on every rank at once; features[r][f] a row symbol."""
    gathered = [[features[r][i] for i in ids[r]] for r in range(world)]

    def split(rows, counts):
        out, o = [], 0
        for c in counts:
            out.append(rows[o:o + c])
            o += c
        return out

    def shift(chunks, rank):
        cutoff = len(chunks) - rank
        return chunks[cutoff:] + chunks[:cutoff]

    ins = [shift(split(gathered[r], counts_received[r]), r) for r in range(world)]
    outs_counts = [shift(list(counts_sent[r]), r) for r in range(world)]
    result = []
    for r in range(world):  # all_to_all: r's output q comes from q's input r
        chunks = []
        for q in range(world):
            got = ins[q][r]
            assert len(got) == outs_counts[r][q], 'inconsistent counts'
            chunks.append(got)
        # out's chunk views, shifted: view q is chunk (q - r) % W
        out = [None] * sum(counts_sent[r])
        offs = [sum(counts_sent[r][:k]) for k in range(world)]
        for q in range(world):
            k = (q - r) % world
            for i, row in enumerate(chunks[q]):
                out[offs[k] + i] = row
        result.append(out)
    return result


def reference(features, ids, cs, cr, r, W, T, O):  # problem.cu reference()
    sent, recvd = cs[r], cr[r]
    in_off = [0]
    out_off = [0]
    for k in range(W):
        in_off.append(in_off[-1] + recvd[k])
        out_off.append(out_off[-1] + sent[k])
    assert in_off[W] == T and out_off[W] <= O and sent[0] == recvd[0]
    out = [ZERO] * O
    gathered = {p: [features[p][i] for i in ids[p]] for p in range(W)}
    for k in range(sent[0]):
        out[k] = gathered[r][k]
    for k in range(1, W):  # recv chunk k from (r + k) % W: what it sent as its chunk k'
        p = (r + k) % W
        kp = (r - p) % W  # p sends its chunk kp to (p + kp) % W == r
        p_in_off = sum(cr[p][:kp])
        assert cr[p][kp] == sent[k]
        for i in range(sent[k]):
            out[out_off[k] + i] = gathered[p][p_in_off + i]
    return out


def pull(features, ids, cs, cr, r, W, T, O, variant):  # correct.cu pull_rows
    start = [0]
    for k in range(W):
        start.append(start[-1] + (T // W if variant == 'equal' else cs[r][k]))
    src = []
    for k in range(W):
        p = (r + k) % W
        j = (r - p + W) % W
        off = j * (T // W) if variant == 'equal' else sum(cr[p][m] for m in range(j))
        src.append((p, off))
    out = []
    for o in range(O):
        if o >= start[W]:
            out.append(ZERO)
            continue
        k = 0
        while o >= start[k + 1]:
            k += 1
        p, off = src[k]
        i = o - start[k]
        if variant == 'wrong':
            i = min(i + (k > 0), T - 1 - off)
        fid = ids[p][off + i]
        out.append(features[p][fid])
    return out


def make_ids(rng, mode, F, T):
    if mode == 0:
        return [rng.randrange(F) for _ in range(T)]
    if mode == 1:
        return [min(int(F * rng.random() ** 4), F - 1) for _ in range(T)]
    return [(rng.randrange(4) * (F // 4)) if rng.random() < 0.5 else rng.randrange(F)
            for _ in range(T)]


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    rng = random.Random(65)
    F, T = 48, 64
    O = 2 * T
    fails = {}
    seen = set()
    for W in (2, 4, 8):
        for key in range(calls):
            seed = rng.getrandbits(64)
            S = make_splits(seed, key, W, T, O)
            assert all(sum(row) == T for row in S)
            assert all(sum(S[i][j] for i in range(W)) <= O for j in range(W))
            assert all(v >= 0 for row in S for v in row)
            mode = key % 4
            if any(v == 0 for row in S for v in row):
                seen.add((W, 'zero count', mode))
            if any(sum(S[i][j] for i in range(W)) == O for j in range(W)):
                seen.add((W, 'receiver full', mode))
            cr = [[S[r][(r + k) % W] for k in range(W)] for r in range(W)]
            cs = [[S[(r + k) % W][r] for k in range(W)] for r in range(W)]
            features = [[(r, f) for f in range(F)] for r in range(W)]
            ids = [make_ids(rng, key % 3, F, T) for _ in range(W)]
            want = pkb_solution(features, ids, cs, cr, W)
            for r in range(W):
                full = want[r] + [ZERO] * (O - len(want[r]))
                assert reference(features, ids, cs, cr, r, W, T, O) == full, (W, key, r)
                assert pull(features, ids, cs, cr, r, W, T, O, 'correct') == full, (W, key, r)
            for v in ('wrong', 'equal'):
                bad = any(pull(features, ids, cs, cr, r, W, T, O, v)
                          != want[r] + [ZERO] * (O - len(want[r])) for r in range(W))
                f = fails.setdefault((v, W, mode), [0, 0])
                f[0] += bad
                f[1] += 1
    print('reference and correct.cu equal PKB at every rank, W = 2, 4, 8, every mode')
    print('seen:', sorted(seen))
    ok = True
    for (v, W, mode), (b, n) in sorted(fails.items()):
        print(f'{v:6s} W={W} split mode {mode}: differs on {b}/{n} calls')
        want_fail = not (v == 'equal' and mode == 0)
        if (want_fail and b != n) or (not want_fail and b):
            ok = False
            print('  UNEXPECTED')
    print('all as expected' if ok else 'NOT as expected')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
