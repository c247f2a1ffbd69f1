#!/usr/bin/env python3
"""Host simulation of pkb/29_moe_post_all2all's index arithmetic (pure Python, no GPU).

Rows are symbols (rank, row) and weights are distinct numbers, so an output token is the exact
multiset {(weight, row)} it combines. Over random calls at W = 2, 4, 8 with the generator's hard
cases (balanced / hot + empty expert / a rank routing nothing to one rank's experts; split
matrices built from permutations, with zeros; empty (source, expert) chunks; unsorted slots), it
checks that
  - problem.cu's reference (chunk table, send/recv offsets, per-position weights) and
  - solutions/correct.cu's pull (inv, in_off, pre/start tables)
give PKB's result (a line-by-line port of 29_moe_post_all2all.py's solution()), and counts the
calls on which wrong.cu, shortcut_assumed_equal_splits.cu and shortcut_assumed_sorted_experts.cu
differ from it (each must differ where expected.json says they fail).
Usage: python3 bench/pkb/sim_29_moe_post_all2all.py [calls_per_W]"""
import random
import sys


def apportion(total, w):
    s = sum(w)
    out = [int(total * x / s) for x in w]
    out[max(range(len(w)), key=lambda j: w[j])] += total - sum(out)
    return out


def make_call(rng, W, E, K, M, mode):
    El = E // W
    T = K * M
    # routing: K distinct experts per token, in draw (slot) order
    hot, empty = rng.sample(range(E), 2)
    sel, wts = [], []
    for g in range(W):
        wg = [1.0] * E
        if mode == 1:
            wg = [2.718 ** (4 * rng.random()) for _ in range(E)]
        elif mode == 2:
            wg = [20.0 * E if e == hot else 0.0 if e == empty else 1.0 for e in range(E)]
        elif mode == 3:
            wg = [2.718 ** (4 * rng.random()) for _ in range(E)]
            q = rng.randrange(W)
            if E - El >= K:
                for e in range(q * El, (q + 1) * El):
                    wg[e] = 0.0
        sg, ww = [], []
        for m in range(M):
            ex, left = [], list(wg)
            for _ in range(K):
                e = rng.choices(range(E), weights=left)[0]
                ex.append(e)
                left[e] = 0.0
            sg.append(ex)
            ww.append([rng.random() + 0.001 for _ in range(K)])
        sel.append(sg)
        wts.append(ww)
    rmap = [[[1 if e in sel[g][m] else 0 for m in range(M)] for e in range(E)] for g in range(W)]
    mapping = [[m for e in range(E) for m in range(M) if rmap[g][e][m]] for g in range(W)]
    # splits S[i][j]: rows i sent j in the dispatch; rows and columns sum to T
    if mode == 0:
        S = [[T // W] * W for _ in range(W)]
    else:
        perms = 2 if mode == 1 else 1 if mode == 2 else W
        c = apportion(T, [2.718 ** (4 * rng.random()) for _ in range(perms)])
        S = [[0] * W for _ in range(W)]
        for p in range(perms):
            pr = list(range(W))
            rng.shuffle(pr)
            for i in range(W):
                S[i][pr[i]] += c[p]
    tpe = []  # tpe[g][s][l]: rows rank g got from s for its local expert l
    for g in range(W):
        tg = []
        for s in range(W):
            if mode == 0:
                n = S[s][g]
                tg.append([n // El + (1 if l < n % El else 0) for l in range(El)])
            else:
                w = [0.0 if rng.random() < 0.3 else 2.718 ** (3 * rng.random()) for _ in range(El)]
                w[rng.randrange(El)] += 1.0
                tg.append(apportion(S[s][g], w))
        tpe.append(tg)
    eo = [[(g, i) for i in range(T)] for g in range(W)]  # expert_outputs rows as symbols
    return dict(W=W, E=E, K=K, M=M, El=El, T=T, sel=sel, wts=wts, rmap=rmap, mapping=mapping,
                S=S, tpe=tpe, eo=eo)


def pkb(c):
    """29_moe_post_all2all.py's solution() on every rank, list for list."""
    W, E, El, M, K = c["W"], c["E"], c["El"], c["M"], c["K"]
    send = []
    for g in range(W):
        sizes = [c["tpe"][g][s][l] for l in range(El) for s in range(W)]  # ngtpl.T.ravel()
        chunks, o = [], 0
        for n in sizes:
            chunks.append(c["eo"][g][o:o + n])
            o += n
        order = [l * W + s for s in range(W) for l in range(El)]  # arange(E).reshape(El,-1).T
        send.append([row for i in order for row in chunks[i]])
    ins = [[c["S"][g][p] for p in range(W)] for g in range(W)]
    outs = [[c["S"][p][g] for p in range(W)] for g in range(W)]
    recv = [[] for _ in range(W)]
    for g in range(W):  # all_to_all_single(output_split_sizes=ins, input_split_sizes=outs)
        for p in range(W):
            off = sum(outs[p][:g])
            blk = send[p][off:off + outs[p][g]]
            assert len(blk) == ins[g][p]
            recv[g] += blk
    res = []
    for g in range(W):
        widx = [[0.0] * E for _ in range(M)]
        for m in range(M):
            for k in range(K):
                widx[m][c["sel"][g][m][k]] += c["wts"][g][m][k]
        tw = [widx[m][e] for e in range(E) for m in range(M) if c["rmap"][g][e][m]]
        out = [[] for _ in range(M)]
        for i, m in enumerate(c["mapping"][g]):
            out[m].append((tw[i], recv[g][i]))
        res.append([sorted(x) for x in out])
    return res


def reference(c):
    """problem.cu's reference(): chunk table, send/recv offsets, position weights."""
    W, E, El, M, K, T = c["W"], c["E"], c["El"], c["M"], c["K"], c["T"]
    send = []
    for g in range(W):
        tpe = [c["tpe"][g][s][l] for s in range(W) for l in range(El)]  # the argument, [s][l]
        first, acc = [0] * E, 0
        for l in range(El):
            for s in range(W):
                first[l * W + s] = acc
                acc += tpe[s * El + l]
        buf = []
        for s in range(W):
            for l in range(El):
                buf += c["eo"][g][first[l * W + s]:first[l * W + s] + tpe[s * El + l]]
        assert len(buf) == T
        send.append(buf)
    recv = [[None] * T for _ in range(W)]
    for g in range(W):
        ins = [c["S"][g][p] for p in range(W)]
        outs = [c["S"][p][g] for p in range(W)]
        out_off = [sum(outs[:p]) for p in range(W)]
        for p in range(W):  # g sends outs[p] rows from out_off[p] to p; p puts them at in_off
            p_in_off = sum(c["S"][p][:g])
            recv[p][p_in_off:p_in_off + outs[p]] = send[g][out_off[p]:out_off[p] + outs[p]]
        del ins
    res = []
    for g in range(W):
        cnt = [sum(c["rmap"][g][e]) for e in range(E)]
        first = [sum(cnt[:e]) for e in range(E + 1)]
        out = [[] for _ in range(M)]
        for i in range(T):
            e = 0
            while e + 1 < E and i >= first[e + 1]:
                e += 1
            m = c["mapping"][g][i]
            v = sum(c["wts"][g][m][k] for k in range(K) if c["sel"][g][m][k] == e)
            out[m].append((v, recv[g][i]))
        res.append([sorted(x) for x in out])
    return res


def pull(c, variant="correct"):
    """solutions/correct.cu's combine (and its wrong / shortcut variants)."""
    W, E, El, M, K, T = c["W"], c["E"], c["El"], c["M"], c["K"], c["T"]
    res = []
    for r in range(W):
        tpe = [[c["tpe"][p][s][l] for s in range(W) for l in range(El)] for p in range(W)]
        if variant == "equal_splits":
            tpe = [[T // E + (1 if j < T % E else 0) for j in range(E)] for p in range(W)]
        start = [[0] * El for _ in range(W)]
        pre = [[0] * (El + 1) for _ in range(W)]
        for p in range(W):
            o = q = 0
            if variant == "wrong":
                o = sum(tpe[p][s * El + l] for s in range(r) for l in range(El))
                for l in range(El):
                    start[p][l] = o
                    o += tpe[p][r * El + l]
                    pre[p][l] = q
                    q += tpe[p][r * El + l]
            else:
                for l in range(El):
                    start[p][l] = o + sum(tpe[p][s * El + l] for s in range(r))
                    o += sum(tpe[p][s * El + l] for s in range(W))
                    pre[p][l] = q
                    q += tpe[p][r * El + l]
            pre[p][El] = q
        splits = [c["S"][r][p] for p in range(W)]
        if variant == "equal_splits":
            splits = [T // W] * W
        in_off = [sum(splits[:p]) for p in range(W + 1)]
        cnt = [sum(c["rmap"][r][e]) for e in range(E)]
        first = [sum(cnt[:e]) for e in range(E + 1)]
        inv = {}
        for i in range(T):
            e = 0
            while e + 1 < E and i >= first[e + 1]:
                e += 1
            m = c["mapping"][r][i]
            if variant == "sorted":
                inv[(m, sum(c["rmap"][r][f][m] for f in range(e)))] = i
            else:
                for k in range(K):
                    if c["sel"][r][m][k] == e:
                        inv[(m, k)] = i
        out = []
        for m in range(M):
            terms = []
            for k in range(K):
                i = inv[(m, k)]
                p = 0
                while p + 1 < W and i >= in_off[p + 1]:
                    p += 1
                q = i - in_off[p]
                l = 0
                while l + 1 < El and q >= pre[p][l + 1]:
                    l += 1
                row = start[p][l] + q - pre[p][l]
                terms.append((c["wts"][r][m][k], c["eo"][p][row] if 0 <= row < T else None))
            out.append(sorted(terms, key=repr))
        res.append([sorted(x, key=repr) for x in out])
    return res


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    rng = random.Random(29)
    bad = 0
    stats = {}
    for W in (2, 4, 8):
        for call in range(n):
            mode = call % 4
            c = make_call(rng, W, 8, 2, 40, mode)
            want = pkb(c)
            norm = lambda res: [[sorted(t, key=repr) for t in rk] for rk in res]
            want_n = norm(want)
            if norm(reference(c)) != want_n:
                bad += 1
                print("reference differs from PKB: W=%d mode=%d" % (W, mode))
            if norm(pull(c)) != want_n:
                bad += 1
                print("correct.cu's pull differs from PKB: W=%d mode=%d" % (W, mode))
            zero = any(c["S"][i][j] == 0 for i in range(W) for j in range(W))
            empty = any(sum(c["rmap"][g][e]) == 0 for g in range(W) for e in range(8))
            stats.setdefault(("zero split", W), 0)
            stats[("zero split", W)] += zero
            stats.setdefault(("empty expert", W), 0)
            stats[("empty expert", W)] += empty
            for v in ("wrong", "equal_splits", "sorted"):
                key = (v, W, mode)
                stats.setdefault(key, 0)
                stats[key] += norm(pull(c, v)) != want_n
    for k in sorted(stats, key=repr):
        print("%-40s %d of %d" % (k, stats[k], n if k[0] in ("zero split", "empty expert")
                                  else (n + 3 - k[2]) // 4))
    print("FAIL" if bad else "OK: reference and correct.cu's pull reproduce PKB in every call")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
