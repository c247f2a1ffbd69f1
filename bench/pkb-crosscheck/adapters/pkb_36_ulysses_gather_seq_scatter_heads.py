"""pkb/36_ulysses_gather_seq_scatter_heads = ParallelKernelBench problem 36:
solution(x (B, S, H, D), seq_dim=1, head_dim=2, group=None, unpadded_dim_size) -> (B, Useq,
H / W, D): head block r of every rank's positions, concatenated along the sequence, cut to the
unpadded size (Useq = unpadded_dim_size when it is non-zero and W does not divide it, else W S).

pkgym's unpadded_dim_size is a per-call param (0, PKB's own, in trial 0; W S - 1 in trial 1), and
its y a capacity of B S H D elements whose first B Useq (H / W) D are the output: compare() in
_ulysses.py checks PKB's output against as many leading elements of pkgym's, bit for bit. The
output is exact copies, so the fp64 run is the same all-to-all on fp64 copies."""
from _ulysses import compare  # noqa: F401

PKB_REFERENCE = "36_ulysses_gather_seq_scatter_heads.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    x = inputs["x"].view(dims["B"], dims["S"], dims["H"], dims["D"])
    y = pkb.solution(x, 1, 2, None, int(params["unpadded_dim_size"]))
    return {"y": y.reshape(-1)}
