"""pkb/53_fp8_allgather_params = ParallelKernelBench problem 53: solution(flat_param_shard,
amax_history) -> (full bf16, updated_hist bf16).

fp64=True is the evaluation the tolerance rule measures against. The fp8 round trip is the
problem's semantics (its codes are decisions) and the all-gather only copies, so the fp64
evaluation is the same computation, spelled out in torch (the reciprocal-multiply scale written
explicitly, so that it does not depend on the device), with its results in fp64: every output
must agree exactly.
"""
import torch
import torch.distributed as dist

PKB_REFERENCE = "53_fp8_allgather_params.py"


def _recon(x, hist):
    cur = x.abs().max().to(torch.float32)
    new_hist = torch.roll(hist, shifts=-1, dims=0)
    new_hist[-1] = cur.to(hist.dtype)
    inv = (torch.tensor(1.0, dtype=torch.float32) / torch.tensor(448.0, dtype=torch.float32))
    scale = new_hist.max().clamp(min=1e-12).to(torch.float32) * inv.to(x.device)
    q = (x.float() / scale).to(torch.float8_e4m3fn)
    return (q.float() * scale).to(torch.bfloat16), new_hist


def run(pkb, inputs, dims, world, rank, fp64=False):
    x, hist = inputs["flat_param_shard"], inputs["amax_history"]
    if not fp64:
        full, new_hist = pkb.solution(x, hist)
        return {"full": full, "updated_hist": new_hist}
    recon, new_hist = _recon(x.to(torch.bfloat16), hist.to(torch.bfloat16))
    full = torch.empty(world * dims["P"], dtype=torch.bfloat16, device=x.device)
    dist.all_gather_into_tensor(full, recon.contiguous())
    return {"full": full.double(), "updated_hist": new_hist.double()}
