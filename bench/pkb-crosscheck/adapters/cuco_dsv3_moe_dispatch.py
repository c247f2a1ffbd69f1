"""cuco/dsv3_moe_dispatch: CUCo's DeepSeek-V3 MoE dispatch (int8 quantization, all-to-all to the
experts' ranks). No PKB reference: the independent implementation is
bench/pkb-crosscheck/local/cuco_dsv3_moe_dispatch.py (LOCAL_REFERENCE), loaded, run and timed as
PKB's solution() is. pkgym's receive buffers are in-out capacities of W M K rows: the received
rows come first, the rest keep the values they came with (the dump's inputs). The quantization
is defined in fp32, so the fp64 run converts x back to fp32 (its values are bf16: exact) and is
the same computation."""
import torch

LOCAL_REFERENCE = "cuco_dsv3_moe_dispatch.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, Hd, E, K = dims["M"], dims["Hd"], dims["E"], dims["K"]
    x = inputs["x"].view(M, Hd).float()
    rx, rs, rsrc, counts = pkb.solution(x, inputs["topk_idx"].view(M, K), E)
    n = rx.shape[0]
    recv_x = inputs["recv_x"].clone().view(world * M * K, Hd)
    recv_scale = inputs["recv_scale"].clone()
    recv_src = inputs["recv_src"].clone()
    recv_x[:n] = rx
    recv_scale[:n] = rs.to(recv_scale.dtype)
    recv_src[:n] = rsrc
    return {"recv_x": recv_x.reshape(-1), "recv_scale": recv_scale, "recv_src": recv_src,
            "expert_counts": counts.to(torch.int64)}
