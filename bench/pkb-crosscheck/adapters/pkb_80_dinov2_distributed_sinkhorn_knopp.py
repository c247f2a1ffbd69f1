"""pkb/80_dinov2_distributed_sinkhorn_knopp = ParallelKernelBench problem 80:
solution(teacher_output (B, K), teacher_temp, n_masked_patches_tensor (1,), n_iterations)
-> (B, K) fp32, rank r's samples of the Sinkhorn-Knopp assignment over every rank's batch.

pkgym's q is PKB's output as is (B x K). With fp64=True the inputs are float64 copies: PKB's
solution() computes in q's dtype after teacher_output.float(), so the fp64 evaluation repeats
its steps here in float64 (the same all-reduces, on float64 tensors)."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "80_dinov2_distributed_sinkhorn_knopp.py"


def _sinkhorn64(t, temp, n_masked, iters):
    q = torch.exp(t.double() / temp).T
    total_batch = n_masked.to(device=q.device, dtype=q.dtype).clone()
    dist.all_reduce(total_batch)
    K = q.shape[0]
    mass = q.sum()
    dist.all_reduce(mass)
    q /= mass
    for _ in range(iters):
        rs = q.sum(dim=1, keepdim=True)
        dist.all_reduce(rs)
        q /= rs
        q /= K
        q /= q.sum(dim=0, keepdim=True)
        q /= total_batch
    q *= total_batch
    return q.T.contiguous()


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    B, K, iters = dims["B"], dims["K"], dims["n_iter"]
    temp = float((params or {}).get("teacher_temp", 0.07))
    t = inputs["teacher_output"].view(B, K)
    n_masked = inputs["n_masked"].view(1).long()
    if fp64:
        return {"q": _sinkhorn64(t, temp, n_masked, iters).reshape(-1)}
    q = pkb.solution(t, temp, n_masked, iters)
    return {"q": q.reshape(-1)}
