"""pkb/57_ring_attention_backward_dp = ParallelKernelBench problem 57: solution(dout, q, k, v (B,
S, H, D), out (B, S, H, D), softmax_lse (B, H, S), softmax_scale, causal=False, cp_group,
dp_group) -> (dq, dk, dv): PKB's ring backward over the CP group, then the bf16 average over the
DP pair.

The groups are PKB's _build_cp_dp_groups(2) (Megatron 'cp-dp': rank = dp_rank * CP + cp_rank,
CP groups the replicas' contiguous blocks, DP groups {c, c + CP}), made once per process
(new_group is collective). PKB's solution() casts to fp32 (.float()), so the fp64 evaluation is
done here by the definition in float64: k, v all-gathered over the CP group, per (batch, head)
P = exp(scale q K^T - lse), dS = P (dout V^T - rowsum(dout * out)), dq = scale dS K, every key's
dK, dV share from this rank's queries summed over the CP group (all_reduce, then this rank's
shard), then the DP average."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "57_ring_attention_backward_dp.py"

_groups = None


def _cp_dp_groups(world):
    global _groups
    if _groups is None:
        me, cp, dp, n_cp = dist.get_rank(), None, None, world // 2
        for c in range(n_cp):
            ranks = [c + d * n_cp for d in range(2)]
            g = dist.new_group(ranks=ranks)
            if me in ranks:
                dp = g
        for d in range(2):
            ranks = list(range(d * n_cp, (d + 1) * n_cp))
            g = dist.new_group(ranks=ranks)
            if me in ranks:
                cp = g
        _groups = (cp, dp)
    return _groups


def _fp64(t, lse, scale, cp, dp, world, rank):
    B, S, H, D = t["q"].shape
    n_cp = world // 2
    ks = [torch.empty_like(t["k"]) for _ in range(n_cp)]
    vs = [torch.empty_like(t["v"]) for _ in range(n_cp)]
    dist.all_gather(ks, t["k"].contiguous(), group=cp)
    dist.all_gather(vs, t["v"].contiguous(), group=cp)
    K, V = torch.cat(ks, dim=1), torch.cat(vs, dim=1)  # (B, T, H, D), CP order
    dq = torch.empty_like(t["q"])
    dK, dV = torch.zeros_like(K), torch.zeros_like(V)
    dd = (t["dout"] * t["out"]).sum(dim=-1)  # (B, S, H)
    for b in range(B):
        for h in range(H):
            q, do = t["q"][b, :, h, :], t["dout"][b, :, h, :]
            p = torch.exp((q @ K[b, :, h, :].transpose(0, 1)) * scale - lse[b, h, :].unsqueeze(1))
            ds = p * (do @ V[b, :, h, :].transpose(0, 1) - dd[b, :, h].unsqueeze(1))
            dq[b, :, h, :] = scale * (ds @ K[b, :, h, :])
            dK[b, :, h, :] = scale * (ds.transpose(0, 1) @ q)
            dV[b, :, h, :] = p.transpose(0, 1) @ do
    dist.all_reduce(dK, group=cp)
    dist.all_reduce(dV, group=cp)
    c = rank % n_cp
    dk = dK[:, c * S:(c + 1) * S].contiguous()
    dv = dV[:, c * S:(c + 1) * S].contiguous()
    for g in (dq, dk, dv):
        dist.all_reduce(g, group=dp)
        g.div_(2)
    return dq, dk, dv


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    B, S, H, D = dims["B"], dims["S"], dims["H"], dims["D"]
    scale = float(params["softmax_scale"]) if params and "softmax_scale" in params else D ** -0.5
    shape = (B, S, H, D)
    t = {n: inputs[n].view(*shape) for n in ("dout", "q", "k", "v", "out")}
    lse = inputs["softmax_lse"].view(B, H, S)
    cp, dp = _cp_dp_groups(world)
    if fp64:
        dq, dk, dv = _fp64(t, lse, scale, cp, dp, world, rank)
    else:
        dq, dk, dv = pkb.solution(t["dout"], t["q"], t["k"], t["v"], t["out"], lse,
                                  softmax_scale=scale, causal=False, cp_group=cp, dp_group=dp)
    return {"dq": dq.reshape(-1), "dk": dk.reshape(-1), "dv": dv.reshape(-1)}
