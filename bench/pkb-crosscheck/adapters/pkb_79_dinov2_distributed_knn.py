"""pkb/79_dinov2_distributed_knn = ParallelKernelBench problem 79:
solution(test_features_rank (Q, D), train_features_rank_T (D, T), train_labels_rank (1, T),
max_k) -> (topk_sims (Q, K) bf16, topk_labels (Q, K) int64) for this rank's queries over every
rank's training items.

pkgym's features lie on a grid where every similarity is exact in fp32, so topk_sims is unique
(exact checker) and PKB's must equal pkgym's. topk_labels is not unique (ties at the K-th
similarity): run() gathers every rank's training features and labels (dist.all_gather, outside
PKB's call), computes every similarity as PKB does (bf16 matmul) and records, per query, the
labels of every item at or above the K-th value, grouped by value, and PKB's sims (which the
exact check of topk_sims finds equal to pkgym's); compare() accepts when pkgym's reference and
PKB's output both pass problem.cu's check(): each run of equal sims above the K-th holds all the
items with that value (labels as a multiset), the K-th's run a sub-multiset of its ties. The
fp64 run is the same call on float64 copies (no bf16 rounding: not used for the exact and custom
outputs)."""
from collections import Counter

import torch
import torch.distributed as dist

PKB_REFERENCE = "79_dinov2_distributed_knn.py"

_TIES = {}


def run(pkb, inputs, dims, world, rank, fp64=False):
    Q, T, D, K = dims["Q"], dims["T"], dims["D"], dims["K"]
    test = inputs["test_features"].reshape(Q, D)
    train = inputs["train_features_T"].reshape(D, T)
    labels = inputs["train_labels"].reshape(1, T)
    sims, labs = pkb.solution(test, train, labels, K)
    if not fp64:
        trains = [torch.empty_like(train) for _ in range(world)]
        labss = [torch.empty_like(labels) for _ in range(world)]
        dist.all_gather(trains, train.contiguous())
        dist.all_gather(labss, labels.contiguous())
        every = (test @ torch.cat(trains, dim=1)).float()  # bf16 out, as PKB's matmul
        every_l = torch.cat(labss, dim=1).reshape(-1)
        kth = every.topk(K, dim=1).values[:, K - 1]
        groups = []
        for i in range(Q):
            m = every[i] >= kth[i]
            g = {}
            for v, lab in zip(every[i][m].tolist(), every_l[m].tolist()):
                g.setdefault(v, []).append(lab)
            groups.append(g)
        _TIES["groups"] = groups
        _TIES["sims"] = sims.float().reshape(Q, K).cpu().tolist()
    return {"topk_sims": sims.reshape(-1), "topk_labels": labs.reshape(-1)}


def _row_ok(sims, labs, groups):  # problem.cu check_rows, against every item's similarity
    K, last, j0 = len(sims), sims[-1], 0
    while j0 < K:
        j1 = j0 + 1
        while j1 < K and sims[j1] == sims[j0]:
            j1 += 1
        got, pool = Counter(labs[j0:j1]), Counter(groups.get(sims[j0], []))
        if sims[j0] == last:
            if any(n > pool[lab] for lab, n in got.items()):
                return False
        elif got != pool:
            return False
        j0 = j1
    return True


def compare(name, ref, got, inputs, dims, world, rank):
    """topk_labels: pkgym's reference (ref) and PKB's output (got) each checked as above, with
    PKB's sims for the runs (topk_sims is compared exactly on its own)."""
    assert name == "topk_labels"
    Q, K = dims["Q"], dims["K"]
    ok = True
    for lab in (ref.reshape(Q, K).long().cpu(), got.reshape(Q, K).long().cpu()):
        for i in range(Q):
            ok &= _row_ok(_TIES["sims"][i], lab[i].tolist(), _TIES["groups"][i])
    diff = float((ref.reshape(-1).long().cpu() - got.reshape(-1).long().cpu()).abs().max().item())
    return ok, diff
