"""pkb/56_ring_attention_pp = ParallelKernelBench problem 56: solution(hidden (B, S, NH HD),
w_qkv (3 NH HD, NH HD), w_o (NH HD, NH HD), num_heads, softmax_scale, causal=True, cp_group,
pp_group) -> out (B, S, NH HD): stage 0 runs its attention block (QKV projection, causal ring
attention over its CP group, output projection) on hidden and sends the result to stage 1, which
runs its own block on it.

The groups are PKB's _build_cp_pp_groups(2) (rank = pp_rank * CP + cp_rank: CP groups the
stages' contiguous blocks, PP groups {c, c + CP}), made once per process (new_group is
collective). The fp64 evaluation is done here by the definition (PKB's _local_attn casts to
fp32): per stage, every CP rank's k, v all-gathered in CP order, causal softmax attention in
float64 one (batch, head) at a time and the output projection; stage 0's float64 output goes to
stage 1 by send/recv."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "56_ring_attention_pp.py"

_groups = None


def _cp_pp_groups(world):
    global _groups
    if _groups is None:
        me, cp, pp, n_cp = dist.get_rank(), None, None, world // 2
        for p in range(2):
            ranks = list(range(p * n_cp, (p + 1) * n_cp))
            g = dist.new_group(ranks=ranks)
            if me in ranks:
                cp = g
        for c in range(n_cp):
            ranks = [c, c + n_cp]
            g = dist.new_group(ranks=ranks)
            if me in ranks:
                pp = g
        _groups = (cp, pp)
    return _groups


def _block64(x, w_qkv, w_o, B, S, NH, HD, scale, cp, world, rank):
    qkv = (x @ w_qkv.transpose(0, 1)).view(B, S, 3, NH, HD)
    q, k, v = (t.contiguous() for t in qkv.unbind(dim=2))
    n_cp = world // 2
    ks = [torch.empty_like(k) for _ in range(n_cp)]
    vs = [torch.empty_like(v) for _ in range(n_cp)]
    dist.all_gather(ks, k, group=cp)
    dist.all_gather(vs, v, group=cp)
    K, V = torch.cat(ks, dim=1), torch.cat(vs, dim=1)  # (B, T, NH, HD), CP order
    T = K.shape[1]
    qpos = (rank % n_cp) * S + torch.arange(S, device=q.device).unsqueeze(1)
    masked = torch.arange(T, device=q.device).unsqueeze(0) > qpos
    ctx = torch.empty_like(q)
    for b in range(B):
        for h in range(NH):
            s = (q[b, :, h, :] @ K[b, :, h, :].transpose(0, 1)) * scale
            s.masked_fill_(masked, float("-inf"))
            ctx[b, :, h, :] = torch.softmax(s, dim=-1) @ V[b, :, h, :]
    return ctx.reshape(B, S, NH * HD) @ w_o.transpose(0, 1)


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    B, S, NH, HD = dims["B"], dims["S"], dims["NH"], dims["HD"]
    hid = NH * HD
    scale = float(params["softmax_scale"]) if params and "softmax_scale" in params else HD ** -0.5
    hidden = inputs["hidden"].view(B, S, hid)
    w_qkv = inputs["w_qkv"].view(3 * hid, hid)
    w_o = inputs["w_o"].view(hid, hid)
    cp, pp = _cp_pp_groups(world)
    n_cp = world // 2
    if fp64:
        if rank < n_cp:  # stage 0
            out = _block64(hidden, w_qkv, w_o, B, S, NH, HD, scale, cp, world, rank)
            dist.send(out.contiguous(), rank + n_cp)
        else:
            x = torch.empty_like(hidden)
            dist.recv(x, rank - n_cp)
            out = _block64(x, w_qkv, w_o, B, S, NH, HD, scale, cp, world, rank)
    else:
        out = pkb.solution(hidden, w_qkv, w_o, NH, softmax_scale=scale, causal=True,
                           cp_group=cp, pp_group=pp)
    return {"out": out.reshape(-1)}
