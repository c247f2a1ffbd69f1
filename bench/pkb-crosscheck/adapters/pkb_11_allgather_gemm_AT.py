"""pkb/11_allgather_gemm_AT = ParallelKernelBench problem 11: solution(A_local, B) -> the product of
the gathered A with this rank's B (PKB returns a transposed view; its values are C's)."""
PKB_REFERENCE = "11_allgather_gemm_AT.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, N, K = dims["M"], dims["N"], dims["K"]
    C = pkb.solution(inputs["A_local"].view(M, K // world), inputs["B"].view(K, N))
    return {"C": C.contiguous().reshape(-1)}
