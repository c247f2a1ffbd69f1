#!/usr/bin/env python3
"""Host simulation of the index arithmetic of pkb/36-38 (the Ulysses layout problems), no GPU.

PKB's solution() of each problem is transcribed op by op onto a small row-major tensor
(tensor_split, all_to_all, cat, view, pad, the unpadding slice, Python's slice(0, -0) included),
and every kernel's index formula is transcribed from the .cu files: the references' pack and
unpack kernels (problems/include/pk_ulysses.cuh, 37's problem.cu), correct.cu, wrong.cu and the
shortcut twin. Each is judged as the problem's check() judges it (the first n elements, bit for
bit; what a kernel leaves unwritten holds the harness's poison) at W = 2, 4, 8, over the
params the meta.json expressions give trials 0-5, the call checked after timing and timed calls
(evaluated here with the same integer semantics). Expected: reference and correct.cu equal
PKB's everywhere; wrong.cu fails in every call; the twin passes PKB's own calls (trials 0, 3) and
fails in every other; for 37, a kernel that leaves the zero padding unwritten fails wherever
there is padding. Vectors of 8 bf16 are one element here (the kernels index 16-byte
vectors; D counts vectors). Exits non-zero on any disagreement."""
import json
import os
import re
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
POISON = "poison"


class T:
    """A row-major tensor: shape and a flat list."""

    def __init__(self, shape, data):
        n = 1
        for s in shape:
            n *= s
        assert len(data) == n, (shape, len(data))
        self.shape, self.data = tuple(shape), list(data)

    def strides(self):
        st, acc = [], 1
        for s in reversed(self.shape):
            st.append(acc)
            acc *= s
        return list(reversed(st))

    def view(self, shape):
        return T(shape, self.data)

    def index_iter(self):
        idx = [0] * len(self.shape)
        for _ in range(len(self.data)):
            yield tuple(idx)
            for d in reversed(range(len(idx))):
                idx[d] += 1
                if idx[d] < self.shape[d]:
                    break
                idx[d] = 0

    def at(self, idx):
        return self.data[sum(i * s for i, s in zip(idx, self.strides()))]

    def narrow(self, dim, start, stop):
        shape = list(self.shape)
        shape[dim] = stop - start
        out = T(shape, [None] * (len(self.data) // self.shape[dim] * (stop - start)
                                 if self.shape[dim] else 0))
        out.data = [self.at(tuple(i if d != dim else i + start for d, i in enumerate(idx)))
                    for idx in out.index_iter()]
        return out


def py_slice_stop(n, stop):
    """Python's slice(0, stop) on a dim of n: negative stops count from the end, -0 is 0."""
    return max(0, n + stop) if stop < 0 else min(stop, n)


def tensor_split(x, parts, dim):
    assert x.shape[dim] % parts == 0, "PKB's all_to_all needs equal chunks"
    c = x.shape[dim] // parts
    return [x.narrow(dim, j * c, (j + 1) * c) for j in range(parts)]


