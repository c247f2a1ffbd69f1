"""pkb/34_ulysses_all_gather_into_tensor_primitive = ParallelKernelBench problem 34:
solution(x (M, N)) -> every rank's x stacked along dim 0, (W M, N), identical on every rank.
The output is exact copies, so the fp64 run is the same all-gather on fp64 copies."""
PKB_REFERENCE = "34_ulysses_all_gather_into_tensor_primitive.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    y = pkb.solution(inputs["x"].view(dims["M"], dims["N"]))
    return {"y": y.reshape(-1)}
