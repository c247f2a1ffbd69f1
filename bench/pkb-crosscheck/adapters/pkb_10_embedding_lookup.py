"""pkb/10_embedding_lookup = ParallelKernelBench problem 10:
solution(indices (M,) int64, local_shard (M, N)) -> output (M, N), rows grouped by owner rank.
The output is exact copies, so the fp64 run is the same lookup on fp64 copies."""
PKB_REFERENCE = "10_embedding_lookup.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, n = dims["M"], dims["N"]
    out = pkb.solution(inputs["indices"], inputs["local_shard"].view(m, n))
    return {"output": out.reshape(-1)}
