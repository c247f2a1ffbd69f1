"""cuco/dsv3_moe_combine: CUCo's DeepSeek-V3 MoE combine (the expert outputs back to their
tokens, weighted sum). No PKB reference: the independent implementation is
bench/pkb-crosscheck/local/cuco_dsv3_moe_combine.py (LOCAL_REFERENCE), loaded, run and timed as
PKB's solution() is. With fp64=True the rows and weights are float64 and so is the sum (the
fp64 evaluation the tolerance rule measures against)."""
LOCAL_REFERENCE = "cuco_dsv3_moe_combine.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, Hd, K = dims["M"], dims["Hd"], dims["K"]
    out = pkb.solution(inputs["expert_out"].view(world * M * K, Hd), inputs["recv_src"],
                       inputs["expert_counts"], inputs["topk_idx"].view(M, K),
                       inputs["topk_weights"].view(M, K))
    return {"out": out.reshape(-1)}
