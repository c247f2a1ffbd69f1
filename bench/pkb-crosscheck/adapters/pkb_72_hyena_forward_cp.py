"""pkb/72_hyena_forward_cp = ParallelKernelBench problem 72:
solution(x1_seq, x2_seq, v_seq (B, C, S) zigzag sequence shards, h (G, Lf), conv_bias (C),
num_groups G, group_dim D, with_zigzag_splitting=True) -> (B, S, C): all_to_all_single to a
channel split, the inverse zigzag, u = x2 v, the FFT convolution with h plus u bias (fp32,
torch.fft), x1 times it, the zigzag and all_to_all_single back, transpose(1, 2).

pkgym's arguments are PKB's tensors as they are (x1, x2, v per rank; h and bias the same on
every rank); its out is (B, S, C) flat, checked by the generic allclose checker. fp64: the same
call on float64 copies (torch.fft in float64; u = x2 v is then not rounded to bf16, which is
most of the reference's error against it: meta.json's tolerance note)."""

PKB_REFERENCE = "72_hyena_forward_cp.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    B, C, S, Lf, D, G = dims["B"], dims["C"], dims["S"], dims["Lf"], dims["D"], dims["G"]
    out = pkb.solution(inputs["x1"].view(B, C, S), inputs["x2"].view(B, C, S),
                       inputs["v"].view(B, C, S), inputs["h"].view(G, Lf),
                       inputs["bias"].view(C), G, D, None, True)
    return {"out": out.reshape(-1)}
