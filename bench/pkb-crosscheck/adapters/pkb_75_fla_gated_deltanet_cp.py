"""pkb/75_fla_gated_deltanet_cp = ParallelKernelBench problem 75:
solution(q, k (1, Ls, H, Dk), v (1, Ls, H, Dv), gate, beta (1, Ls, H), a_log, dt_bias (H / W))
-> this rank's tokens of the gated delta rule's output over the whole sequence, (1, Ls, H, Dv).

pkgym's tensors are PKB's flattened (a_log and dt_bias: this rank's heads, as PKB slices them).
fp64: the same call on float64 copies (PKB's recurrence casts with .float(), so its fp64 path
is fp32 again; the fp64 truth of the tolerance comes from
bench/pkb/sim_75_fla_gated_deltanet_cp.py)."""
PKB_REFERENCE = "75_fla_gated_deltanet_cp.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    Ls, H, Dk, Dv = dims["Ls"], dims["H"], dims["Dk"], dims["Dv"]
    y = pkb.solution(inputs["q"].view(1, Ls, H, Dk), inputs["k"].view(1, Ls, H, Dk),
                     inputs["v"].view(1, Ls, H, Dv), inputs["gate"].view(1, Ls, H),
                     inputs["beta"].view(1, Ls, H), inputs["a_log"].view(H // world),
                     inputs["dt_bias"].view(H // world))
    return {"y": y.reshape(-1)}
