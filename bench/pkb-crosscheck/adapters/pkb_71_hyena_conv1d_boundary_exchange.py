"""pkb/71_hyena_conv1d_boundary_exchange = ParallelKernelBench problem 71:
solution(x (B, C, 2l), weight (C, 1, K)) -> the causal depthwise conv1d of rank r's two zigzag
chunks (x[..., :l] is global chunk r, x[..., l:] chunk 2W-1-r), each padded with the K-1
elements that precede it in the global sequence (from the neighbours; zeros on rank 0's chunk
a; the last rank's chunk b takes its own chunk a's tail), (B, C, 2l).

pkgym's x is a B x C x 2L capacity whose chunk a is columns [0, l) and chunk b [L, L + l),
l = `len` (K-1 <= l <= L, ragged across ranks); PKB's overlaps are each chunk's last K-1
elements, which works for any l >= K-1, so PKB's solution() runs on cat(x[..., :l],
x[..., L:L+l]) as it is. pkgym's y has the same capacity with columns [l, L) of each chunk
zero: the output here is PKB's chunks placed back in it, checked by the generic allclose
checker. fp64: the same call on float64 copies.

At W = 1 (the single-GPU diagnostic) PKB's solution() has no neighbour and so no P2P op, and
torch's batch_isend_irecv([]) raises IndexError (it reads the first op's group): there the
adapter lets an empty list return no requests, which is what PKB's code means (rank 0's chunk a
padded with zeros, its chunk b with its own chunk a's tail)."""
import torch

PKB_REFERENCE = "71_hyena_conv1d_boundary_exchange.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    B, C, L, K = dims["B"], dims["C"], dims["L"], dims["K"]
    l = int(inputs["len"][0])
    x = inputs["x"].view(B, C, 2 * L)
    shard = torch.cat([x[..., :l], x[..., L:L + l]], dim=-1).contiguous()
    real = pkb.dist.batch_isend_irecv
    if world == 1:
        pkb.dist.batch_isend_irecv = lambda ops: real(ops) if ops else []
    try:
        y = pkb.solution(shard, inputs["weight"].view(C, 1, K))
    finally:
        pkb.dist.batch_isend_irecv = real
    out = torch.zeros((B, C, 2 * L), dtype=y.dtype, device=y.device)
    out[..., :l] = y[..., :l]
    out[..., L:L + l] = y[..., l:]
    return {"y": out.reshape(-1)}
