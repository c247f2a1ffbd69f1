#!/usr/bin/env python3
"""Host simulation of cuco/kv_cache_transfer (pure Python: no numpy, no torch).

K and V rows are symbols ('K', rank, row), the caches' old slots ('old', rank, block, slot), so
a cache slot is exactly what was written into it. Over calls of every length mode (trial keys
0-3, the call after timing, timed keys) at W = 2, 4, 8 and several seeds, it checks that
  - problem.cu's generator (kv_lens, kv_perm, table_kernel, ported) gives lengths that sum to
    T (modes 0-2, timed calls) or at most T (mode 3: one rank empty), pages in distinct blocks,
    padding entries in blocks no page uses, and the hard cases (empty sequences, ragged last
    pages, one long sequence, an empty rank);
  - the PyTorch reference (bench/pkb-crosscheck/local/cuco_kv_cache_transfer.py, solution(),
    ported line by line: the partner, x[:n] @ w, the batched send/recv, repeat_interleave,
    cumsum, the page and slot of every token, the indexed store),
  - problem.cu's reference() (host totals, the GEMMs of the used rows, the send/recv group,
    scatter_pages' binary search) and
  - solutions/correct.cu's pull_pages (the partner's staged rows, all T computed)
give the same caches on every rank; and counts the calls on which wrong.cu (whole pages only),
shortcut_whole_pages.cu and shortcut_assumed_equal_lengths.cu differ from it (expected: never in
trial 0, always in trials 1-3, failing_trial 1 in solutions/expected.json).
Usage: python3 bench/pkb/sim_cuco_kv_cache_transfer.py [seeds]"""
import math
import sys

MASK = (1 << 64) - 1
KEY_POST_TIMING = 1 << 20
KEY_TIMED_BASE = 1 << 21


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
    s = 0.0
    big = 0
    for j in range(len(w)):
        s += w[j]
        big = j if w[j] > w[big] else big
    out = [math.floor(total * (x / s)) for x in w]
    out[big] += total - sum(out)
    return out


