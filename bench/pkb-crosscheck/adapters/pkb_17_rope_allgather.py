"""pkb/17_rope_allgather = ParallelKernelBench problem 17: solution(q, k, cos, sin) returns the
rotary-embedded q and k of every rank, concatenated along the sequence (dim 1)."""
PKB_REFERENCE = "17_rope_allgather.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    b, s, h, d = dims["B"], dims["S"], dims["heads"], dims["head_dim"]
    q, k = pkb.solution(inputs["q_local"].view(b, s, h, d), inputs["k_local"].view(b, s, h, d),
                        inputs["cos_local"].view(b, s, d), inputs["sin_local"].view(b, s, d))
    return {"q_out": q.reshape(-1), "k_out": k.reshape(-1)}
