"""pkb/16_gemm_reducescatter = ParallelKernelBench problem 16: solution(A_local, B_local) -> this
rank's rows of the reduce-scattered bf16 product."""
PKB_REFERENCE = "16_gemm_reducescatter.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, N, K = dims["M"], dims["N"], dims["K"]
    Kl = K // world
    out = pkb.solution(inputs["A"].view(M, Kl), inputs["B"].view(Kl, N))
    return {"out": out.reshape(-1)}
