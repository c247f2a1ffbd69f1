"""pkb/86_tp_muon_orthogonalization = ParallelKernelBench problem 86:
solution(x (R, C/W) bf16, steps=5, coefficient_type="quintic", partition_dim=1) -> (R, C/W)
bf16. PKB casts to fp32 itself; with fp64 inputs its .to(float32) keeps the math in fp32, so
the fp64 run casts to fp64 by hand (same steps, float64 matmuls and all-reduces)."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "86_tp_muon_orthogonalization.py"


def _fp64(pkb, x):
    x = x / torch.sqrt(dist_sum((x * x).sum())).clamp_min(1e-7)
    for step in range(5):
        a, b, c = pkb._COEFFICIENTS["quintic"][step]
        gram = x @ x.mT
        dist.all_reduce(gram)
        update = torch.addmm(gram, gram, gram, alpha=c, beta=b)
        x = torch.addmm(x, update, x, alpha=1.0, beta=a)
    return x


def dist_sum(t):
    dist.all_reduce(t)
    return t


def run(pkb, inputs, dims, world, rank, fp64=False):
    r, c = dims["R"], dims["C"]
    x = inputs["x"].view(r, c // world)
    if fp64:
        return {"y": _fp64(pkb, x.double()).reshape(-1)}
    return {"y": pkb.solution(x, 5, "quintic", 1).reshape(-1)}
