"""pkb/44_quantized_grad_allreduce = ParallelKernelBench problem 44: solution(flat_grad, 128) ->
bf16 average of the blockwise int8 quantize-dequantized gradients (fp32 all-reduce).

fp64=True is the evaluation the tolerance rule measures against. The quantization is the
problem's semantics (its codes are decisions, not approximations), so it is kept exactly as
PKB computes it in fp32 (scale = amax * fp32(1/127), IEEE division, round half even, the fp32
product); only the sum over ranks and the final scaling are done in fp64, unrounded. Running
PKB's solution() itself on fp64 inputs would move codes across rounding boundaries and measure
quantization noise, not the reference's arithmetic error.
"""
import torch
import torch.distributed as dist

PKB_REFERENCE = "44_quantized_grad_allreduce.py"
BLOCK = 128


def _dequantized_fp32(x):
    xv = x.to(torch.bfloat16).reshape(-1, BLOCK)
    # PyTorch on CUDA divides by a Python scalar as a multiplication by its fp32 reciprocal;
    # spelled out so that the result does not depend on the device this runs on.
    inv = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(127.0, dtype=torch.float32)
    scales = xv.abs().amax(dim=1).float().clamp(min=1e-8) * inv.to(x.device)
    q = (xv.float() / scales.unsqueeze(1)).round().clamp(-127, 127)
    return (q * scales.unsqueeze(1)).reshape(-1)


def run(pkb, inputs, dims, world, rank, fp64=False):
    x = inputs["flat_grad"]
    if not fp64:
        return {"out": pkb.solution(x, BLOCK)}
    acc = _dequantized_fp32(x).double()
    dist.all_reduce(acc)
    return {"out": acc / world}
