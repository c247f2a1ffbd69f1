"""pkb/37_ulysses_gather_heads_scatter_seq = ParallelKernelBench problem 37:
solution(x (B, seq, H, D), seq_dim=1, head_dim=2) -> (B, ceil(seq / W), W H, D): the sequence
padded with zeros to a multiple of W, positions [r Tw, (r+1) Tw) of every rank's heads,
concatenated along the heads in rank order.

pkgym's seq is a per-call param (T, PKB's own, in trial 0; T - 1 in trial 1) and its x a
(B, T, H, D) capacity whose first B seq H D elements are the tensor; its y a capacity whose
first B ceil(seq / W) W H D elements are the output: compare() in _ulysses.py checks PKB's
output against as many leading elements of pkgym's, bit for bit. The output is exact copies and
zeros, so the fp64 run is the same all-to-all on fp64 copies."""
from _ulysses import compare  # noqa: F401

PKB_REFERENCE = "37_ulysses_gather_heads_scatter_seq.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    seq, h, d = int(params["seq"]), dims["H"], dims["D"]
    x = inputs["x"][:dims["B"] * seq * h * d].view(dims["B"], seq, h, d)
    y = pkb.solution(x, 1, 2)
    return {"y": y.reshape(-1)}
