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
from _fp8_amax import recon as _recon

PKB_REFERENCE = "53_fp8_allgather_params.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    x, hist = inputs["flat_param_shard"], inputs["amax_history"]
    if not fp64:
        full, new_hist = pkb.solution(x, hist)
        return {"full": full, "updated_hist": new_hist}
    recon, new_hist = _recon(x.to(torch.bfloat16), hist.to(torch.bfloat16))
    full = torch.empty(world * dims["P"], dtype=torch.bfloat16, device=x.device)
    dist.all_gather_into_tensor(full, recon.contiguous())
    return {"full": full.double(), "updated_hist": new_hist.double()}
