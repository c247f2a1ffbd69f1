#!/usr/bin/env python3
"""Host simulation of pkb/67_gnn_sparse_embedding_all2all (pure Python).

Rows are symbols (rank, i), so an output row is exactly the row it copies. Over calls of every
split mode (problems/include/pk_splits.cuh, salt 0x67326100) and every degree mode at W = 2, 4,
8, it checks that
  - problem.cu's generate() (ids_kernel: an affine permutation of the positions into S[r]'s
    owner ranges, the node by pk_skewed_id, idx = node W + owner) gives ids in [0, N) whose
    owner counts are exactly S[r], with zeros, a hot owner and mostly-local splits;
  - problem.cu's reference (owners, bincount, the splits exchanged, a stable sort of the owners,
    host offsets, gather, own part copied, the two exchanges, tails zeroed, the count) and
  - solutions/correct.cu (count_owned per (source, block), scan_counts q-major, copy_owned with
    a block scan, tail zeroed), with blocks of 16 pairs so that small calls have many blocks,
give PKB's result (a line-by-line port of 67_gnn_sparse_embedding_all2all.py's solution():
_generate_permutation_remainder, the splits' all_to_all_single, idx[perm], value[perm], the two
all_to_all_single) padded with zeros to the capacity C; and counts the calls on which wrong.cu
(every source chunk after rank 0's one row late) and hostile_order_within_owner.cu (descending
inside each block) differ (expected: both on every call).
Usage: python3 bench/pkb/sim_67_gnn_sparse_embedding_all2all.py [calls]"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_66_gnn_feature_exchange_all2all_backward import (  # noqa: E402 (pk_splits.cuh, ported)
    MASK, pk_skewed_id, pk_splits_make, splitmix64)

SALT = 0x67326100
ZERO = ('zero',)
POISON = ('poison',)


def generate(seed, key, W, r, N, nnz, C):  # problem.cu generate() and ids_kernel
    S = pk_splits_make(seed, SALT, key, W, nnz, C)
    start = [0]
    for j in range(W):
        start.append(start[-1] + S[r][j])
    base = splitmix64(seed ^ splitmix64(0x67696400 ^ ((key & 0xFFFFFFFF) << 8) ^ r))
    a = 1 + splitmix64(base ^ 0xA) % nnz
    while math.gcd(a, nnz) != 1:
        a = a % nnz + 1
    b = splitmix64(base ^ 0xB) % nnz
    idx = []
    for i in range(nnz):
        p = (a * i + b) % nnz
        j = 0
        while j < W - 1 and p >= start[j + 1]:
            j += 1
        idx.append(pk_skewed_id(splitmix64((base + i) & MASK), key % 3, N // W) * W + j)
    return S, idx


def pkb_solution(idx, value, world):
    """PKB's solution() on every rank at once."""
    sends = []
    for r in range(world):
        owner = [i % world for i in idx[r]]                      # (idx % world_size).long()
        send_splits = [owner.count(q) for q in range(world)]      # bincount(minlength=W)
        perm = sorted(range(len(owner)), key=lambda i: owner[i])  # argsort(stable=True)
        sends.append((send_splits, [idx[r][i] for i in perm], [value[r][i] for i in perm]))
    out = []
    for r in range(world):
        # all_to_all_single(recv_splits, send_splits): recv_splits[q] = q's send_splits[r]
        recv_splits = [sends[q][0][r] for q in range(world)]
        recv_idx, recv_value = [], []
        for q in range(world):  # output chunk q from rank q: q's input chunk r
            off = sum(sends[q][0][:r])
            n = sends[q][0][r]
            assert n == recv_splits[q]
            recv_idx += sends[q][1][off:off + n]
            recv_value += sends[q][2][off:off + n]
        out.append((recv_idx, recv_value))
    return out


