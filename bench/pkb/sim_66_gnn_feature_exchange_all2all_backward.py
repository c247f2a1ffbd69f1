#!/usr/bin/env python3
"""Host simulation of pkb/66_gnn_feature_exchange_all2all_backward (pure Python).

1. Index arithmetic. Gradient values are exact integers (each row of every rank's grad_output
   capacity, unused rows included, a distinct value per column), so every sum is exact and a
   row taken from the wrong place shows. Over calls of every split mode
   (problems/include/pk_splits.cuh's pk_splits_make, ported with pk_splitmix64; salt 0x66326100)
   and every degree mode at W = 2, 4, 8 it checks that problem.cu's reference (host offsets, own
   chunk copied, grad_output's chunk k sent to (r + k) % W, the received chunk k from it,
   scatter-add) and solutions/correct.cu's pull (source p = (r + k) % W, p's row offset = prefix
   of counts_sent_p up to (r - p) % W, then the add by id) give PKB's result (a line-by-line
   port of 66_gnn_feature_exchange_all2all_backward.py's solution(): _shift of both chunk lists,
   all_to_all, sparse.mm of the one-hot COO matrix), and counts the calls on which wrong.cu
   (chunk lookup `i > start[k + 1]`: a chunk's first row taken from the chunk before) and
   shortcut_assumed_equal_splits.cu (T / W rows per chunk) differ (expected: wrong on every
   call, equal splits on every call but the balanced ones).
2. Tolerance. fp32 scatter-adds (T = 65536 rows into F = 32768, pkgym's dims, a few columns)
   in three orders (the rows in order: cuSPARSE's sorted COO; two random orders: atomics)
   against an fp64 sum, per degree mode and on iid, heavy (1/f^2 tails with outliers) and
   rank-scaled rows; prints each order's largest error over the output's rms and relative
   error, the tolerance the 4x rule derives (docs/problems.md, "Tolerances"), and
   shortcut_bf16_exchange.cu's error (each row rounded to bf16 before the add) against it.
Usage: python3 bench/pkb/sim_66_gnn_feature_exchange_all2all_backward.py [calls] [columns]"""
import array
import math
import random
import struct
import sys

MASK = (1 << 64) - 1
MAXR = 8
SALT = 0x66326100


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def unit(x):
    return ((splitmix64(x & MASK) >> 11) + 1) * (1.0 / 9007199254740992.0)


def apportion(total, w):
    s = sum(w)
    big = 0
    for j in range(len(w)):
        big = j if w[j] > w[big] else big
    out = [math.floor(total * (x / s)) for x in w]
    out[big] += total - sum(out)
    return out


def pk_splits_make(seed, salt, key, W, M, C):  # problems/include/pk_splits.cuh
    base = splitmix64(seed ^ splitmix64((salt + key) & MASK))
    mode = key % 4
    hot = splitmix64((base + 1) & MASK) % W
    S = []
    for i in range(W):
        w = []
        for j in range(W):
            k = 16 + i * MAXR + j
            w.append(0.0 if unit(base + 1000 + k) < 0.3 else math.exp(4.0 * unit(base + k)))
        w[splitmix64((base + 2000 + i) & MASK) % W] += 1.0
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
            peer = (i + 1 + splitmix64((base + 3000 + i) & MASK) % (W - 1)) % W
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


