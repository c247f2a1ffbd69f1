"""pkb/32_fused_moe_fwd_lora = ParallelKernelBench problem 32:
solution(hidden_states (M, N), gate_weight (E, N), gate_bias (E,), gate_proj, up_proj, down_proj
(nn.Linear N->I, N->I, I->N), lora_gate_A (r, N), lora_gate_B (I, r), lora_up_A (r, N),
lora_up_B (I, r), lora_down_A (r, I), lora_down_B (N, r), num_experts, top_k, group=None)
-> (M, N), with dist.all_gather_into_tensor and dist.all_to_all_single.

As pkb/31's adapter (adapters/_fused_moe.py: the nn.Linear modules built from pkgym's weight
and bias pointers, fp64=True the same forward in float64), plus the six LoRA factors reshaped."""
import torch
from _fused_moe import modules

PKB_REFERENCE = "32_fused_moe_fwd_lora.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, n, i, e, k, r = dims["M"], dims["N"], dims["I"], dims["E"], dims["K"], dims["R"]
    x = inputs["hidden_states"].view(m, n)
    gw = inputs["gate_weight"].view(e, n)
    gb = inputs["gate_bias"].view(e)
    lora = (inputs["lora_gate_A"].view(r, n), inputs["lora_gate_B"].view(i, r),
            inputs["lora_up_A"].view(r, n), inputs["lora_up_B"].view(i, r),
            inputs["lora_down_A"].view(r, i), inputs["lora_down_B"].view(n, r))
    with torch.no_grad():
        out = pkb.solution(x, gw, gb, *modules(inputs, dims), *lora, e, k, None)
    return {"out": out.reshape(-1)}