def kv_lens(seed, key, q, W, B, T, BS):  # problem.cu kv_lens
    base = splitmix64(seed ^ splitmix64((0x6B766300 + key) & MASK))
    rb = splitmix64(base ^ (0x100 + q))
    total = T
    if key >= KEY_TIMED_BASE:
        mode = (key + q) % 3
    else:
        mode = 1 if key == KEY_POST_TIMING else key % 4
    ln = [0] * B
    if mode == 3:
        if q == draw(base, 1) % W:
            return ln
        total = T // 2 + draw(rb, 2) % (T // 2 + 1)
        mode = 1
    if mode == 0:
        ln = [total // B] * B
        ln[B - 1] += total % B
    elif mode == 1:
        w = [0.0 if unit(rb, 10 + b) < 0.25 else math.exp(3.0 * unit(rb, 100 + b))
             for b in range(B)]
        w[draw(rb, 3) % B] += 1.0
        ln = apportion(total, w)
    else:
        big = draw(rb, 4) % B
        rest = 0
        for b in range(B):
            if b == big:
                continue
            ln[b] = 0 if unit(rb, 200 + b) < 0.3 else draw(rb, 300 + b) % (2 * BS)
            rest += ln[b]
        ln[big] = total - rest
    return ln


def kv_perm(seed, key, q, NB):  # problem.cu kv_perm
    base = splitmix64(seed ^ splitmix64((0x6B767400 + key) & MASK))
    rb = splitmix64(base ^ (0x100 + q))
    a = 1 + draw(rb, 1) % NB
    while math.gcd(a, NB) != 1:
        a = a % NB + 1
    return a, draw(rb, 2) % NB


def table(ln, perm, B, MB, BS, NB):  # problem.cu table_kernel
    pre = [0]
    for b in range(B):
        pre.append(pre[-1] + (ln[b] + BS - 1) // BS)
    P = pre[B]
    a, c = perm
    t = []
    for e in range(B * MB):
        b, m = e // MB, e % MB
        j = pre[b] + m if m < pre[b + 1] - pre[b] else P + e % (NB - P)
        t.append((a % NB * j + c) % NB)
    return t


def inputs(seed, key, W, d):
    T, B, BS, MB, NB = d["T"], d["B"], d["BS"], d["MB"], d["NB"]
    lens = [kv_lens(seed, key, q, W, B, T, BS) for q in range(W)]
    tabs = [table(lens[q], kv_perm(seed, key, q, NB), B, MB, BS, NB) for q in range(W)]
    return lens, tabs


def old_cache(W, d):
    return [{(blk, s): ('old', r, blk, s) for blk in range(d["NB"]) for s in range(d["BS"])}
            for r in range(W)]


def local_reference(lens, tabs, W, d):
    """bench/pkb-crosscheck/local/cuco_kv_cache_transfer.py solution(), on every rank."""
    BS = d["BS"]
    caches = old_cache(W, d)
    sent = {}
    for rank in range(W):  # k = x[:n] @ w_k: row t of rank's K is ('K', rank, t)
        partner = (rank + W // 2) % W
        n = sum(lens[rank])
        sent[(rank, partner)] = [('K', rank, t) for t in range(n)]  # isend k (and v)
    for rank in range(W):
        partner = (rank + W // 2) % W
        peer_lens = lens[partner]  # the partner's seq_lens (generate(): side 1)
        m = sum(peer_lens)
        recv_k = sent[(partner, rank)]  # irecv from the partner
        assert len(recv_k) == m
        if m == 0:
            continue
        seq = [b for b in range(len(peer_lens)) for _ in range(peer_lens[b])]  # repeat_interleave
        cs, acc = [], 0
        for v in peer_lens:
            acc += v
            cs.append(acc)
        starts = [cs[b] - peer_lens[b] for b in range(len(peer_lens))]  # cumsum - lens
        tok = [i - starts[seq[i]] for i in range(m)]
        page = [tabs[partner][seq[i] * d["MB"] + tok[i] // BS] for i in range(m)]
        for i in range(m):  # k_cache[page, tok % bs] = recv_k
            caches[rank][(page[i], tok[i] % BS)] = recv_k[i]
    return caches


def search(start, B, t):  # scatter_pages / pull_pages: the last b with start[b] <= t
    lo, hi = 0, B - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if start[mid] <= t:
            lo = mid
        else:
            hi = mid - 1
    return lo


def pull(lens, tabs, W, d, variant):
    """problem.cu reference() (variant 'ref': the partner's n used rows sent, the host totals)
    and the solutions' pull_pages (all T rows staged): correct, wrong, whole, equal."""
    T, B, BS, MB, NB = d["T"], d["B"], d["BS"], d["MB"], d["NB"]
    caches = old_cache(W, d)
    for r in range(W):
        p = (r + W // 2) % W
        plen = lens[p]
        if variant == 'ref':
            n_p = sum(plen)  # the partner's host total: its GEMMs cover rows [0, n_p)
            assert n_p <= T
            rows = [('K', p, t) for t in range(n_p)]
        else:
            rows = [('K', p, t) for t in range(T)]  # all T rows staged by the partner
        table_p = tabs[p]
        eff = [T // B] * B if variant == 'equal' else plen
        start = [0]
        for b in range(B):
            start.append(start[-1] + eff[b])
        if variant == 'whole':
            pre = [0]
            for b in range(B):
                pre.append(pre[-1] + (plen[b] + BS - 1) // BS)
            for g in range(pre[B]):
                b = search(pre, B, g)
                m = g - pre[b]
                for slot in range(BS):
                    row = min(start[b] + m * BS + slot, T - 1)
                    page = min(max(table_p[b * MB + m], 0), NB - 1)
                    caches[r][(page, slot)] = rows[row]
            continue
        for t in range(start[B]):
            b = search(start, B, t)
            i = t - start[b]
            if variant == 'wrong' and i >= (start[b + 1] - start[b]) // BS * BS:
                continue
            page = min(max(table_p[b * MB + i // BS], 0), NB - 1)
            caches[r][(page, i % BS)] = rows[t]
    return caches


def check_inputs(lens, tabs, W, d, key, stats):
    T, B, BS, MB, NB = d["T"], d["B"], d["BS"], d["MB"], d["NB"]
    for q in range(W):
        ln, tb = lens[q], tabs[q]
        assert all(v >= 0 for v in ln) and all(v <= MB * BS for v in ln)
        tot = sum(ln)
        mode = 1 if key == KEY_POST_TIMING else (None if key >= KEY_TIMED_BASE else key % 4)
        if mode == 3:
            assert tot <= T
            stats["empty_rank"] += tot == 0
        else:
            assert tot == T, (key, q, tot)
        pages = []
        for b in range(B):
            np_ = (ln[b] + BS - 1) // BS
            pages += tb[b * MB: b * MB + np_]
        assert len(set(pages)) == len(pages), "two pages in one block"
        assert len(pages) <= T // BS + B < NB
        used = set(pages)
        for b in range(B):
            np_ = (ln[b] + BS - 1) // BS
            for m in range(np_, MB):
                assert tb[b * MB + m] not in used, "padding names a used block"
        assert all(0 <= v < NB for v in tb)
        stats["zero_seq"] += any(v == 0 for v in ln) and tot > 0
        stats["ragged"] += any(v % BS for v in ln)
        stats["long"] += max(ln) * 2 > T


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    shapes = [dict(T=512, H=0, D=0, B=8, BS=16, MB=32, NB=64),
              dict(T=8192, H=4096, D=1024, B=32, BS=16, MB=512, NB=1024)]
    keys = [0, 1, 2, 3, 4, KEY_POST_TIMING, KEY_TIMED_BASE, KEY_TIMED_BASE + 1, KEY_TIMED_BASE + 2]
    fails = {v: {} for v in ('wrong', 'whole', 'equal')}
    calls = 0
    stats = {"empty_rank": 0, "zero_seq": 0, "ragged": 0, "long": 0}
    for si, d in enumerate(shapes):
        for W in (2, 4, 8):
            for s in range(seeds if si == 0 else max(1, seeds // 3)):
                seed = splitmix64(0xC0C0 + 977 * s + W)
                for key in keys:
                    lens, tabs = inputs(seed, key, W, d)
                    check_inputs(lens, tabs, W, d, key, stats)
                    want = local_reference(lens, tabs, W, d)
                    for variant in ('ref', 'correct'):
                        got = pull(lens, tabs, W, d, variant)
                        assert got == want, (variant, W, s, key)
                    for variant in fails:
                        bad = pull(lens, tabs, W, d, variant) != want
                        k = key if key <= 4 else ('post' if key == KEY_POST_TIMING else 'timed')
                        c = fails[variant].setdefault(k, [0, 0])
                        c[0] += bad
                        c[1] += 1
                    calls += 1
    print("calls: %d (W = 2, 4, 8; T = 512 and 8192); reference, correct == local PyTorch "
          "reference on every call" % calls)
    print("hard cases: rank with nothing to send %(empty_rank)d, rank with an empty sequence "
          "%(zero_seq)d, rank with a ragged last page %(ragged)d, one sequence > T/2 %(long)d"
          % stats)
    for v, by in fails.items():
        print("%-6s differs: %s" % (v, ", ".join("key %s %d/%d" % (k, a, n)
                                                  for k, (a, n) in by.items())))
    ok = all(fails[v][0][0] == 0 and all(fails[v][k][0] == fails[v][k][1]
                                         for k in (1, 2, 3, 'post')) for v in fails)
    print("expected.json (passes trial 0, fails from trial 1): %s" % ("holds" if ok else "FAILS"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
