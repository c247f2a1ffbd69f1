"""pkb/72_hyena_forward_cp = ParallelKernelBench problem 72:
solution(x1_seq, x2_seq, v_seq (B, C, S) zigzag sequence shards, h (G, Lf), conv_bias (C),
num_groups G, group_dim D, with_zigzag_splitting=True) -> (B, S, C): all_to_all_single to a
channel split, the inverse zigzag, u = x2 v, the FFT convolution with h plus u bias (fp32,
torch.fft), x1 times it, the zigzag and all_to_all_single back, transpose(1, 2).

pkgym's arguments are PKB's tensors as they are (x1, x2, v per rank; h and bias the same on
every rank); its out is (B, S, C) flat, checked by the generic allclose checker.

fp64: the same call on float64 copies, except that u = x2 v is rounded to bf16 first, as
prompt.md defines it (u = bf16(x2 v), the problem's first rounding point; PKB's bf16 product
does the same): the adapter passes x2' = bf16(x2 v) and v' = 1, so PKB's z = x2' v' is u
exactly. Without it the evaluation measured the bf16 quantization of u, not the arithmetic:
Lf = 4096 independent 2^-9 roundings in each output's convolution sum, times x1 (whose
extremes reach ~5), put the reference (bit-identical to PKB) 4-15x its tolerance away from the
unrounded evaluation (the W = 1 cross-check on one H200, 2026-11-29: rule ratio 18.7 on iid,
60.6 over the regimes). The later roundings (z1, out) stay out; each is relative (2^-9 of the
element), inside rtol 0.016. Note that PKB's _fftconv_ref casts u to fp32 (u.float()), so this
evaluation's FFT is fp32 as well (~1e-6 of the norm, far below the tolerance; the reference's
cuFFT convolution is measured against it, not against an fp64 FFT)."""
import torch

PKB_REFERENCE = "72_hyena_forward_cp.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    B, C, S, Lf, D, G = dims["B"], dims["C"], dims["S"], dims["Lf"], dims["D"], dims["G"]
    x2, v = inputs["x2"].view(B, C, S), inputs["v"].view(B, C, S)
    if fp64:  # u = bf16(x2 v): a product of two bf16 values is exact in float64, rounded once
        x2, v = (x2 * v).to(torch.bfloat16).to(x2.dtype), torch.ones_like(v)
    out = pkb.solution(inputs["x1"].view(B, C, S), x2, v, inputs["h"].view(G, Lf),
                       inputs["bias"].view(C), G, D, None, True)
    return {"out": out.reshape(-1)}