def pk_skewed_id(h, mode, n):  # problems/include/pk_splits.cuh
    u = (h >> 11) * (1.0 / 9007199254740992.0)
    if mode == 1:
        i = int(n * u * u * u * u)
    elif mode == 2 and (h & 1):
        i = ((h >> 1) % 4) * (n // 4)
    else:
        i = splitmix64(h) % n
    return min(i, n - 1)


def pkb_solution(gout, ids, seed_size, counts_sent, counts_received, world, D):
    """PKB's solution() on every rank at once; gout[r] a list of rows (lists of D numbers)."""
    def split(rows, counts):
        out, o = [], 0
        for c in counts:
            out.append(rows[o:o + c])
            o += c
        return out

    def shift(chunks, rank):
        cutoff = len(chunks) - rank
        return chunks[cutoff:] + chunks[:cutoff]

    # out = new_empty(sum(counts_received)); _all_to_all(split(out, counts_received),
    # split(grad_output, counts_sent)): the inputs are grad_output's first sum(counts_sent) rows
    ins = [shift(split(gout[r][:sum(counts_sent[r])], counts_sent[r]), r) for r in range(world)]
    result = []
    for r in range(world):
        out_counts = shift(list(counts_received[r]), r)
        offs = [sum(counts_received[r][:k]) for k in range(world)]
        out = [None] * sum(counts_received[r])
        for q in range(world):  # all_to_all: r's output view q comes from q's input view r
            got = ins[q][r]
            assert len(got) == out_counts[q], 'inconsistent counts'
            k = (q - r) % world  # view q of the shifted list is chunk (q - r) % W
            for i, row in enumerate(got):
                out[offs[k] + i] = row
        # torch.sparse.mm(coo (seed_size x T), out): row f = sum of out[i] with ids[i] == f
        grad = [[0] * D for _ in range(seed_size)]
        for i in range(len(out)):
            f = ids[r][i]
            for d in range(D):
                grad[f][d] += out[i][d]
        result.append(grad)
    return result


def scatter(rows, ids, F, D):
    grad = [[0] * D for _ in range(F)]
    for i, row in enumerate(rows):
        for d in range(D):
            grad[ids[i]][d] += row[d]
    return grad


def reference(gout, ids, cs, cr, r, W, T, O, F, D):  # problem.cu reference()
    sent, recvd = cs[r], cr[r]
    in_off, out_off = [0], [0]
    for k in range(W):
        in_off.append(in_off[-1] + recvd[k])
        out_off.append(out_off[-1] + sent[k])
    assert in_off[W] == T and out_off[W] <= O and sent[0] == recvd[0]
    recv = [None] * T
    for i in range(recvd[0]):
        recv[i] = gout[r][i]
    for k in range(1, W):  # recv chunk k from q = (r + k) % W: q's send chunk kq with
        q = (r + k) % W     # (q + kq) % W == r, starting at q's out_off[kq]
        kq = (r - q) % W
        assert cs[q][kq] == recvd[k]
        q_off = sum(cs[q][:kq])
        for i in range(recvd[k]):
            recv[in_off[k] + i] = gout[q][q_off + i]
    return scatter(recv, ids[r], F, D)


def pull(gout, ids, cs, cr, r, W, T, F, D, variant):  # correct.cu pull_add
    start = [0]
    for k in range(W):
        c = cr[r][k]
        if variant == 'equal':
            c = T // W + (T % W if k == W - 1 else 0)
        start.append(start[-1] + c)
    src = []
    for k in range(W):
        p = (r + k) % W
        j = (r - p + W) % W
        if variant == 'equal':
            off = j * (T // W)
        else:
            off = sum(cs[p][m] for m in range(j))
        src.append((p, off))
    rows = []
    for i in range(min(start[W], T)):
        k = 0
        if variant == 'wrong':
            while k < W - 1 and i > start[k + 1]:
                k += 1
        else:
            while i >= start[k + 1]:
                k += 1
        p, off = src[k]
        o = off + i - start[k]  # past the capacity: the guard zone after it (arena memory)
        rows.append(gout[p][o] if o < len(gout[p]) else [-7] * D)
    return scatter(rows, ids[r], F, D)


def check_indices(calls):
    rng = random.Random(66)
    F, D, T = 24, 2, 64
    O = 2 * T
    fails = {}
    for W in (2, 4, 8):
        for key in range(calls):
            seed = rng.getrandbits(64)
            S = pk_splits_make(seed, SALT, key, W, T, O)
            assert all(sum(row) == T for row in S)
            assert all(sum(S[i][j] for i in range(W)) <= O for j in range(W))
            cr = [[S[r][(r + k) % W] for k in range(W)] for r in range(W)]
            cs = [[S[(r + k) % W][r] for k in range(W)] for r in range(W)]
            # every row of every capacity distinct (unused rows too): a misplaced row shows
            gout = [[[1 + r * 100000 + o * 10 + d for d in range(D)] for o in range(O)]
                    for r in range(W)]
            ids = [[pk_skewed_id(splitmix64((seed + 7919 * r + i) & MASK), key % 3, F)
                    for i in range(T)] for r in range(W)]
            want = pkb_solution(gout, ids, F, cs, cr, W, D)
            for r in range(W):
                assert reference(gout, ids, cs, cr, r, W, T, O, F, D) == want[r], (W, key, r)
                assert pull(gout, ids, cs, cr, r, W, T, F, D, 'correct') == want[r], (W, key, r)
            for v in ('wrong', 'equal'):
                bad = any(pull(gout, ids, cs, cr, r, W, T, F, D, v) != want[r] for r in range(W))
                f = fails.setdefault((v, W, key % 4), [0, 0])
                f[0] += bad
                f[1] += 1
    print('1. reference and correct.cu equal PKB at every rank, W = 2, 4, 8, every mode')
    ok = True
    for (v, W, mode), (b, n) in sorted(fails.items()):
        print(f'   {v:6s} W={W} split mode {mode}: differs on {b}/{n} calls')
        want_fail = not (v == 'equal' and mode == 0)
        if (want_fail and b != n) or (not want_fail and b):
            ok = False
            print('   UNEXPECTED')
    return ok


def f32(x):
    return struct.unpack('f', struct.pack('f', x))[0]


def bf16(x):  # round to nearest even
    b = struct.unpack('I', struct.pack('f', x))[0]
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return struct.unpack('f', struct.pack('I', b))[0]


def fp32_sums(vals, ids, order, F):
    acc = array.array('f', [0.0] * F)
    for i in order:
        acc[ids[i]] += vals[i]  # array('f') rounds every store to fp32
    return acc


def check_tolerance(cols, atol_rms, rtol):
    T, F = 65536, 32768
    rng = random.Random(6602)
    worst = {}
    print(f'2. fp32 scatter-add errors against fp64, T = {T}, F = {F}, {cols} columns')
    for mode in range(3):
        ids = [pk_skewed_id(rng.getrandbits(64), mode, F) for _ in range(T)]
        for regime in ('iid', 'heavy', 'rank'):
            e_abs = {}
            e_rel = {}
            bf_ratio = 0.0
            for c in range(cols):
                if regime == 'iid':
                    vals = [f32(rng.gauss(0, 1)) for _ in range(T)]
                elif regime == 'heavy':  # 1/f^2 tail factor, outliers 16-64x in 1e-3
                    vals = [f32(rng.gauss(0, 1) * min(16.0, 0.24 / max(rng.random(), 1e-9) ** 0.5)
                                * (rng.uniform(16, 64) if rng.random() < 1e-3 else 1.0))
                            for _ in range(T)]
                else:  # the rows come from W = 8 ranks scaled 2^-8..2^-2
                    sc = [2.0 ** rng.uniform(-8, -2) for _ in range(8)]
                    vals = [f32(rng.gauss(0, 1) * sc[i * 8 // T]) for i in range(T)]
                exact = [0.0] * F
                for i in range(T):
                    exact[ids[i]] += vals[i]  # fp64: exact enough (53 bits, <= 8192 terms)
                rms = math.sqrt(sum(x * x for x in exact) / F)
                big = max(abs(x) for x in exact)
                orders = {'in order': list(range(T))}
                for s in range(2):
                    o = list(range(T))
                    random.Random(100 * mode + s).shuffle(o)
                    orders[f'random {s}'] = o
                for name, o in orders.items():
                    got = fp32_sums(vals, ids, o, F)
                    ea = max(abs(got[f] - exact[f]) for f in range(F)) / rms
                    er = max((abs(got[f] - exact[f]) / abs(exact[f]) for f in range(F)
                              if abs(exact[f]) >= 1e-3 * big), default=0.0)
                    e_abs[name] = max(e_abs.get(name, 0.0), ea)
                    e_rel[name] = max(e_rel.get(name, 0.0), er)
                bvals = [bf16(v) for v in vals]
                got = fp32_sums(bvals, ids, orders['random 0'], F)
                bf_ratio = max(bf_ratio, max(abs(got[f] - exact[f]) / (atol_rms * rms + rtol * abs(
                    exact[f])) for f in range(F)))
            line = ', '.join(f'{n}: {e_abs[n]:.2e} rms / {e_rel[n]:.2e} rel' for n in e_abs)
            print(f'   degrees {mode} {regime:5s}: {line}; bf16 exchange: {bf_ratio:.1f} x tol')
            w = worst.setdefault('all', [0.0, 0.0, 1e30])
            w[0] = max(w[0], max(e_abs.values()))
            w[1] = max(w[1], max(e_rel.values()))
            w[2] = min(w[2], bf_ratio)
    ea, er, bf = worst['all']

    def up(x):  # rounded up to 1, 2 or 5 x 10^k
        k = math.floor(math.log10(x))
        for m in (1, 2, 5, 10):
            if m * 10 ** k >= x:
                return m * 10 ** k
    print(f'   largest error: {ea:.3e} x rms, {er:.3e} relative (where |fp64| >= 1e-3 max)')
    print(f'   4x rule: atol_rms {up(4 * ea):g}, rtol {up(4 * er):g}; meta.json: atol_rms '
          f'{atol_rms:g}, rtol {rtol:g}')
    print(f'   bf16 exchange: at least {bf:.1f} x the tolerance somewhere, in every case')
    return 4 * ea <= atol_rms and bf > 1.0


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    cols = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    ok = check_indices(calls)
    ok = check_tolerance(cols, 2e-3, 2e-4) and ok
    print('all as expected' if ok else 'NOT as expected')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
