#!/usr/bin/env python3
"""Host simulation of pkb/70_torchrec_kjt_all2all (pure Python).

Ids are symbols (rank, position), so an output id is exactly the id it copies, and the values
capacity past each rank's used prefix holds garbage symbols. Over calls of every key-split mode
and every length mode at W = 2, 4, 8 (F = 8 and PKB's F = 2W - 1, B = 5, L = 20), it checks that
  - problem.cu's make_key_splits (ported) sums to F, never exceeds KM = 2F / W, gives PKB's
    1 + d % 3 at F = 2W - 1 in mode 0, ranks with no feature in the skewed and hot modes; and
    lengths_kernel's lengths lie in [0, L] (PKB's mode in [5, 20]; empty lists and empty
    features in the others);
  - problem.cu's reference (per-feature sums, key offsets, the metadata, the exchange into
    source-major receive buffers, the received rows' sums, the recat offsets and copy, tails,
    sizes) and solutions/correct.cu's pull (each source's sums, src / dst row offsets, the
    binary search of an id's row, tails, sizes)
give PKB's result (a line-by-line port of 70_torchrec_kjt_all2all.py's solution() with its
helpers _lengths_per_key, _sum_by_splits, _get_recat, _permute_2d_sparse_data,
_permute_segments, and all_to_all_single) padded with zeros to the capacities; and counts the
calls on which wrong.cu (each feature's ids counted over b < B - 1) and
shortcut_assumed_equal_splits.cu (F / W features per rank) differ: wrong on every call whose
some feature's last list is not empty, equal splits on every call but those of the equal mode.
Usage: python3 bench/pkb/sim_70_torchrec_kjt_all2all.py [calls]"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_66_gnn_feature_exchange_all2all_backward import (  # noqa: E402 (pk_splits.cuh, ported)
    MASK, apportion, splitmix64, unit)


def make_key_splits(seed, key, W, F, KM):  # problem.cu make_key_splits
    base = splitmix64(seed ^ splitmix64((0x70736B00 + key) & MASK))
    mode = key % 4
    hot = splitmix64((base + 1) & MASK) % W
    empty = (hot + 1 + splitmix64((base + 2) & MASK) % (W - 1)) % W
    w = []
    for d in range(W):
        if mode == 0:
            w.append(1.0 + d % 3)
        elif mode == 2:
            w.append(0.0 if unit(base + 100 + d) < 0.3 else math.exp(4.0 * unit(base + 200 + d)))
        else:
            w.append(1.0)
    if mode == 2:
        w[splitmix64((base + 3) & MASK) % W] += 1.0
    if mode == 1:
        ks = [F // W] * W
        ks[W - 1] += F % W
    elif mode == 3:
        to_hot = min(KM, F)
        w[hot] = 0.0
        w[empty] = 0.0
        if sum(w) <= 0.0:
            w[empty] = 1.0
        ks = apportion(F - to_hot, w)
        ks[hot] += to_hot
    else:
        ks = apportion(F, w)
    for d in range(W):
        for e in range(W):
            if ks[d] <= KM:
                break
            mv = min(ks[d] - KM, KM - ks[e])
            if e != d and mv > 0:
                ks[d] -= mv
                ks[e] += mv
    return ks


def make_lengths(seed, key, r, F, B, L):  # problem.cu lengths_kernel
    base = splitmix64(seed ^ splitmix64((0x706C6E00 ^ ((key & 0xFFFFFFFF) << 8) ^ r) & MASK))
    mode = key % 3
    out = []
    for i in range(F * B):
        h = splitmix64((base + i) & MASK)
        u = (h >> 11) * (1.0 / 9007199254740992.0)
        if mode == 0:
            n = 5 + h % 16
        elif mode == 1:
            n = 0 if u < 0.4 else 1 + h % L
        else:
            n = 0 if splitmix64((base ^ (0xFEED + i // B)) & MASK) % 4 == 0 else int(L * u * u * u)
        out.append(min(n, L))
    return out


# ---- PKB's solution(), line by line (lists for tensors) ----
def _sum_by_splits(values, splits):
    out, offset = [], 0
    for split in splits:
        out.append(sum(values[offset:offset + split]))
        offset += split
    return out


def _lengths_per_key(lengths, stride_per_key):
    out, offset = [], 0
    for stride in stride_per_key:
        out.append(sum(lengths[offset:offset + stride]))
        offset += stride
    return out


def _get_recat(local_split, num_splits, stagger=1):
    if local_split == 0:
        return None
    feature_order = [x + num_splits // stagger * y
                     for x in range(num_splits // stagger) for y in range(stagger)]
    return [feature_idx + rank_idx * local_split
            for feature_idx in range(local_split) for rank_idx in feature_order]


def _permute_segments(data, segment_lengths, recat):
    offsets = [0]
    for n in segment_lengths:
        offsets.append(offsets[-1] + n)
    out = []
    for idx in recat:
        out += data[offsets[idx]:offsets[idx + 1]]
    return out


def _permute_2d_sparse_data(recat, lengths_2d, values):
    row_lengths = [sum(row) for row in lengths_2d]
    lengths_out = [lengths_2d[i] for i in recat]
    values_out = _permute_segments(values, row_lengths, recat)
    return lengths_out, values_out


def all_to_all_single(inputs, in_splits):
    """inputs[q] flat list, in_splits[q][d]: what q sends d. Returns the outputs per rank."""
    W = len(inputs)
    outs = []
    for r in range(W):
        out = []
        for q in range(W):
            off = sum(in_splits[q][:r])
            out += inputs[q][off:off + in_splits[q][r]]
        outs.append(out)
    return outs


def pkb_solution(lengths, values, key_splits, batch_size, W):
    """solution() on every rank at once (values: each rank's used prefix only, as PKB's)."""
    num_features = sum(key_splits)
    stride_per_key = [batch_size] * num_features
    per_rank = []
    for r in range(W):
        length_per_key = _lengths_per_key(lengths[r], stride_per_key)
        length_splits = _sum_by_splits(stride_per_key, key_splits)
        value_splits = _sum_by_splits(length_per_key, key_splits)
        per_rank.append((length_splits, value_splits))
    # meta all_to_all_single: [length_split, value_split, batch] per destination
    meta_in = [[x for d in range(W) for x in (per_rank[q][0][d], per_rank[q][1][d], batch_size)]
               for q in range(W)]
    meta_out = all_to_all_single(meta_in, [[3] * W for _ in range(W)])
    recv_len = all_to_all_single(lengths, [per_rank[q][0] for q in range(W)])
    recv_val = all_to_all_single(values, [per_rank[q][1] for q in range(W)])
    result = []
    for r in range(W):
        rows = [meta_out[r][3 * q:3 * q + 3] for q in range(W)]  # view(W, -1)
        meta_rows = [list(col) for col in zip(*rows)]  # .T.tolist()
        output_splits, stride_per_rank = meta_rows[:-1], meta_rows[-1]
        assert output_splits[0] == [key_splits[r] * batch_size] * W
        rl, rv = recv_len[r], recv_val[r]
        local_split = key_splits[r]
        assert all(s == stride_per_rank[0] for s in stride_per_rank)
        recat = _get_recat(local_split, W)
        if recat is not None and stride_per_rank[0] > 0:
            lengths_2d = [rl[i:i + stride_per_rank[0]] for i in range(0, len(rl), stride_per_rank[0])]
            l2, rv = _permute_2d_sparse_data(recat, lengths_2d, rv)
            rl = [x for row in l2 for x in row]
        result.append((rl, rv, sum(stride_per_rank), stride_per_rank))
    return result


# ---- problem.cu reference() ----
def reference(lengths, values, ks, r, W, F, B, NL, NV):
    def feat_sums(q):
        return [sum(lengths[q][g * B:(g + 1) * B]) for g in range(F)]
    key_off = [sum(ks[:d]) for d in range(W + 1)]
    K = ks[r]
    sends = []
    for q in range(W):
        fs = feat_sums(q)
        voff = [0]
        for d in range(W):
            voff.append(voff[-1] + sum(fs[key_off[d]:key_off[d + 1]]))
        sends.append(voff)
    lin, vin = [0], [0]
    for q in range(W):
        lin.append(lin[-1] + K * B)
        vin.append(vin[-1] + sends[q][r + 1] - sends[q][r])
    rlen, rval = [], []
    for q in range(W):  # own part copied, the others received: source-major
        rlen += lengths[q][key_off[r] * B:(key_off[r] + K) * B]
        rval += values[q][sends[q][r]:sends[q][r + 1]]
    total = vin[W]
    nrows = K * W
    hs = [sum(rlen[i * B:(i + 1) * B]) for i in range(nrows)]
    src_off, acc = [], 0
    for i in range(nrows):
        src_off.append(acc)
        acc += hs[i]
    dst_off, acc = [], 0
    for o in range(nrows):
        dst_off.append(acc)
        acc += hs[(o % W) * K + o // W]
    olen, oval = [0] * NL, [0] * NV
    for o in range(nrows):  # recat_rows
        f, q = divmod(o, W)
        irow = q * K + f
        olen[o * B:(o + 1) * B] = rlen[irow * B:(irow + 1) * B]
        oval[dst_off[o]:dst_off[o] + hs[irow]] = rval[src_off[irow]:src_off[irow] + hs[irow]]
    return olen, oval, [K * W * B, total]


# ---- solutions/correct.cu pull (wrong.cu, shortcut_assumed_equal_splits.cu) ----
def pull(lengths, values, ks, r, W, F, B, NL, NV, variant):
    last = B - 1 if variant == 'wrong' else B
    sums = [[sum(lengths[q][g * B:g * B + last]) for g in range(F)] for q in range(W)]
    if variant == 'equal':
        key_off, K = r * (F // W), F // W + (F % W if r == W - 1 else 0)
    else:
        key_off, K = sum(ks[:r]), ks[r]
    rows = K * W
    size = [0] * rows
    src = [0] * rows
    for q in range(W):
        before = sum(sums[q][g] for g in range(F) if g < key_off)
        for g in range(key_off, key_off + K):
            size[(g - key_off) * W + q] = sums[q][g]
        for f in range(K):
            src[f * W + q] = before
            before += size[f * W + q]
    dst, acc = [], 0
    for o in range(rows):
        dst.append(acc)
        acc += size[o]
    dst.append(acc)
    nl, total = rows * B, dst[rows]
    olen = []
    for e in range(NL):
        if e < nl:
            o, b = divmod(e, B)
            f, q = divmod(o, W)
            olen.append(lengths[q][(key_off + f) * B + b])
        else:
            olen.append(0)
    oval = []
    for j in range(NV):
        if j < total:
            lo, hi = 0, rows - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if dst[mid] <= j:
                    lo = mid
                else:
                    hi = mid - 1
            q = lo % W
            k = src[lo] + j - dst[lo]
            oval.append(values[q][k] if k < len(values[q]) else ('past', q, k))
        else:
            oval.append(0)
    return olen, oval, [nl, total]


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    rng = random.Random(70)
    B, L = 5, 20
    fails = {}
    seen = set()
    for W in (2, 4, 8):
        for F in (8, 2 * W - 1):
            KM = 2 * F // W
            NL = W * KM * B
            NV = NL * L
            for key in range(calls):
                seed = rng.getrandbits(64)
                ks = make_key_splits(seed, key, W, F, KM)
                assert sum(ks) == F and all(0 <= k <= KM for k in ks), (W, F, key, ks)
                if key % 4 == 0 and F == 2 * W - 1:
                    assert ks == [1 + d % 3 for d in range(W)], ks
                if 0 in ks:
                    seen.add((W, F, 'rank owns no feature', key % 4))
                lengths = [make_lengths(seed, key, r, F, B, L) for r in range(W)]
                for r in range(W):
                    assert all(0 <= n <= L for n in lengths[r])
                    if key % 3 == 0:
                        assert all(5 <= n <= 20 for n in lengths[r])
                if any(n == 0 for ln in lengths for n in ln):
                    seen.add((W, F, 'empty list', key % 3))
                if any(sum(ln[g * B:(g + 1) * B]) == 0 for ln in lengths for g in range(F)):
                    seen.add((W, F, 'empty feature', key % 3))
                used = [sum(ln) for ln in lengths]
                values = [[(r, i) if i < used[r] else ('garbage', r, i) for i in range(F * B * L)]
                          for r in range(W)]
                want = pkb_solution(lengths, [values[r][:used[r]] for r in range(W)], ks, B, W)
                for r in range(W):
                    rl, rv, stride, spr = want[r]
                    assert stride == W * B and spr == [B] * W
                    full = (rl + [0] * (NL - len(rl)), rv + [0] * (NV - len(rv)), [len(rl), len(rv)])
                    assert reference(lengths, values, ks, r, W, F, B, NL, NV) == full, (W, F, key, r)
                    assert pull(lengths, values, ks, r, W, F, B, NL, NV, 'correct') == full, \
                        (W, F, key, r)
                for v in ('wrong', 'equal'):
                    bad = False
                    for r in range(W):
                        rl, rv, _, _ = want[r]
                        full = (rl + [0] * (NL - len(rl)), rv + [0] * (NV - len(rv)),
                                [len(rl), len(rv)])
                        bad |= pull(lengths, values, ks, r, W, F, B, NL, NV, v) != full
                    last_nonempty = any(ln[g * B + B - 1] for ln in lengths for g in range(F))
                    f = fails.setdefault((v, W, F, key % 4 if v == 'equal' else key % 3),
                                         [0, 0, 0])
                    f[0] += bad
                    f[1] += 1
                    if v == 'wrong':
                        f[2] += last_nonempty
                    else:
                        f[2] += ks != [F // W] * (W - 1) + [F // W + F % W]
    print('make_key_splits and lengths as documented; reference and correct.cu equal PKB at '
          'every rank, W = 2, 4, 8, every mode')
    print('seen:', sorted(seen))
    ok = True
    for (v, W, F, mode), (b, n, should) in sorted(fails.items()):
        kind = 'length' if v == 'wrong' else 'split'
        print(f'{v:6s} W={W} F={F:2d} {kind} mode {mode}: differs on {b}/{n} calls '
              f'(expected {should})')
        if b != should:
            ok = False
            print('  UNEXPECTED')
    print('all as expected' if ok else 'NOT as expected')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
