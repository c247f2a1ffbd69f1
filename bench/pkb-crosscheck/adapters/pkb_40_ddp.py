"""pkb/40_ddp = ParallelKernelBench problem 40: solution(X_local, y_local, W1, b1, W2, b2,
exp_avg_W1, ..., exp_avg_sq_b2, lr, beta1, beta2, eps, step) returns the 12 updated tensors.
pkgym passes params, exp_avg and exp_avg_sq as flat vectors in PKB's _flatten_dense_tensors
order [W1 | b1 | W2 | b2]; this adapter splits them into PKB's tensors and flattens PKB's
outputs back (adapters/_mlp_adam.py)."""
from _mlp_adam import HYPER, TrialStep, adam_args, flat, mlp_batch, split  # noqa: F401

PKB_REFERENCE = "40_ddp.py"
adam_step = TrialStep()


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    X, y, layers = mlp_batch(inputs, dims)
    out = pkb.solution(X, y, *split(inputs["params"], *layers),
                       *split(inputs["exp_avg"], *layers),
                       *split(inputs["exp_avg_sq"], *layers), *adam_args(adam_step, params))
    return {"params_out": flat(out[0:4]), "exp_avg_out": flat(out[4:8]),
            "exp_avg_sq_out": flat(out[8:12])}
