"""pkb/47_fsdp_step_e2e = ParallelKernelBench problem 47: solution(X_local, y_local,
flat_param_shard, param_shapes, exp_avg_shard, exp_avg_sq_shard, lr, beta1, beta2, eps,
weight_decay, step) returns (theta, m, v), this rank's updated shards. param_shapes follow from
pkgym's dims (step and hyper-parameters: adapters/_mlp_adam.py)."""
from _mlp_adam import TrialStep, adam_args, mlp_batch

PKB_REFERENCE = "47_fsdp_step_e2e.py"

HYPER = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}
adam_step = TrialStep()


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    X, y, (d_in, hidden, d_out) = mlp_batch(inputs, dims)
    shapes = ((hidden, d_in), (hidden,), (d_out, hidden), (d_out,))
    theta, m, v = pkb.solution(X, y, inputs["flat_param_shard"], shapes, inputs["exp_avg_shard"],
                               inputs["exp_avg_sq_shard"], *adam_args(adam_step, params, HYPER))
    return {"theta_out": theta, "exp_avg_out": m, "exp_avg_sq_out": v}
