"""pkb/20_blocked_fp8_dequantize = ParallelKernelBench problem 20: solution(local_y, local_s, 128)
-> out (W, M, N) fp32, PKB's Triton dequantizer plus all_to_all_single.

fp64=True is the evaluation the tolerance rule measures against; the Triton kernel computes in
fp32 whatever its input dtype, so it is re-done in torch in fp64 (the products are exact in
both, so the two must agree bit for bit).
"""
import torch
import torch.distributed as dist

PKB_REFERENCE = "20_blocked_fp8_dequantize.py"
BLOCK = 128


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, N = dims["M"], dims["N"]
    y = inputs["local_y"].view(world, M, N)
    s = inputs["local_s"].view(world, M * N // BLOCK)
    if not fp64:
        return {"out": pkb.solution(y, s, BLOCK).reshape(-1)}
    x = (y.reshape(-1, BLOCK) * s.reshape(-1, 1)).reshape(world, M, N)
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return {"out": out.reshape(-1)}
