"""pkb/43_fused_adam_grad_unshard_allgather = ParallelKernelBench problem 43:
solution(grad_shard, master_shard, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, step) returns
the all-gathered updated master weights (step and hyper-parameters: adapters/_mlp_adam.py)."""
from _mlp_adam import HYPER, TrialStep, adam_args  # noqa: F401

PKB_REFERENCE = "43_fused_adam_grad_unshard_allgather.py"
adam_step = TrialStep()


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    gathered = pkb.solution(inputs["grad_shard"], inputs["master_shard"], inputs["exp_avg"],
                            inputs["exp_avg_sq"], *adam_args(adam_step, params))
    return {"gathered": gathered}
