"""pkb/85_distributed_sample_sort = ParallelKernelBench problem 85:
solution(local_shard (n,)) -> rank r's part of the sorted sequence of every rank's shard, the
positions PKB's _target_range gives it (a sample sort: splitters, a variable all-to-all, a merge,
an exact redistribution).

pkgym's x is an N-value capacity whose first n values are the shard (0 <= n <= N, ragged, empty
on some ranks); PKB's solution() runs on x[:n] as it is. Its result is placed at the front of an
N-value out with a zero tail, and out_n is its length: both compared by the generic checkers
(out with tolerance 0, numerically; out_n exactly). fp64: the same call on float64 copies (a
sort has no arithmetic: the same values)."""
import torch

PKB_REFERENCE = "85_distributed_sample_sort.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    N = dims["N"]
    n = int(inputs["n"][0])
    y = pkb.solution(inputs["x"][:n].contiguous())
    out = torch.zeros(N, dtype=y.dtype, device=y.device)
    out[:y.numel()] = y
    return {"out": out, "out_n": torch.tensor([y.numel()], dtype=torch.int64, device=y.device)}
