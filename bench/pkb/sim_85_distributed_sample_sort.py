#!/usr/bin/env python3
"""Host simulation of pkb/85_distributed_sample_sort (pure Python, no GPU).

Shards drawn as problem.cu's shard_plan() and fill_shard() do (pk_splitmix64 ported; values
rounded to bf16 as the device does, round to nearest even), at W = 2, 4, 8, for every trial
class, the call after timing and a timed call. It checks that
  - a line-by-line port of PKB's solution() (85_distributed_sample_sort.py: _extract_samples,
    _gather_splitters, _split_positions, _variable_all_to_all, _merge_sorted,
    _redistribute_exact) gives the sorted sequence split by _target_range;
  - problem.cu's reference (order-preserving 16-bit keys, -0 as +0, samples packed as
    key << 40 | sort_rank << 32 | position, split_positions' binary searches, the two
    exchanges, decode with a zero tail) and solutions/correct.cu (each element's global
    position from upper bounds on lower ranks and lower bounds on higher ranks, stored into the
    owner of that position) equal it on every rank (numerically: -0 == +0), out_n included;
and counts the calls in which wrong.cu (destination found with < instead of <=),
hostile_ties_across_ranks.cu (lower bounds everywhere) and shortcut_assumed_equal_counts.cu
(every shard taken as N long) differ (expected.json: all incorrect; the hostile passes class 0,
the twin classes 0 and 4).
Usage: python3 bench/pkb/sim_85_distributed_sample_sort.py [calls_per_class]"""
import bisect
import random
import struct
import sys

MASK = (1 << 64) - 1
KEY_POST_TIMING = 1 << 20
KEY_TIMED_BASE = 1 << 21


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def bf16_bits(v):  # __float2bfloat16: round to nearest even
    b = struct.unpack('<I', struct.pack('<f', v))[0]
    b += 0x7FFF + ((b >> 16) & 1)
    return (b >> 16) & 0xFFFF


def bits_value(b):
    return struct.unpack('<f', struct.pack('<I', b << 16))[0]


def order_key(b):
    if b == 0x8000:
        b = 0
    return (~b & 0xFFFF) if b & 0x8000 else (b | 0x8000)


def key_bits(k):
    return (k & 0x7FFF) if k & 0x8000 else (~k & 0xFFFF)


