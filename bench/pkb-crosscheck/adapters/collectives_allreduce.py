"""collectives/allreduce = ParallelKernelBench problem 1: solution(tensor) -> all-reduced copy."""
PKB_REFERENCE = "1_allreduce.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    return {"y": pkb.solution(inputs["x"])}
