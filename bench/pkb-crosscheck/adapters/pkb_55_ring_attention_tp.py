"""pkb/55_ring_attention_tp = ParallelKernelBench problem 55: solution(hidden (B, S, NH HD),
w_qkv (3 HL HD, NH HD), w_o (NH HD, HL HD), num_heads, softmax_scale, causal=True, tp_group,
cp_group) -> out (B, S, NH HD): QKV projection of this rank's head half, causal ring attention
over the CP group, output projection, all-reduce over the TP pair.

The groups are PKB's _build_tp_cp_groups(2) (Megatron 'tp-cp': TP pairs {2c, 2c+1}, CP sets
{t, t+2, ...}), made once per process (new_group is collective). The fp64 evaluation is done here
by the definition (PKB's _local_attn casts to fp32): every CP rank's k, v all-gathered in CP
order, causal softmax attention in float64 one (batch, head) at a time, the output projection
and the TP sum in float64."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "55_ring_attention_tp.py"

_groups = None


def _tp_cp_groups(world):
    global _groups
    if _groups is None:
        me, tp, cp = dist.get_rank(), None, None
        for c in range(world // 2):
            ranks = [2 * c, 2 * c + 1]
            g = dist.new_group(ranks=ranks)
            if me in ranks:
                tp = g
        for t in range(2):
            ranks = list(range(t, world, 2))
            g = dist.new_group(ranks=ranks)
            if me in ranks:
                cp = g
        _groups = (tp, cp)
    return _groups


def _fp64(hidden, w_qkv, w_o, B, S, HL, HD, scale, tp, cp, world, rank):
    qkv = (hidden @ w_qkv.transpose(0, 1)).view(B, S, 3, HL, HD)
    q, k, v = (t.contiguous() for t in qkv.unbind(dim=2))
    n_cp = world // 2
    ks = [torch.empty_like(k) for _ in range(n_cp)]
    vs = [torch.empty_like(v) for _ in range(n_cp)]
    dist.all_gather(ks, k, group=cp)
    dist.all_gather(vs, v, group=cp)
    K, V = torch.cat(ks, dim=1), torch.cat(vs, dim=1)  # (B, T, HL, HD), CP order
    T = K.shape[1]
    qpos = (rank // 2) * S + torch.arange(S, device=q.device).unsqueeze(1)
    masked = torch.arange(T, device=q.device).unsqueeze(0) > qpos
    ctx = torch.empty_like(q)
    for b in range(B):
        for h in range(HL):
            s = (q[b, :, h, :] @ K[b, :, h, :].transpose(0, 1)) * scale
            s.masked_fill_(masked, float("-inf"))
            ctx[b, :, h, :] = torch.softmax(s, dim=-1) @ V[b, :, h, :]
    out = ctx.reshape(B, S, HL * HD) @ w_o.transpose(0, 1)
    dist.all_reduce(out, group=tp)
    return out


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    B, S, NH, HD = dims["B"], dims["S"], dims["NH"], dims["HD"]
    HL, hid = NH // 2, NH * HD
    scale = float(params["softmax_scale"]) if params and "softmax_scale" in params else HD ** -0.5
    hidden = inputs["hidden"].view(B, S, hid)
    w_qkv = inputs["w_qkv"].view(3 * HL * HD, hid)
    w_o = inputs["w_o"].view(hid, HL * HD)
    tp, cp = _tp_cp_groups(world)
    if fp64:
        out = _fp64(hidden, w_qkv, w_o, B, S, HL, HD, scale, tp, cp, world, rank)
    else:
        out = pkb.solution(hidden, w_qkv, w_o, NH, softmax_scale=scale, causal=True,
                           tp_group=tp, cp_group=cp)
    return {"out": out.reshape(-1)}
