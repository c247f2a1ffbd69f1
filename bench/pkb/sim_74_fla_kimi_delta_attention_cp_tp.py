#!/usr/bin/env python3
"""Host simulation of pkb/74_fla_kimi_delta_attention_cp_tp (plain Python, no numpy or torch).

At small dims (Ls = 8, H = 3, Dk = Dv = 8) and W = 2, 4, 8 (tp = 1, 2, 2; cp = 2, 2, 4), under
every input regime (emulated: rn_values.h's shapes with Python's random):

1. PKB's solution() ported line by line: the groups of its generator (_build_tp_cp_groups(2) at
   W >= 4: TP pairs {2c, 2c+1}, CP sets {t, t+2, ...}; the world as CP group at W = 2),
   _all_gather_sequence (batch 1: the CP ranks' tokens in CP order), _kda_forward over the whole
   sequence, the TP all_reduce and the slice of this rank's tokens, in float64; against it, with
   the same float64 recurrence, problem.cu's reference (the all-gather on the CP communicator
   split with color rank % tp, the recurrence up to the end of this rank's tokens writing only
   them, the TP all-reduce on the communicator split with color rank / tp) and correct.cu (the
   pull from rank (s / Ls) tp + tp_rank, the recurrence, the sum with the partner rank ^ 1),
   which must be equal, and wrong.cu (the decay on the state's columns), shortcut_skip_state.cu
   (every rank from a zero state over its own tokens) and shortcut_skip_exchange.cu (2 x the
   local output instead of the TP sum), which must differ where expected.json says (the last
   one only at W >= 4).
2. The recurrence in fp32 (every operation rounded), the bf16 output and, at W >= 4, the bf16 TP
   sum, against float64: the atol_rms the 4x rule of docs/problems.md asks with rtol 0.016, and
   how many elements of each twin fall outside meta.json's tolerance (rtol 0.016, atol_rms 0.05),
   and under how many regimes each twin fails (a step's trials draw all five: each must fail
   under at least one; the fast per-channel decay, e^-0.5..e^-4.5 per token, makes the skipped
   state show only in the first tokens of each later CP rank, and a near-uniform gate (the rank
   regime) makes wrong.cu's columns and rows decay alike).
Usage: python3 bench/pkb/sim_74_fla_kimi_delta_attention_cp_tp.py   (exit 1 on a mismatch)
"""
import math
import random
import struct
import sys

RTOL, ATOL_RMS = 0.016, 0.05


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def bf16(x):
    u = struct.unpack("I", struct.pack("f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", u))[0]


def ident(x):
    return x


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def kda(q, k, v, g, beta, a_log, dt_bias, end, H, Dk, Dv, r=ident, cols=False):
    """_kda_forward for batch 1 over tokens [0, end): q, k, g [S][H][Dk], v [S][H][Dv],
    beta [S][H]; a_log [H], dt_bias [H][Dk]. r rounds every operation (f32) or not. cols: wrong.cu
    (the decay scales the state's columns). Returns o [end][H][Dv] (before the bf16 cast)."""
    scale = r(Dk ** -0.5)
    out = [[None] * H for _ in range(end)]
    for h in range(H):
        a = r(math.exp(a_log[h]))
        st = [[0.0] * Dv for _ in range(Dk)]
        for s in range(end):
            kk, qq = k[s][h], q[s][h]
            kden = max(r(math.sqrt(r(sum(r(x * x) for x in kk)))), 1e-12)
            qden = max(r(math.sqrt(r(sum(r(x * x) for x in qq)))), 1e-12)
            kn = [r(x / kden) for x in kk]
            qn = [r(r(x / qden) * scale) for x in qq]
            d = [r(math.exp(r(-5.0 * r(sigmoid(r(a * r(g[s][h][i] + dt_bias[h][i])))))))
                 for i in range(Dk)]
            b = r(sigmoid(beta[s][h]))
            if cols:
                st = [[r(st[i][j] * d[min(j, Dk - 1)]) for j in range(Dv)] for i in range(Dk)]
            else:
                st = [[r(d[i] * st[i][j]) for j in range(Dv)] for i in range(Dk)]
            proj = [r(sum(r(kn[i] * st[i][j]) for i in range(Dk))) for j in range(Dv)]
            upd = [r(r(v[s][h][j] - proj[j]) * b) for j in range(Dv)]
            st = [[r(st[i][j] + r(kn[i] * upd[j])) for j in range(Dv)] for i in range(Dk)]
            out[s][h] = [r(sum(r(qn[i] * st[i][j]) for i in range(Dk))) for j in range(Dv)]
    return out


