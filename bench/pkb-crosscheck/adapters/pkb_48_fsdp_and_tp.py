"""pkb/48_fsdp_and_tp = ParallelKernelBench problem 48: solution(x_local, W1_shard, W2_shard,
W3_shard, n_tp, n_fsdp) returns y (B_fsdp x D). pkgym passes the whole replicated batch x;
PKB's x_local is this rank's fsdp_rank's rows of it."""
PKB_REFERENCE = "48_fsdp_and_tp.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    D, D_ff, n_tp, n_fsdp, B = dims["D"], dims["D_ff"], dims["n_tp"], dims["n_fsdp"], dims["B_fsdp"]
    F, Dr = D_ff // n_tp, D // n_fsdp
    fsdp_rank = rank // n_tp
    x = inputs["x"].view(dims["B_total"], D)[fsdp_rank * B:(fsdp_rank + 1) * B].contiguous()
    y = pkb.solution(x, inputs["W1_shard"].view(Dr, F), inputs["W2_shard"].view(Dr, F),
                     inputs["W3_shard"].view(F, Dr), n_tp, n_fsdp)
    return {"y": y.reshape(-1)}