def cat(ts, dim):
    shape = list(ts[0].shape)
    shape[dim] = sum(t.shape[dim] for t in ts)
    out = T(shape, [None] * (len(ts[0].data) // max(ts[0].shape[dim], 1) * shape[dim]))
    bounds, acc = [], 0
    for t in ts:
        bounds.append(acc)
        acc += t.shape[dim]
    data = []
    for idx in out.index_iter():
        k = max(j for j, b in enumerate(bounds) if b <= idx[dim] and ts[j].shape[dim] > 0)
        data.append(ts[k].at(tuple(i if d != dim else i - bounds[k] for d, i in enumerate(idx))))
    out.data = data
    return out


def all_to_all_cat(xs, scatter_dim, gather_dim):
    """PKB's _all_to_all on every rank at once: tensor_split, dist.all_to_all, cat."""
    w = len(xs)
    ins = [tensor_split(x, w, scatter_dim) for x in xs]
    return [cat([ins[q][r] for q in range(w)], gather_dim) for r in range(w)]


def pkb_unpad(x, seq_dim, unpadded, w):
    if unpadded and unpadded % w != 0:
        pad = x.shape[seq_dim] - unpadded
        return x.narrow(seq_dim, 0, py_slice_stop(x.shape[seq_dim], -pad))
    return x


def pkb_36(xs, w, unpadded):
    return [pkb_unpad(y, 1, unpadded, w) for y in all_to_all_cat(xs, 2, 1)]


def pkb_37(xs, w):
    t = xs[0].shape[1]
    if t % w:
        pads = []
        for x in xs:
            shape = list(x.shape)
            shape[1] = w - t % w
            pads.append(cat([x, T(shape, [0.0] * (len(x.data) // t * shape[1]))], 1))
        xs = pads
    return all_to_all_cat(xs, 1, 2)


def pkb_38(xs, w, unpadded):
    b, s, f = xs[0].shape
    views = [x.view((b, s, 3, f // 3)) for x in xs]
    ys = all_to_all_cat(views, 3, 1)
    ys = [y.view((b, s * w, f // w)) for y in ys]
    return [pkb_unpad(y, 1, unpadded, w) for y in ys]


# ---- the params of meta.json, evaluated like problems/src/expr.c (C integer semantics) ----
def c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a, b):
    return a - c_div(a, b) * b


def eval_expr(text, names):
    tokens = re.findall(r"\d+|[A-Za-z_]\w*|[()+\-*/%]", text)
    pos = [0]

    def atom():
        tok = tokens[pos[0]]
        pos[0] += 1
        if tok == "(":
            v = total()
            pos[0] += 1
            return v
        if tok == "-":
            return -atom()
        return int(tok) if tok.isdigit() else names[tok]

    def product():
        v = atom()
        while pos[0] < len(tokens) and tokens[pos[0]] in "*/%":
            op = tokens[pos[0]]
            pos[0] += 1
            r = atom()
            v = v * r if op == "*" else c_div(v, r) if op == "/" else c_mod(v, r)
        return v

    def total():
        v = product()
        while pos[0] < len(tokens) and tokens[pos[0]] in "+-":
            op = tokens[pos[0]]
            pos[0] += 1
            r = product()
            v = v + r if op == "+" else v - r
        return v

    return total()


def meta(pid):
    with open(os.path.join(SRC, "problems", "pkb", pid, "meta.json")) as f:
        return json.load(f)


KEYS = list(range(6)) + [1 << 20] + [(1 << 21) + i for i in range(5)]


def param(pid, name, dims, w, key):
    names = dict(dims, world=w, trial=key)
    return eval_expr(meta(pid)["params"][name], names)


# ---- the kernels, transcribed (one element stands for one 16-byte vector) ----
def run_items(n, item):
    return [item(o) for o in range(n)]


def useq_of(u, w, s):
    return u if u and u % w else w * s


def k36_reference(xs, r, w, B, S, H, Dv, u):
    hw, fgv = H // w, H * Dv
    cwv = hw * Dv
    per = B * S * cwv
    sends = []
    for q in range(w):  # pk_uly_pack_features on rank q
        send = [POISON] * (per * w)
        for o in range(per * w):
            qq, e = o // per, o % per
            c, rg = e % cwv, e // cwv
            if qq != q:
                send[o] = xs[q][rg * fgv + qq * cwv + c]
        sends.append(send)
    recv = [sends[q][r * per:(r + 1) * per] if q != r else [POISON] * per for q in range(w)]
    useq = useq_of(u, w, S)
    row_vecs = cwv

    def item(o):  # pk_uly_unpack_seq, G = 1
        v, t, b = o % row_vecs, (o // row_vecs) % useq, o // row_vecs // useq
        q, row, g, c = t // S, b * S + t % S, v // cwv, v % cwv
        return xs[r][(row * 1 + g) * fgv + r * cwv + c] if q == r else recv[q][row * row_vecs + v]
    return run_items(B * useq * row_vecs, item)


def k36_pull(xs, r, w, B, S, H, Dv, u, variant):
    useq = w * S if variant == "twin" else useq_of(u, w, S)
    in_vecs, row_vecs = H * Dv, H // w * Dv

    def item(o):
        c, t, b = o % row_vecs, (o // row_vecs) % useq, o // row_vecs // useq
        blk = t // S if variant == "wrong" else r
        return xs[t // S][blk * row_vecs + (b * S + t % S) * in_vecs + c]
    return run_items(B * useq * row_vecs, item)


def k38_reference(xs, r, w, B, S, H, Dv, u):
    G, fgv = 3, H * Dv
    cwv = fgv // w
    per = B * S * G * cwv
    sends = []
    for q in range(w):
        send = [POISON] * (per * w)
        for o in range(per * w):
            qq, e = o // per, o % per
            c, rg = e % cwv, e // cwv
            if qq != q:
                send[o] = xs[q][rg * fgv + qq * cwv + c]
        sends.append(send)
    recv = [sends[q][r * per:(r + 1) * per] if q != r else [POISON] * per for q in range(w)]
    useq = useq_of(u, w, S)
    row_vecs = G * cwv

    def item(o):
        v, t, b = o % row_vecs, (o // row_vecs) % useq, o // row_vecs // useq
        q, row, g, c = t // S, b * S + t % S, v // cwv, v % cwv
        return (xs[r][(row * G + g) * fgv + r * cwv + c] if q == r
                else recv[q][row * row_vecs + v])
    return run_items(B * useq * row_vecs, item)


def k38_pull(xs, r, w, B, S, H, Dv, u, variant):
    useq = w * S if variant == "twin" else useq_of(u, w, S)
    hd_vecs = H * Dv
    cvecs = hd_vecs // w
    row_vecs = 3 * cvecs
    base = r * 3 * cvecs if variant == "wrong" else r * cvecs

    def item(o):
        e, t, b = o % row_vecs, (o // row_vecs) % useq, o // row_vecs // useq
        if variant == "wrong":
            return xs[t // S][base + (b * S + t % S) * 3 * hd_vecs + e]
        k, c = e // cvecs, e % cvecs
        return xs[t // S][base + ((b * S + t % S) * 3 + k) * hd_vecs + c]
    return run_items(B * useq * row_vecs, item)


def k37_reference(xs, r, w, B, seq, H, Dv):
    tw = (seq + w - 1) // w
    row_vecs = H * Dv
    per = B * tw * row_vecs
    sends = []
    for q in range(w):  # pack_seq on rank q
        send = [POISON] * (per * w)
        for o in range(per * w):
            qq, e = o // per, o % per
            v, s, b = e % row_vecs, (e // row_vecs) % tw, e // row_vecs // tw
            pos = qq * tw + s
            if qq != q:
                send[o] = xs[q][(b * seq + pos) * row_vecs + v] if pos < seq else 0.0
        sends.append(send)
    recv = [sends[q][r * per:(r + 1) * per] if q != r else [POISON] * per for q in range(w)]

    def item(o):  # unpack_heads
        v, q, bs = o % row_vecs, (o // row_vecs) % w, o // row_vecs // w
        pos = r * tw + bs % tw
        if q != r:
            return recv[q][bs * row_vecs + v]
        return xs[r][((bs // tw) * seq + pos) * row_vecs + v] if pos < seq else 0.0
    return run_items(per * w, item)


def k37_pull(xs, r, w, B, seq, H, Dv, variant):
    tw = seq // w if variant == "twin" else (seq + w - 1) // w
    row_vecs = H * Dv

    def item(o):
        if variant == "wrong":
            e, bs = o % (w * row_vecs), o // (w * row_vecs)
            hh = e // Dv
            q, c = hh % w, hh // w * Dv + e % Dv
        else:
            c, q, bs = o % row_vecs, (o // row_vecs) % w, o // row_vecs // w
        pos = r * tw + bs % tw
        if pos >= seq:  # "nopad": a kernel that leaves the padding unwritten (poison)
            return POISON if variant == "nopad" else 0.0
        return xs[q][((bs // tw) * seq + pos) * row_vecs + c]
    return run_items(B * tw * w * row_vecs, item)


def judge(want, got):
    """check(): the first len(want) elements bit for bit; unwritten ones hold the poison."""
    got = got + [POISON] * max(0, len(want) - len(got))
    return got[:len(want)] == want


def inputs(w, shape, tag):
    n = 1
    for s in shape:
        n *= s
    return [[(tag, q, i) for i in range(n)] for q in range(w)]


def main():
    fails, calls = [], 0

    def judge_call(tag, want, run, pkb_case, extra=()):
        """One call at world w: the verdict is correct only if every rank's output passes."""
        nonlocal calls
        calls += 1
        for name, expect_all in (("reference", True), ("ok", True), ("wrong", False),
                                 ("twin", pkb_case)) + tuple(extra):
            ranks = [judge(want[r], run(r, name)) for r in range(len(want))]
            if all(ranks) != expect_all:
                fails.append("%s %s: ranks passing %s, expected the call %s" % (
                    tag, name, ranks, "correct" if expect_all else "incorrect"))

    for w in (2, 4, 8):
        # 36: (B, S, H, D); dims small but with B >= 2, H % W == 0.
        pid = "36_ulysses_gather_seq_scatter_heads"
        B, S, H, Dv = 2, 3, 8, 2
        for key in KEYS:
            u = param(pid, "unpadded_dim_size", {"B": B, "S": S, "H": H, "D": 8 * Dv}, w, key)
            xs = inputs(w, (B, S, H, Dv), 36)
            want = [y.data for y in pkb_36([T((B, S, H, Dv), x) for x in xs], w, u)]
            judge_call("36 W=%d key=%d unpadded=%d" % (w, key, u), want,
                       lambda r, v: k36_reference(xs, r, w, B, S, H, Dv, u) if v == "reference"
                       else k36_pull(xs, r, w, B, S, H, Dv, u, v),
                       key % 3 == 0 and key < (1 << 20))
        # 38: (B, S, 3 H D).
        pid = "38_ulysses_gather_seq_scatter_heads_qkv"
        B, S, H, Dv = 2, 3, 8, 1
        for key in KEYS:
            u = param(pid, "unpadded_dim_size", {"B": B, "S": S, "H": H, "D": 8 * Dv}, w, key)
            xs = inputs(w, (B, S, 3 * H * Dv), 38)
            want = [y.data for y in pkb_38([T((B, S, 3 * H * Dv), x) for x in xs], w, u)]
            judge_call("38 W=%d key=%d unpadded=%d" % (w, key, u), want,
                       lambda r, v: k38_reference(xs, r, w, B, S, H, Dv, u) if v == "reference"
                       else k38_pull(xs, r, w, B, S, H, Dv, u, v),
                       key % 3 == 0 and key < (1 << 20))
        # 37: (B, seq, H, D) in a (B, T, H, D) capacity; T % 8 == 0, small.
        pid = "37_ulysses_gather_heads_scatter_seq"
        B, Tcap, H, Dv = 2, 16, 3, 2
        for key in KEYS:
            seq = param(pid, "seq", {"B": B, "T": Tcap, "H": H, "D": 8 * Dv}, w, key)
            assert 1 <= seq <= Tcap
            xs = inputs(w, (B, seq, H, Dv), 37)
            want = [y.data for y in pkb_37([T((B, seq, H, Dv), x) for x in xs], w)]
            assert all(len(y) <= B * Tcap * H * Dv for y in want)  # fits y's capacity
            judge_call("37 W=%d key=%d seq=%d" % (w, key, seq), want,
                       lambda r, v: k37_reference(xs, r, w, B, seq, H, Dv) if v == "reference"
                       else k37_pull(xs, r, w, B, seq, H, Dv, v),
                       key % 3 == 0 and key < (1 << 20), [("nopad", seq % w == 0)])
    for f in fails[:40]:
        print("FAIL", f)
    print("%d calls (reference, correct.cu, wrong.cu, shortcut twin each; 37 unwritten padding "
          "too), %d disagreements"
          % (calls, len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
