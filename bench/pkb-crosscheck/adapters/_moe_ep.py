"""Shared by the adapters of pkb/49-51 (moe_ep_balanced, moe_ep_wide, moe_ep_narrow): PKB's
solution() called on pkgym's tensors, and compare(), which applies problem.cu's check() rule
(problems/include/pk_moe_ep.cuh, pk_moe_ep_ref.cuh) in fp64: a token's row passes when it is,
within the tolerance, the output of some admissible top-K expert set (the experts surely in the
top K, plus any choice among those within 2^-6 (1 + |z|) of the K-th logit) with its softmax
weights, and the whole output is within its norm-wise allowance of the closest such rows. The
experts' weights of the other ranks come from an all_gather (compare runs on every rank in
step, like run())."""
import itertools

import torch
import torch.distributed as dist

MLP = ("w_gate", "b_gate", "w_up", "b_up", "w_down", "b_down")
RTOL, ATOL_RMS, WTOL, WTOL_Z, NORM_RTOL, NORM_Z = 0.02, 0.0625, 0.02, 2.0**-6, 0.01, 2.0**-7


def dims_of(dims, world):
    def val(v):
        return world if v == "world" else int(v)
    return (val(dims["M"]), val(dims["N"]), val(dims["I"]), val(dims["E"]), val(dims["K"]))


def _linear(w, b, out_f, in_f):
    lin = torch.nn.Linear(in_f, out_f, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        lin.weight.copy_(w.view(out_f, in_f))
        lin.bias.copy_(b.view(out_f))
    return lin


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, n, i, e, k = dims_of(dims, world)
    x = inputs["hidden_states"].view(m, n)
    gw = inputs["gate_weight"].view(e, n)
    gb = inputs["gate_bias"].view(e)
    gate = _linear(inputs["w_gate"], inputs["b_gate"], i, n)
    up = _linear(inputs["w_up"], inputs["b_up"], i, n)
    down = _linear(inputs["w_down"], inputs["b_down"], n, i)
    with torch.no_grad():
        out = pkb.solution(x, gw, gb, gate, up, down, e, k, None)
    return {"out": out.reshape(-1)}


def _group(world, e, rank):
    size = world if e >= world else e
    first = 0 if e >= world else rank // e * e
    return size, first, e // size


def _admissible(z, k):
    """must (M x E bool), tied (M x E bool), pick (M): pk_moe_ep_admissible with the margin of
    pk_moe_ep_margin (2^-6 (1 + |z|) of the K-th and (K+1)-th logits)."""
    m, e = z.shape
    zs = z.sort(dim=1, descending=True).values
    at = zs[:, k - 1:k + 1].abs().max(dim=1).values if e > k else zs[:, k - 1].abs()
    margin = (2.0**-6 * (1.0 + at)).unsqueeze(1)
    zi, zj = z.unsqueeze(2), z.unsqueeze(1)  # [m, e, j]
    other = ~torch.eye(e, dtype=torch.bool, device=z.device).unsqueeze(0)
    reach = ((zj + margin.unsqueeze(2) >= zi) & other).sum(dim=2)
    above = ((zj - margin.unsqueeze(2) > zi) & other).sum(dim=2)
    must = reach < k
    tied = ~must & (above < k)
    return must, tied, k - must.sum(dim=1)


def compare(name, ref, got, inputs, dims, world, rank):
    m, n, i, e, k = dims_of(dims, world)
    dev = ref.device
    ws = {}
    for t in MLP:  # every rank's expert
        mine = inputs[t].contiguous()
        parts = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(parts, mine)
        ws[t] = [p.double() for p in parts]
    size, first, el = _group(world, e, rank)
    x = inputs["hidden_states"].view(m, n).double()
    z = x @ inputs["gate_weight"].view(e, n).double().T + inputs["gate_bias"].view(e).double()
    p = torch.softmax(z, dim=1)
    F = []
    for o in range(size):
        r = first + o
        g = x @ ws["w_gate"][r].view(i, n).T + ws["b_gate"][r]
        u = x @ ws["w_up"][r].view(i, n).T + ws["b_up"][r]
        F.append((torch.nn.functional.silu(g) * u) @ ws["w_down"][r].view(n, i).T
                 + ws["b_down"][r])
    F = torch.stack(F)  # [owners, m, n]
    must, tied, pick = _admissible(z, k)
    zmax = torch.where(p > 1e-3, z.abs(), torch.zeros_like(z)).max(dim=1).values
    wtol = (WTOL + WTOL_Z * zmax).unsqueeze(1)
    owner = torch.arange(e, device=dev) // el

    def rows(out_flat):
        o = out_flat.view(m, n).double()
        atol = ATOL_RMS * float(ref.double().pow(2).mean().sqrt())
        top = z.topk(k, dim=1).indices  # the first admissible set to try (ties are exact)
        ok = torch.zeros(m, dtype=torch.bool, device=dev)
        worst = torch.full((m,), float("inf"), dtype=torch.float64, device=dev)
        best_want = torch.zeros(m, n, dtype=torch.float64, device=dev)

        def try_sets(idx, sets):  # sets: [len(idx), k] expert indices
            w = p[idx].gather(1, sets)  # [r, k]
            f = F[owner[sets], idx.unsqueeze(1)]  # [r, k, n]
            want = (w.unsqueeze(2) * f).sum(dim=1)
            mag = (w.unsqueeze(2) * f.abs()).sum(dim=1)
            allowed = atol + RTOL * want.abs() + wtol[idx] * mag
            d = (o[idx] - want).abs()
            ratio = torch.where(d.isnan(), torch.full_like(d, float("inf")), d / allowed)
            ratio = ratio.max(dim=1).values
            better = ratio < worst[idx]  # keep the closest admissible set, as check() does
            ok[idx] |= ratio <= 1
            worst[idx] = torch.minimum(worst[idx], ratio)
            best_want[idx[better]] = want[better]

        valid = (must.sum(1) + pick == k) & (must | tied).gather(1, top).all(dim=1)
        try_sets(torch.arange(m, device=dev)[valid], top[valid])
        for t in torch.nonzero(pick > 0).flatten().tolist():
            ms = torch.nonzero(must[t]).flatten().tolist()
            ts = torch.nonzero(tied[t]).flatten().tolist()
            for c in itertools.combinations(ts, int(pick[t])):
                idx = torch.tensor([t], device=dev)
                try_sets(idx, torch.tensor([ms + list(c)], device=dev))
        r = NORM_RTOL + NORM_Z * zmax
        err = (o - best_want).pow(2).sum(dim=1)
        allow = (r * r) * best_want.pow(2).sum(dim=1)
        norm = float((err[ok].sum() / allow[ok].sum()).sqrt()) if ok.any() else float("inf")
        return bool(ok.all()) and norm <= 1.0, float(worst.max())

    ok_got, w_got = rows(got)
    ok_ref, w_ref = rows(ref)
    return ok_got and ok_ref, max(w_got, w_ref)
