"""pkb/09_layernorm_backward = ParallelKernelBench problem 9: solution(X_hat, dY) returns
(d_gamma, d_beta), the column sums over rows, all-reduced over the ranks."""
PKB_REFERENCE = "9_layernorm_backward.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, n = dims["M"], dims["N"]
    d_gamma, d_beta = pkb.solution(inputs["x_hat"].view(m, n), inputs["dy"].view(m, n))
    return {"d_gamma": d_gamma.reshape(-1), "d_beta": d_beta.reshape(-1)}