def layout(W):
    tp = 2 if W >= 4 and W % 2 == 0 else 1
    return tp, W // tp


def pkb_solution(xs, W, Ls, H, Dk, Dv, r=ident, out_round=ident):
    """PKB's solution() on every rank (its generator's groups). Returns y[rank] [Ls][H][Dv]."""
    tp, cp = layout(W)
    full_out = []
    for rank in range(W):
        if tp > 1:  # _build_tp_cp_groups(2): CP group of rank = {t, t + 2, ...}, t = rank % 2
            cp_ranks = [rank % 2 + c * 2 for c in range(cp)]
        else:
            cp_ranks = list(range(W))
        # _all_gather_sequence, batch 1: the CP ranks' tokens in CP order
        seq = {n: [tok for p in cp_ranks for tok in xs[p][n]] for n in ("q", "k", "v", "g", "beta")}
        o = kda(seq["q"], seq["k"], seq["v"], seq["g"], seq["beta"], xs[rank]["a_log"],
                xs[rank]["dt_bias"], cp * Ls, H, Dk, Dv, r)
        full_out.append([[[out_round(e) for e in o[s][h]] for h in range(H)]
                         for s in range(cp * Ls)])  # .to(bf16)
    ys = []
    for rank in range(W):
        out = full_out[rank]
        if tp > 1:  # all_reduce over the TP pair {2c, 2c + 1}, in bf16
            pair = [rank - rank % 2, rank - rank % 2 + 1]
            out = [[[out_round(sum(full_out[p][s][h][j] for p in pair)) for j in range(Dv)]
                    for h in range(H)] for s in range(cp * Ls)]
        cp_rank = rank // tp if tp > 1 else rank
        ys.append(out[cp_rank * Ls:(cp_rank + 1) * Ls])
    return ys


