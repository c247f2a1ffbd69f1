"""The PyTorch reference of cuco/dsv3_moe_combine (CUCo's DeepSeek-V3 MoE workload, step 4: the
combine), written for pkgym: CUCo has no PyTorch reference, so this plays the part PKB's
reference/*.py plays for the pkb/ suite (crosscheck.py loads it through the adapter's
LOCAL_REFERENCE and runs and times solution() the same way). Run on every rank of a
torch.distributed process group.

As the expert rank: the used rows, their sources (recv_src) and experts (the segments of
expert_counts) are sorted by destination rank (stable) and sent back with
torch.distributed.all_to_all_single. As the token owner: each received row's token is
recv_src % M, its slot the k with topk_idx[m][k] == its expert, its weight topk_weights[m][k];
the weighted rows are added into an fp32 zero tensor with index_add_ and rounded once. It uses
the sources and experts the rows carry, not the layout's positions (problem.cu's reference
uses those)."""
import torch
import torch.distributed as dist


def solution(expert_out, recv_src, expert_counts, topk_idx, topk_weights):
    rank, world = dist.get_rank(), dist.get_world_size()
    M, K = topk_idx.shape
    El = expert_counts.numel()
    dev = expert_out.device
    n = int(expert_counts.sum())
    rows, src = expert_out[:n], recv_src[:n]
    expert = rank * El + torch.repeat_interleave(torch.arange(El, device=dev), expert_counts)
    dest = torch.div(src, M, rounding_mode="floor")
    order = torch.argsort(dest, stable=True)
    in_splits = torch.bincount(dest, minlength=world)
    out_splits = torch.empty_like(in_splits)
    dist.all_to_all_single(out_splits, in_splits)
    ins, outs = in_splits.tolist(), out_splits.tolist()
    got = sum(outs)
    back = torch.empty((got, rows.shape[1]), dtype=rows.dtype, device=dev)
    back_src = torch.empty((got,), dtype=torch.int64, device=dev)
    back_expert = torch.empty((got,), dtype=torch.int64, device=dev)
    dist.all_to_all_single(back, rows[order].contiguous(), outs, ins)
    dist.all_to_all_single(back_src, src[order].contiguous(), outs, ins)
    dist.all_to_all_single(back_expert, expert[order].contiguous(), outs, ins)
    m = back_src - rank * M
    slot = (topk_idx.long()[m] == back_expert[:, None]).int().argmax(dim=1)
    w = topk_weights[m, slot]
    acc_dtype = torch.float64 if rows.dtype == torch.float64 else torch.float32
    out = torch.zeros((M, rows.shape[1]), dtype=acc_dtype, device=dev)
    out.index_add_(0, m, w.to(acc_dtype)[:, None] * back.to(acc_dtype))
    return out if rows.dtype == torch.float64 else out.to(rows.dtype)
