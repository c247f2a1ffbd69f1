"""pkb/19_blocked_fp8_quantize = ParallelKernelBench problem 19: solution(local_tensor, 128) ->
(y_global fp8 e4m3, s_global fp32), PKB's Triton quantizer plus two all-gathers.

fp64=True is the evaluation the tolerance rule measures against. PKB's Triton kernel casts its
input to fp32 whatever its dtype, so it is re-done here in torch: the block maximum, the scale
a/448 and the quotient x/d exact in fp64 (instead of div.full.f32), the quotient then rounded
to e4m3 with saturation as Triton's store does. y stays an fp8 tensor: the quantization itself
is the semantics, and only its rounding decisions may differ (the budget checker's business);
s is returned in fp64.
"""
import torch
import torch.distributed as dist

PKB_REFERENCE = "19_blocked_fp8_quantize.py"
BLOCK = 128


def _gather(t, world):
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    return torch.cat(parts, dim=0)


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, N = dims["M"], dims["N"]
    x = inputs["x"].view(M, N)
    if not fp64:
        y, s = pkb.solution(x, BLOCK)
        return {"y": y.reshape(-1), "s": s.reshape(-1)}
    xb = x.reshape(-1, BLOCK)
    s = xb.abs().amax(dim=1) / 448.0
    d = torch.where(s == 0, torch.ones_like(s), s)
    q = (xb / d.unsqueeze(1)).clamp(-448.0, 448.0).to(torch.float32).to(torch.float8_e4m3fn)
    y = _gather(q.reshape(M, N).view(torch.uint8), world).view(torch.float8_e4m3fn)
    s = _gather(s.reshape(M, N // BLOCK), world)
    return {"y": y.reshape(-1), "s": s.reshape(-1)}
