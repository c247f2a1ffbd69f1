"""pkb/41_zero1_optimizer_shard = ParallelKernelBench problem 41: solution(X_local, y_local, W1, b1, W2, b2,
exp_avg_part, exp_avg_sq_part, lr, beta1, beta2, eps, step) returns (W1', b1', W2', b2',
m_part, v_part). pkgym passes params as one flat vector in PKB's _flatten_dense_tensors order
[W1 | b1 | W2 | b2]; this adapter splits it into PKB's tensors and flattens PKB's updated
parameters back (adapters/_mlp_adam.py)."""
from _mlp_adam import HYPER, TrialStep, run_sharded_state, split  # noqa: F401

PKB_REFERENCE = "41_zero1_optimizer_shard.py"
adam_step = TrialStep()


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    return run_sharded_state(pkb, inputs, dims, adam_step, params)
