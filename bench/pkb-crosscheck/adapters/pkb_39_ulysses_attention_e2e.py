"""pkb/39_ulysses_attention_e2e = ParallelKernelBench problem 39: solution(hidden_states (B, S,
NH HD), w_qkv (3 NH HD, NH HD), w_o (NH HD, NH HD), group=None, num_heads, causal=False) -> out
(B, S, NH HD): the QKV projection, gather_seq_scatter_heads of q and of the stacked (k, v),
_local_attention (over the last two dims of (B, T, HL, HD): each position's local heads attend
to one another), gather_heads_scatter_seq and the output projection.

PKB's scale is head_dim ** -0.5 = 0.125, pkgym's softmax_scale param (the same value). Every
step of solution() is plain PyTorch in the inputs' dtype, so the fp64 evaluation is the same
call on float64 copies (dist.all_to_all moves float64 as well), except that the QKV projection
is rounded to bf16 before anything uses it (as pkb/25's logits): qkv = bf16(hidden @ w_qkv^T) is
the problem's first rounding point (prompt.md), and generate()'s hot positions (keys 2 mod 3:
scores ~ N(0, 64^2)) amplify it: q and k rounded by 2^-9 move a score by ~0.2, which at a
near-tie between two heads' scores moves that row's softmax, and out, by up to ~1 (the W = 1
cross-check on one H200, 2026-11-29: the reference 11.6 relative from the unrounded evaluation,
rule ratio 75). From the rounded qkv the reference is within 0.11-0.32 of the tolerance on the
same hot trials (bench/pkb/sim_39_ulysses_attention_e2e.cpp, SIM_TRUTH=bf16qkv). The later
roundings (scores, softmax, attention output, out) stay out: the reference keeps the scores and
the softmax in fp32, PKB rounds each to bf16 (a bf16 score of a hot position is ~256 with an
ulp of 2), so PKB's own output can still differ from the reference at a hot near-tie by more
than the tolerance (bench/results/pkb-w1-crosscheck-2026-11-29-h200x1.md, "Findings
explained")."""
import types

import torch

PKB_REFERENCE = "39_ulysses_attention_e2e.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    B, S, NH, HD = dims["B"], dims["S"], dims["NH"], dims["HD"]
    hid = NH * HD
    hidden = inputs["hidden"].view(B, S, hid)
    w_qkv = inputs["w_qkv"].view(3 * hid, hid)
    w_o = inputs["w_o"].view(hid, hid)
    if not fp64:
        out = pkb.solution(hidden, w_qkv, w_o, None, NH, False)
        return {"out": out.reshape(-1)}
    real = pkb.F

    def linear(x, weight, bias=None):
        y = real.linear(x, weight, bias)
        return y.to(torch.bfloat16).to(y.dtype) if weight is w_qkv else y

    pkb.F = types.SimpleNamespace(linear=linear, softmax=real.softmax)
    try:
        out = pkb.solution(hidden, w_qkv, w_o, None, NH, False)
    finally:
        pkb.F = real
    return {"out": out.reshape(-1)}
