"""pkb/42_zero2_optimizer_shard_grad = ParallelKernelBench problem 42: ZeRO-2 (gradients sharded
too) where 41 is ZeRO-1, behind the same solution() signature and outputs, so the adapter is
41's (adapters/_mlp_adam.py, run_sharded_state)."""
from _mlp_adam import HYPER, TrialStep, run_sharded_state, split  # noqa: F401

PKB_REFERENCE = "42_zero2_optimizer_shard_grad.py"
adam_step = TrialStep()


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    return run_sharded_state(pkb, inputs, dims, adam_step, params)
