"""pkb/31_fused_moe_fwd = ParallelKernelBench problem 31:
solution(hidden_states (M, N), gate_weight (E, N), gate_bias (E,), gate_proj, up_proj, down_proj
(nn.Linear N->I, N->I, I->N), num_experts, top_k, group=None) -> (M, N), with
dist.all_gather_into_tensor and dist.all_to_all_single (torch.distributed, initialized by the
cross-check).

pkgym passes each nn.Linear as its weight (out x in, row-major) and bias; this adapter wraps
them in nn.Linear modules (adapters/_fused_moe.py) of the inputs' dtype (bf16, or float64
copies with fp64=True: the same forward in fp64, the evaluation the tolerance rule measures
against). generate() designed the
routing so that no logit ties or near-ties reach the top-k boundary: PKB's router picks the
same experts in bf16 and in fp64."""
import torch
from _fused_moe import modules

PKB_REFERENCE = "31_fused_moe_fwd.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, n, e, k = dims["M"], dims["N"], dims["E"], dims["K"]
    x = inputs["hidden_states"].view(m, n)
    gw = inputs["gate_weight"].view(e, n)
    gb = inputs["gate_bias"].view(e)
    with torch.no_grad():
        out = pkb.solution(x, gw, gb, *modules(inputs, dims), e, k, None)
    return {"out": out.reshape(-1)}