def reference_pipeline(xs, W, Ls, H, Dk, Dv):
    """problem.cu: CP communicator = split(color rank % tp, key rank): its members in rank order;
    ncclAllGather in that order; kda up to (cp_rank + 1) Ls writing tokens [cp_rank Ls, ...);
    the TP all-reduce on split(color rank / tp)."""
    tp, cp = layout(W)
    mine = []
    for rank in range(W):
        members = [p for p in range(W) if p % tp == rank % tp]
        seq = {n: [tok for p in members for tok in xs[p][n]] for n in ("q", "k", "v", "g", "beta")}
        cp_rank = rank // tp
        o = kda(seq["q"], seq["k"], seq["v"], seq["g"], seq["beta"], xs[rank]["a_log"],
                xs[rank]["dt_bias"], (cp_rank + 1) * Ls, H, Dk, Dv)
        mine.append(o[cp_rank * Ls:])
    ys = []
    for rank in range(W):
        pair = [p for p in range(W) if p // tp == rank // tp]
        ys.append([[[sum(mine[p][t][h][j] for p in pair) for j in range(Dv)] for h in range(H)]
                   for t in range(Ls)])
    return ys


def correct_pipeline(xs, W, Ls, H, Dk, Dv, mode="correct"):
    """correct.cu (pull_seq from rank (s / Ls) tp + tp_rank for s < end, kda from t0, tp_combine
    with partner rank ^ 1); "skip_state", "skip_tp", "wrong" as the twins and wrong.cu."""
    tp, cp = layout(W)
    mine = []
    for rank in range(W):
        cp_rank, tp_rank = rank // tp, rank % tp
        if mode == "skip_state":  # pull_seq(tp = W, tp_rank = rank): s < Ls reads rank itself
            end, src = Ls, (lambda s: (s // Ls) * W + rank)
        else:
            end, src = (cp_rank + 1) * Ls, (lambda s: (s // Ls) * tp + tp_rank)
        seq = {n: [xs[src(s)][n][s % Ls] for s in range(end)] for n in ("q", "k", "v", "g", "beta")}
        t0 = 0 if mode == "skip_state" else cp_rank * Ls
        o = kda(seq["q"], seq["k"], seq["v"], seq["g"], seq["beta"], xs[rank]["a_log"],
                xs[rank]["dt_bias"], end, H, Dk, Dv, cols=(mode == "wrong"))
        mine.append(o[t0:])
    ys = []
    for rank in range(W):
        partner = rank ^ 1 if tp > 1 else -1
        if mode == "skip_tp":
            f = 2.0 if partner >= 0 else 1.0
            ys.append([[[f * e for e in mine[rank][t][h]] for h in range(H)] for t in range(Ls)])
        else:
            ys.append([[[mine[rank][t][h][j] + (mine[partner][t][h][j] if partner >= 0 else 0.0)
                         for j in range(Dv)] for h in range(H)] for t in range(Ls)])
    return ys


def flat(x):
    if isinstance(x, list):
        return [e for v in x for e in flat(v)]
    return [x]


def draw(n, row, regime, rank, world, rng, kind="normal", lo=0.0, hi=1.0):
    ex = -4.0 + 8.0 * (rank + 0.25 + 0.5 * rng.random()) / world
    scale = 2 ** (ex / 2)
    ramp_r = rng.uniform(2, 4) * rng.choice((-1, 1))
    ramp_c = rng.uniform(2, 4) * rng.choice((-1, 1))
    shift = 4 * rng.random() - 2
    nrows = max(1, n // row)
    out = []
    for i in range(n):
        if kind == "uniform":
            out.append(bf16(rng.uniform(lo, hi)))
            continue
        v = rng.gauss(0, 1)
        ramp = (ramp_r * ((i // row) / max(1, nrows - 1) - 0.5)
                + ramp_c * ((i % row) / max(1, row - 1) - 0.5))
        if regime == "rank":
            s = 2 ** (ex / 2 - 6 + 2 * rng.random())
            v = s * v + s * shift
        elif regime == "row":
            v = scale * v * 2 ** ramp
        elif regime == "heavy":
            f = 1.0 / (4.0 * rng.random() + 0.0625)
            if rng.random() < 1e-2:
                f *= rng.uniform(16, 64)
            v = min(scale * f, 2048.0) * 2 ** ramp * v
        elif regime == "peaked":
            v = scale * 2 ** ramp * v + (rng.uniform(6, 12) * scale if rng.random() < 3.0 / row
                                         else 0.0)
        out.append(bf16(v))
    return out


def make_inputs(W, Ls, H, Dk, Dv, regime, rng):
    a_log = draw(H, H, "iid", 0, W, rng, "uniform", -0.1, 0.1)  # replicated
    dt = draw(H * Dk, Dk, "iid", 0, W, rng, "uniform", -0.1, 0.1)
    xs = []
    for r in range(W):
        def tensor(D):
            flat_ = draw(Ls * H * D, D, regime, r, W, rng)
            return [[flat_[(t * H + h) * D:(t * H + h + 1) * D] for h in range(H)]
                    for t in range(Ls)]
        b = draw(Ls * H, H, regime, r, W, rng)
        xs.append({"q": tensor(Dk), "k": tensor(Dk), "v": tensor(Dv), "g": tensor(Dk),
                   "beta": [[b[t * H + h] for h in range(H)] for t in range(Ls)],
                   "a_log": a_log, "dt_bias": [dt[h * Dk:(h + 1) * Dk] for h in range(H)]})
    return xs


def outside(got, want, rms):
    return sum(1 for a, b in zip(got, want) if abs(a - b) > RTOL * abs(b) + ATOL_RMS * rms)


def main():
    bad = 0
    Ls, H, Dk, Dv = 8, 3, 8, 8
    need_max = 0.0
    caught = {}
    for W in (2, 4, 8):
        tp, cp = layout(W)
        caught[W] = {"wrong": 0, "skip_state": 0, "skip_tp": 0}
        for regime in ("iid", "rank", "row", "heavy", "peaked"):
            rng = random.Random(f"74-{W}-{regime}")
            xs = make_inputs(W, Ls, H, Dk, Dv, regime, rng)
            pkb = [flat(y) for y in pkb_solution(xs, W, Ls, H, Dk, Dv)]
            ref = [flat(y) for y in reference_pipeline(xs, W, Ls, H, Dk, Dv)]
            cor = [flat(y) for y in correct_pipeline(xs, W, Ls, H, Dk, Dv)]
            twins = {m: [[bf16(e) for e in flat(y)]
                         for y in correct_pipeline(xs, W, Ls, H, Dk, Dv, m)]
                     for m in ("wrong", "skip_state", "skip_tp")}
            bfp = [flat(y) for y in pkb_solution(xs, W, Ls, H, Dk, Dv, f32, bf16)]
            tol = 1e-12  # float64 sums in another order (the TP pair) differ by rounding only
            d_ref = sum(abs(a - b) > tol * (1 + abs(b)) for r in range(W)
                        for a, b in zip(ref[r], pkb[r]))
            d_cor = sum(abs(a - b) > tol * (1 + abs(b)) for r in range(W)
                        for a, b in zip(cor[r], pkb[r]))
            need = 0.0
            out = {m: [0] * W for m in twins}
            for r in range(W):
                rms = math.sqrt(sum(e * e for e in pkb[r]) / len(pkb[r]))
                for a, b in zip(bfp[r], pkb[r]):
                    need = max(need, (4 * abs(a - b) - RTOL * abs(b)) / rms)
                for m in twins:
                    out[m][r] = outside(twins[m][r], pkb[r], rms)
            need_max = max(need_max, need)
            print(f"W={W} tp={tp} cp={cp} {regime:6s}: differing from PKB: reference {d_ref}, "
                  f"correct {d_cor}; outside the tolerance per rank (of {len(pkb[0])}): wrong "
                  f"{out['wrong']}, skip_state {out['skip_state']}, "
                  f"skip_exchange {out['skip_tp']}; "
                  f"fp32 + bf16 path: rule needs atol_rms {need:.4f}")
            bad += d_ref != 0 or d_cor != 0
            first_cp = [r for r in range(W) if r // tp == 0]
            bad += any(out["skip_state"][r] != 0 for r in first_cp)  # right on the first CP rank
            bad += tp == 1 and sum(out["skip_tp"]) != 0  # no TP pair at W = 2: correct.cu
            for m in twins:  # does the twin fail this call (any rank outside the tolerance)?
                caught[W][m] += sum(out[m]) > 0
        # a step's trials draw every regime: each twin must fail under at least one of them
        print(f"  W={W}: regimes (of 5) under which each fails: {caught[W]}")
        bad += caught[W]["wrong"] == 0 or caught[W]["skip_state"] == 0
        bad += tp > 1 and caught[W]["skip_tp"] == 0
    print(f"\nlargest atol_rms the 4x rule asks (rtol 0.016) on every regime: "
          f"{need_max:.4f} (meta.json: {ATOL_RMS})")
    bad += need_max > ATOL_RMS
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
