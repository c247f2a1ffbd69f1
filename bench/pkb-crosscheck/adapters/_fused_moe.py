"""Shared by pkb_31_fused_moe_fwd.py and pkb_32_fused_moe_fwd_lora.py: PKB's expert nn.Linear
modules (gate_proj, up_proj, down_proj) built from pkgym's weight (out x in, row-major) and bias
inputs, in the inputs' dtype (bf16, or float64 with fp64=True)."""
import torch


def linear(weight, bias, n_in, n_out):
    lin = torch.nn.Linear(n_in, n_out, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        lin.weight.copy_(weight.view(n_out, n_in))
        lin.bias.copy_(bias.view(n_out))
    return lin


def modules(inputs, dims):
    n, i = dims["N"], dims["I"]
    return (linear(inputs["gate_proj_w"], inputs["gate_proj_b"], n, i),
            linear(inputs["up_proj_w"], inputs["up_proj_b"], n, i),
            linear(inputs["down_proj_w"], inputs["down_proj_b"], i, n))
