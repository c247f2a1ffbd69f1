"""pkb/14_gemm_allgather = ParallelKernelBench problem 14: solution(A, B) -> the W products side by
side (column blocks), identical on every rank."""
PKB_REFERENCE = "14_gemm_allgather.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, N, K = dims["M"], dims["N"], dims["K"]
    C = pkb.solution(inputs["A"].view(M, K), inputs["B"].view(K, N // world))
    return {"C": C.reshape(-1)}
