"""run() of primitives/sumsq_allreduce and of its host twin selftest/sumsq_allreduce (neither is
a PKB problem): plain PyTorch, summing each row sequentially in the problem's accumulation
dtype (fp32; a cumulative sum, the least favourable honest order), then torch.distributed's
all-reduce."""
import torch
import torch.distributed as dist


def run(pkb, inputs, dims, world, rank, fp64=False):
    rows, cols = dims["rows"], dims["cols"]
    x = inputs["x"].view(rows, cols)
    acc = torch.float64 if fp64 else torch.float32
    sq = x.to(acc) ** 2
    y = sq.sum(-1) if fp64 else torch.cumsum(sq, dim=-1)[:, -1].contiguous()
    dist.all_reduce(y)
    return {"y": y}
