"""pkb/52_fp8_reduce_scatter_grads = ParallelKernelBench problem 52: solution(flat_grads,
amax_history) -> (out_shard bf16, updated_hist bf16).

fp64=True is the evaluation the tolerance rule measures against. The fp8 round trip is the
problem's semantics (its codes are decisions, not approximations), so the history, the scale
and recon are computed exactly as PKB does in fp32/bf16; only the reduction over ranks and the
final scaling are done in fp64, unrounded. Running PKB's solution() on fp64 inputs would
requantize with a different scale and measure fp8 noise, not the reference's arithmetic.
"""
import torch
import torch.distributed as dist
from _fp8_amax import recon as _recon

PKB_REFERENCE = "52_fp8_reduce_scatter_grads.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    x, hist = inputs["flat_grads"], inputs["amax_history"]
    if not fp64:
        out, new_hist = pkb.solution(x, hist)
        return {"out_shard": out, "updated_hist": new_hist}
    recon, new_hist = _recon(x.to(torch.bfloat16), hist.to(torch.bfloat16))
    P = dims["P"]
    out = torch.empty(P, dtype=torch.float64, device=x.device)
    dist.reduce_scatter_tensor(out, recon.double().contiguous())
    return {"out_shard": out / world, "updated_hist": new_hist.double()}
