"""pkb/33_ulysses_all_to_all_tensor_primitive = ParallelKernelBench problem 33:
solution(x (M, N), scatter_dim=0, gather_dim=1) -> (M / W, W N): row chunk r of every rank's x,
side by side in rank order. The output is exact copies, so the fp64 run is the same all-to-all
on fp64 copies."""
PKB_REFERENCE = "33_ulysses_all_to_all_tensor_primitive.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    y = pkb.solution(inputs["x"].view(dims["M"], dims["N"]), 0, 1)
    return {"y": y.reshape(-1)}
