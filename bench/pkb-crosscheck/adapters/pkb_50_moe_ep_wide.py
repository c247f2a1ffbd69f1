"""pkb/50_moe_ep_wide = ParallelKernelBench problem 50: solution(hidden_states (M, N),
gate_weight (E, N), gate_bias (E,), gate_proj, up_proj, down_proj (nn.Linear), num_experts = 2 W,
top_k = 2, group=None) -> (M, N), with dist.all_gather_into_tensor and dist.all_to_all_single
(torch.distributed, initialized by the cross-check).

pkgym passes the three nn.Linear modules as their weight and bias tensors (rebuilt as modules
here). The output is checked by problem.cu's check() (admissible top-K sets: ties in the router
may go either way), so compare() applies the same rule in fp64 to PKB's output and to pkgym's
reference output (adapters/_moe_ep.py). With fp64=True every op runs in float64."""
from _moe_ep import compare, run  # noqa: F401

PKB_REFERENCE = "50_moe_ep_wide.py"