def reference(idx, value, r, W, C):  # problem.cu reference()
    sends = []
    for q in range(W):
        owner = [i % W for i in idx[q]]
        spl = [0] * W
        for o in owner:
            spl[o] += 1
        perm = sorted(range(len(owner)), key=lambda i: owner[i])  # CUB radix sort: stable
        sends.append((spl, [idx[q][i] for i in perm], [value[q][i] for i in perm]))
    sent = sends[r][0]
    recvd = [sends[q][0][r] for q in range(W)]  # the splits' send/recv group
    in_off = [sum(sent[:q]) for q in range(W + 1)]
    out_off = [sum(recvd[:q]) for q in range(W + 1)]
    total = out_off[W]
    assert in_off[W] == len(idx[r]) and total <= C
    ridx, rval = [POISON] * C, [POISON] * C
    for i in range(total, C):
        ridx[i], rval[i] = 0, ZERO
    for k in range(W):  # own part copied (k = 0), the others received from q = (r + k) % W
        q = (r + k) % W
        q_in_off = sum(sends[q][0][:r])
        for i in range(recvd[q]):
            ridx[out_off[q] + i] = sends[q][1][q_in_off + i]
            rval[out_off[q] + i] = sends[q][2][q_in_off + i]
    return ridx, rval, total


def pull(idx, value, r, W, C, blk, variant):  # correct.cu count_owned, scan_counts, copy_owned
    nnz = len(idx[0])
    nb = (nnz + blk - 1) // blk
    cnt = []
    for item in range(W * nb):
        q, b = divmod(item, nb)
        cnt.append(sum(1 for e in range(b * blk, min((b + 1) * blk, nnz)) if idx[q][e] % W == r))
    first, carry = [], 0
    for c in cnt:
        first.append(carry)
        carry += c
    total = carry
    ridx, rval = [POISON] * C, [POISON] * C
    for item in range(W * nb):
        q, b = divmod(item, nb)
        mine = [e for e in range(b * blk, min((b + 1) * blk, nnz)) if idx[q][e] % W == r]
        if variant == 'hostile':
            mine = mine[::-1]
        base = first[item] + (1 if variant == 'wrong' and q > 0 else 0)
        for pos, e in enumerate(mine):
            if base + pos < C:
                ridx[base + pos] = idx[q][e]
                rval[base + pos] = value[q][e]
    for i in range(total, C):  # the tail (after the copies here; on the GPU in any order)
        ridx[i], rval[i] = 0, ZERO
    return ridx, rval, total


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    rng = random.Random(67)
    nnz, blk = 96, 16
    C = 2 * nnz
    fails = {}
    seen = set()
    for W in (2, 4, 8):
        N = 40 * W
        for key in range(calls):
            seed = rng.getrandbits(64)
            idx, value = [], []
            for r in range(W):
                S, ids = generate(seed, key, W, r, N, nnz, C)
                assert all(0 <= i < N for i in ids)
                assert [sum(1 for i in ids if i % W == j) for j in range(W)] == S[r], (W, key, r)
                idx.append(ids)
                value.append([(r, i) for i in range(nnz)])
            mode = key % 4
            if any(v == 0 for row in S for v in row):
                seen.add((W, 'zero count', mode))
            cols = [sum(S[i][j] for i in range(W)) for j in range(W)]
            if max(cols) > C - W:
                seen.add((W, 'owner full', mode))
            if len(set(idx[0])) < nnz:
                seen.add((W, 'repeated ids', key % 3))
            want = pkb_solution(idx, value, W)
            for r in range(W):
                ri, rv = want[r]
                full = (ri + [0] * (C - len(ri)), rv + [ZERO] * (C - len(rv)), len(ri))
                assert reference(idx, value, r, W, C) == full, (W, key, r)
                assert pull(idx, value, r, W, C, blk, 'correct') == full, (W, key, r)
            for v in ('wrong', 'hostile'):
                bad = False
                for r in range(W):
                    ri, rv = want[r]
                    full = (ri + [0] * (C - len(ri)), rv + [ZERO] * (C - len(rv)), len(ri))
                    bad |= pull(idx, value, r, W, C, blk, v) != full
                f = fails.setdefault((v, W, mode), [0, 0])
                f[0] += bad
                f[1] += 1
    print('generate(): owner counts exactly S[r], ids in [0, N), at every rank, W = 2, 4, 8')
    print('reference and correct.cu equal PKB at every rank, W = 2, 4, 8, every mode')
    print('seen:', sorted(seen))
    ok = True
    for (v, W, mode), (b, n) in sorted(fails.items()):
        print(f'{v:7s} W={W} split mode {mode}: differs on {b}/{n} calls')
        if b != n:
            ok = False
            print('  UNEXPECTED')
    print('all as expected' if ok else 'NOT as expected')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
