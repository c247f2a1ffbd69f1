"""pkb/38_ulysses_gather_seq_scatter_heads_qkv = ParallelKernelBench problem 38:
solution(qkv (B, S, 3 H D), seq_dim=1, group=None, unpadded_dim_size, restore_shape=True) ->
(B, Useq, 3 H D / W): column block r of each of q, k and v of every rank's positions,
concatenated along the sequence, cut to the unpadded size (Useq = unpadded_dim_size when it is
non-zero and W does not divide it, else W S).

pkgym's unpadded_dim_size is a per-call param (0, PKB's own None, in trial 0; W S - 1 in trial
1), and its y a capacity of B S 3 H D elements whose first B Useq 3 H D / W are the output:
compare() in _ulysses.py checks PKB's output against as many leading elements of pkgym's, bit
for bit. The output is exact copies, so the fp64 run is the same all-to-all on fp64 copies."""
from _ulysses import compare  # noqa: F401

PKB_REFERENCE = "38_ulysses_gather_seq_scatter_heads_qkv.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    qkv = inputs["qkv"].view(dims["B"], dims["S"], 3 * dims["H"] * dims["D"])
    y = pkb.solution(qkv, 1, None, int(params["unpadded_dim_size"]) or None, True)
    return {"y": y.reshape(-1)}