def shard_plan(seed, key, world, N):
    k = splitmix64(seed ^ splitmix64(((0x85 << 40) ^ key) & MASK))

    def draw(j, lo, hi):
        return lo + splitmix64((k + j) & MASK) % (hi - lo + 1)
    if key >= KEY_TIMED_BASE:
        return [N] * world, 0
    cls = 1 if key == KEY_POST_TIMING else key % 5
    ln = []
    for r in range(world):
        if cls in (0, 4):
            ln.append(N)
        elif cls == 1:
            ln.append(draw(r, 0, N))
        elif cls == 2:
            ln.append(0 if r % 2 else N)
        else:
            ln.append(draw(r, 0, N // 16))
    if cls == 3:
        ln[draw(100, 0, world - 1)] = N
    return ln, cls


def fill_shard(seed, key, rank, n, cls):
    vkey = splitmix64((seed ^ 0x8585 ^ (key << 20)) & MASK)
    out = []
    for i in range(n):
        r = splitmix64(vkey ^ (rank << 48) ^ i)
        if cls == 3:
            v = (-1.0, -0.0, 0.0, 0.0, 1.0, 2.5)[r % 6]
        elif cls == 4:
            v = 3.0
        else:
            v = float(r % 100 - 50 - rank * (n if n > 1 else 1))
        out.append(bf16_bits(v))
    return out


def target_range(rank, world, total):  # PKB _target_range
    base, extra = total // world, total % world
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def pkb_solution(shards, world):
    """PKB's solution() on every rank, values as floats; returns the outputs per rank."""
    sorted_local = [sorted(bits_value(b) for b in s) for s in shards]
    sizes = [len(s) for s in shards]  # _local_sizes
    active = [i for i, s in enumerate(sizes) if s > 0]
    if not active:
        return [[] for _ in range(world)]
    A = len(active)
    samples_all = []
    for rank in range(world):  # _extract_samples
        sr = active.index(rank) if rank in active else -1
        loc = sorted_local[rank]
        if sr < 0 or not loc:
            continue
        n = len(loc)
        valid = min(A, n)
        pos = [((j + 1) * n) // A - 1 for j in range(A)] if A < n else list(range(A))
        samples_all += [(loc[pos[j]], sr, pos[j]) for j in range(valid)]
    samples_all.sort(key=lambda t: (t[0], t[1], t[2]))  # _gather_splitters
    usable = len(samples_all)
    splitters = [samples_all[max(0, min((k + 1) * usable // A - 1, usable - 1))]
                 for k in range(A - 1)]
    send = [[[] for _ in range(world)] for _ in range(world)]
    for rank in range(world):  # _split_positions
        sr = active.index(rank) if rank in active else -1
        loc = sorted_local[rank]
        if sr < 0:
            continue
        bounds = [0]
        for value, srank, spos in splitters:
            if sr > srank:
                end = bisect.bisect_left(loc, value)
            elif sr < srank:
                end = bisect.bisect_right(loc, value)
            else:
                end = spos + 1
            bounds.append(max(bounds[-1], min(end, len(loc))))
        bounds.append(len(loc))
        for bucket, dest in enumerate(active):
            send[rank][dest] = loc[bounds[bucket]:bounds[bucket + 1]]
    merged = [sorted(sum((send[q][r] for q in range(world)), [])) for r in range(world)]
    msizes = [len(m) for m in merged]  # _redistribute_exact
    total = sum(msizes)
    outs = [[] for _ in range(world)]
    for q in range(world):
        bstart = sum(msizes[:q])
        for dest in range(world):
            ts, te = target_range(dest, world, total)
            a, b = max(bstart, ts), min(bstart + msizes[q], te)
            if a < b:
                outs[dest] += merged[q][a - bstart:b - bstart]
    return outs


def reference(shards, world, N):
    """problem.cu reference(): keys, samples packed, split_positions, two exchanges."""
    sizes = [len(s) for s in shards]
    keys = [sorted(order_key(b) for b in s) for s in shards]
    active = [q for q in range(world) if sizes[q] > 0]
    A = len(active)
    if A == 0:
        return [[0] * N for _ in range(world)], [0] * world
    samples = []
    for me in range(world):
        sr = active.index(me) if me in active else -1
        n = sizes[me]
        for j in range(A):
            v = -1
            if sr >= 0 and n > 0:
                pos = ((j + 1) * n) // A - 1 if A < n else (j if j < n else -1)
                if pos >= 0:
                    v = keys[me][pos] << 40 | sr << 32 | pos
            samples.append(v)
    samples = sorted(v for v in samples if v >= 0)
    usable = len(samples)
    splitters = [samples[max(0, min((k + 1) * usable // A - 1, usable - 1))] for k in range(A - 1)]
    send = [[[] for _ in range(world)] for _ in range(world)]
    for me in range(world):
        sr = active.index(me) if me in active else -1
        n = sizes[me]
        bounds = [0] * (A + 1)
        if sr >= 0 and A > 1:
            for k, sp in enumerate(splitters):
                key, srank, spos = sp >> 40, sp >> 32 & 0xFF, sp & 0xFFFFFFFF
                if sr == srank:
                    end = spos + 1
                else:
                    lo, hi = 0, n
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if (keys[me][mid] < key) if sr > srank else (keys[me][mid] <= key):
                            lo = mid + 1
                        else:
                            hi = mid
                    end = lo
                bounds[k + 1] = max(bounds[k], min(end, n))
        if sr >= 0:
            bounds[A] = n
        for k, dest in enumerate(active):
            if sr >= 0:
                send[me][dest] = keys[me][bounds[k]:bounds[k + 1]]
    merged = [sorted(sum((send[q][r] for q in range(world)), [])) for r in range(world)]
    msizes = [len(m) for m in merged]
    total = sum(msizes)
    finals = [[] for _ in range(world)]
    for q in range(world):
        bstart = sum(msizes[:q])
        base, extra = total // world, total % world
        for dest in range(world):
            ts = dest * base + min(dest, extra)
            te = ts + base + (1 if dest < extra else 0)
            a, b = max(bstart, ts), min(bstart + msizes[q], te)
            if a < b:
                finals[dest] += merged[q][a - bstart:b - bstart]
    outs = [[key_bits(k) for k in f] + [0] * (N - len(f)) for f in finals]
    return outs, [len(f) for f in finals]


def correct(xs, ns, world, N, variant='correct'):
    """solutions/correct.cu's encode, sort of N keys (past n: 0xffff) and place()."""
    cnt, sorted_keys = [], []
    for q in range(world):
        n = N if variant == 'equal_counts' else ns[q]
        keys = [order_key(xs[q][i]) if i < n else 0xFFFF for i in range(N)]
        sorted_keys.append(sorted(keys))
        cnt.append(n)
    total = sum(cnt)
    b, e = total // world, total % world
    tstart = [q * b + min(q, e) for q in range(world + 1)]
    outs = [[None] * N for _ in range(world)]
    for me in range(world):
        mine = tstart[me + 1] - tstart[me]
        for i in range(mine, N):
            outs[me][i] = 0
    for me in range(world):
        for i in range(cnt[me]):
            key = sorted_keys[me][i]
            g = i
            for q in range(world):
                if q == me:
                    continue
                ks = sorted_keys[q][:cnt[q]]
                upper = q < me and variant != 'ties'
                g += bisect.bisect_right(ks, key) if upper else bisect.bisect_left(ks, key)
            d = 0
            if variant == 'wrong':
                while d + 1 < world and tstart[d + 1] < g:
                    d += 1
            else:
                while d + 1 < world and tstart[d + 1] <= g:
                    d += 1
            pos = g - tstart[d]
            if pos < N:
                outs[d][pos] = key_bits(key)
    return outs, [tstart[q + 1] - tstart[q] for q in range(world)]


def same(out, want):  # tolerance 0, numerically (-0 == +0); None = never written
    return all(g is not None and bits_value(g) == bits_value(w) for g, w in zip(out, want))


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    rng = random.Random(85)
    ok = True
    names = ('wrong', 'ties', 'equal_counts')
    for world, N in ((2, 128), (4, 112), (8, 104)):  # N >= 100: PKB-like blocks disjoint
        fails = {n: [0] * 6 for n in names}
        counted = [0] * 6
        for call in range(5 * calls + 2):
            seed = rng.getrandbits(64)
            key = call if call < 5 * calls else (KEY_POST_TIMING if call == 5 * calls
                                                 else KEY_TIMED_BASE + rng.randrange(100))
            ns, cls = shard_plan(seed, key, world, N)
            slot = cls if key < KEY_POST_TIMING else 5
            counted[slot] += 1
            shards = [fill_shard(seed, key, r, ns[r], cls) for r in range(world)]
            xs = [s + [bf16_bits(rng.gauss(0, 1)) for _ in range(N - len(s))] for s in shards]
            pk = pkb_solution(shards, world)
            want = [[bf16_bits(v) for v in o] + [0] * (N - len(o)) for o in pk]
            want_n = [len(o) for o in pk]
            assert sorted(bits_value(b) for s in shards for b in s) == \
                [v for o in pk for v in o], 'PKB port does not sort'
            for name, (outs, cn) in (('reference', reference(shards, world, N)),
                                     ('correct', correct(xs, ns, world, N))):
                for q in range(world):
                    if not same(outs[q], want[q]) or cn[q] != want_n[q]:
                        print(f'MISMATCH {name} W={world} key={key} rank={q}')
                        ok = False
            for name in names:
                outs, cn = correct(xs, ns, world, N, name)
                bad = any(not same(outs[q], want[q]) or cn[q] != want_n[q] for q in range(world))
                fails[name][slot] += bad
        print(f'W={world} N={N}: PKB port sorts; reference and correct == PKB on every rank '
              f'({sum(counted)} calls)')
        for name in names:
            print(f'  {name:13s} fails per class 0..4, post/timed: '
                  + ' '.join(f'{f}/{c}' for f, c in zip(fails[name], counted)))
        exp = {'wrong': [1, 1, 1, 1, 1], 'ties': [0, None, None, 1, 1],
               'equal_counts': [0, 1, 1, 1, 0]}
        for name in names:
            for c in range(5):
                want_all = exp[name][c]
                if want_all is None:
                    continue
                if fails[name][c] != (counted[c] if want_all else 0):
                    print(f'  UNEXPECTED: {name} class {c}')
                    ok = False
    print('OK' if ok else 'FAILED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
