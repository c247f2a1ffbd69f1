#!/usr/bin/env python3
"""Host simulation of the tolerances of pkb/29_moe_post_all2all and pkb/30_moe_epgroupgemm_lora_backward
(pure Python, bf16 rounding emulated; no GPU).

pkb/30: each output element is a sum over W ranks; the reference is NCCL's bf16 ring (a bf16
rounding after each of the W - 1 additions, ring order from a rotating start), the candidate an
fp32 sum rounded once (solutions/correct.cu). pkb/29: out[m] = bf16(bf16(w1 x1) + bf16(w2 x2))
(PyTorch's mul + bf16 scatter_add_), against an fp32 fused combine rounded once. Inputs: PKB's
iid N(0, 1), a scale and offset per rank (rank), heavy tails with outliers (heavy). For each it
reports the worst ratio |cand - ref| / (atol_rms rms(ref) + rtol |ref|) (must be <= 1, with room)
and the norm-wise error against norm_rtol = max(rtol, atol_rms) / 2; then the same for the
shortcut twins (must be far above 1).
Usage: python3 bench/pkb/sim_tolerance_29_30.py [elements]"""
import math
import random
import struct
import sys

RTOL, ATOL_RMS = 0.02, 0.0625
NORM_RTOL = max(RTOL, ATOL_RMS) / 2


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def bf16(x):
    b = struct.unpack("I", struct.pack("f", x))[0]
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", b))[0]


def draw(rng, regime, W, n):
    xs = []
    for q in range(W):
        scale, off = 1.0, 0.0
        if regime == "rank":
            scale = 2.0 ** (-8 + 6 * q / max(1, W - 1))
            off = rng.gauss(0, 1) * scale
        elif regime == "heavy":
            scale = 2.0 ** (-2 + 4 * q / max(1, W - 1))
        row = []
        for _ in range(n):
            v = rng.gauss(0, 1) * scale + off
            if regime == "heavy":
                v *= min(16.0, 0.24 / max(1e-9, rng.random()) ** 0.5)
                if rng.random() < 1e-3:
                    v *= rng.uniform(16, 64)
            row.append(bf16(v))
        xs.append(row)
    return xs


def judge(ref, got):
    rms = math.sqrt(sum(v * v for v in ref) / len(ref))
    worst = max(abs(g - r) / (ATOL_RMS * rms + RTOL * abs(r)) for g, r in zip(got, ref))
    num = math.sqrt(sum((g - r) ** 2 for g, r in zip(got, ref) if RTOL * abs(r) >= 0))
    den = math.sqrt(sum(r * r for r in ref))
    return worst, num / den


def sim30(rng, n):
    rows = []
    for W in (2, 4, 8):
        for regime in ("iid", "rank", "heavy"):
            xs = draw(rng, regime, W, n)
            ref, cand, skip, sub = [], [], [], []
            for j in range(n):
                start = j % W  # NCCL's ring: chunks start at different ranks
                acc = xs[start][j]
                for t in range(1, W):
                    acc = bf16(acc + xs[(start + t) % W][j])
                ref.append(acc)
                s = 0.0
                for q in range(W):
                    s = f32(s + xs[q][j])
                cand.append(bf16(s))
                skip.append(bf16(W * xs[0][j]))
                sub.append(bf16(s) if (j // 8) % 2 == 0 else bf16(W * xs[0][j]))
            rows.append(("30", W, regime) + judge(ref, cand) + judge(ref, skip)[:1] +
                        judge(ref, sub)[:1])
    return rows


def sim29(rng, n):
    rows = []
    for regime in ("iid", "rank", "heavy"):
        x1, x2 = draw(rng, regime, 2, n)
        ref, cand, swap = [], [], []
        for j in range(n):
            w1, w2 = bf16(rng.random()), bf16(rng.random())
            ref.append(bf16(bf16(w1 * x1[j]) + bf16(w2 * x2[j])))
            cand.append(bf16(f32(f32(w1 * x1[j]) + f32(w2 * x2[j]))))
            swap.append(bf16(f32(w2 * x1[j]) + f32(w1 * x2[j])))  # sorted-slot twin, unsorted token
        rows.append(("29", 2, regime) + judge(ref, cand) + judge(ref, swap)[:1] + (float("nan"),))
    return rows


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rng = random.Random(2930)
    print("problem W regime  honest: worst/tol  norm/norm_rtol   twin worst/tol: skip|swap  subsample")
    ok = True
    for p, W, regime, worst, nrm, t1, t2 in sim30(rng, n) + sim29(rng, n):
        print("%-7s %d %-6s  %8.3f          %8.3f         %10.1f  %10.1f" %
              (p, W, regime, worst, nrm / NORM_RTOL, t1, t2))
        ok &= worst <= 0.5 and nrm <= NORM_RTOL / 2 and t1 > 1 and (math.isnan(t2) or t2 > 1)
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
