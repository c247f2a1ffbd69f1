"""pkb/12_allgather_gemm = ParallelKernelBench problem 12: solution(A_local, B) -> the product of
the gathered A with this rank's B."""
PKB_REFERENCE = "12_allgather_gemm.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, N, K = dims["M"], dims["N"], dims["K"]
    C = pkb.solution(inputs["A_local"].view(M, K // world), inputs["B"].view(K, N))
    return {"C": C.reshape(-1)}
