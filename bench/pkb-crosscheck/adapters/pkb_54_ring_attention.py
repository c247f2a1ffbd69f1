"""pkb/54_ring_attention = ParallelKernelBench problem 54: solution(q, k, v (B, S, H, D),
softmax_scale, causal=True) -> out (B, S, H, D): causal attention of this rank's queries over the
keys of every rank up to each query (PKB's ring of send/recv steps, logsumexp merges).

PKB's _local_attn casts its inputs to fp32 (q.float()), so on fp64 copies it would still compute
in fp32; the fp64 evaluation is therefore done here, by the definition: every rank's k and v
all-gathered in rank order, softmax(scale q K^T + causal mask) V in float64, one (batch, head) at
a time (the score matrix of one head is S x T)."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "54_ring_attention.py"


def _scale(dims, params):
    if params and "softmax_scale" in params:
        return float(params["softmax_scale"])
    return dims["D"] ** -0.5


def _attention_fp64(q, k, v, scale, world, rank):
    ks = [torch.empty_like(k) for _ in range(world)]
    vs = [torch.empty_like(v) for _ in range(world)]
    dist.all_gather(ks, k.contiguous())
    dist.all_gather(vs, v.contiguous())
    K, V = torch.cat(ks, dim=1), torch.cat(vs, dim=1)  # (B, T, H, D), rank order
    B, S, H, _ = q.shape
    T = K.shape[1]
    qpos = rank * S + torch.arange(S, device=q.device).unsqueeze(1)
    masked = torch.arange(T, device=q.device).unsqueeze(0) > qpos  # (S, T)
    out = torch.empty_like(q)
    for b in range(B):
        for h in range(H):
            s = (q[b, :, h, :] @ K[b, :, h, :].transpose(0, 1)) * scale
            s.masked_fill_(masked, float("-inf"))
            out[b, :, h, :] = torch.softmax(s, dim=-1) @ V[b, :, h, :]
    return out


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    B, S, H, D = dims["B"], dims["S"], dims["H"], dims["D"]
    q, k, v = (inputs[n].view(B, S, H, D) for n in ("q", "k", "v"))
    scale = _scale(dims, params)
    if fp64:
        return {"out": _attention_fp64(q, k, v, scale, world, rank).reshape(-1)}
    out = pkb.solution(q, k, v, softmax_scale=scale, causal=True, group=dist.group.WORLD)
    return {"out": out.reshape(-1)}
