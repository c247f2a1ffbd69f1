"""pkb/69_gnn_negative_scoring = ParallelKernelBench problem 69:
solution(local_pos_scores (num_pos,), local_neg_scores (num_pos, num_neg)) -> ranks (sum of
num_pos over the ranks,): every rank's scores gathered in rank order, then the place of each
positive in the descending sort of sigmoid([pos, negs]), plus one.

pkgym's scores are capacities whose first `rows` rows are the rank's (the slices passed here);
its ranks a W P capacity, zero past the total, plus total. The sort is not stable, so ranks is
checked by admissible ranges (problem.cu's check()): run() gathers every rank's scores with PKB's
own _broadcast_data and records each row's range [1 + #(s(neg) > s(pos)), 1 + #(s(neg) >=
s(pos))] with s = torch.sigmoid of the bf16 scores; compare() accepts when pkgym's reference and
PKB's output both lie in every row's range (and pkgym's is zero past the total). Integers out:
the fp64 run is the same call on float64 copies (its sigmoid has no ties; not used for ranks)."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "69_gnn_negative_scoring.py"

_RANGES = {}


def run(pkb, inputs, dims, world, rank, fp64=False):
    P, G = dims["P"], dims["G"]
    n = int(inputs["rows"].reshape(-1)[0].item())
    pos = inputs["local_pos_scores"].reshape(P)[:n]
    neg = inputs["local_neg_scores"].view(P, G)[:n]
    out = pkb.solution(pos, neg)
    total = out.numel()
    ranks = torch.zeros((world * P,), dtype=torch.int64, device=out.device)
    ranks[:total] = out
    if not fp64:
        group = dist.group.WORLD
        gp = pkb._broadcast_data(rank, world, pos, group)
        gn = pkb._broadcast_data(rank, world, neg, group)
        sp = torch.sigmoid(gp).view(-1, 1)
        sn = torch.sigmoid(gn)
        _RANGES["lo"] = 1 + (sn > sp).sum(dim=1)
        _RANGES["hi"] = 1 + (sn >= sp).sum(dim=1)
        _RANGES["total"] = total
    count = torch.tensor([total], dtype=torch.int64, device=out.device)
    return {"ranks": ranks, "total": count}


def compare(name, ref, got, inputs, dims, world, rank):
    assert name == "ranks"
    total = _RANGES["total"]
    lo, hi = _RANGES["lo"].to(ref.device), _RANGES["hi"].to(ref.device)
    ok = True
    for r in (ref.reshape(-1).long(), got.reshape(-1).long().to(ref.device)):
        head = r[:total]
        ok &= bool(((head >= lo) & (head <= hi)).all().item())
        ok &= bool((r[total:] == 0).all().item())
    diff = float((ref.reshape(-1).long() - got.reshape(-1).long().to(ref.device)).abs().max().item())
    return ok, diff
