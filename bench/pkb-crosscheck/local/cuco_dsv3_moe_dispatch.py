"""The PyTorch reference of cuco/dsv3_moe_dispatch (CUCo's DeepSeek-V3 MoE workload, steps 1-2:
int8 quantization and dispatch), written for pkgym: CUCo has no PyTorch reference, so this plays
the part PKB's reference/*.py plays for the pkb/ suite (crosscheck.py loads it through the
adapter's LOCAL_REFERENCE and runs and times solution() the same way). Run on every rank of a
torch.distributed process group.

Rank r quantizes its tokens (scale = amax / 127 in fp32, q = round(x / scale), ties to even),
sends one row per (token, expert) to the expert's rank with torch.distributed.all_to_all_single
(rows expert-major, tokens ascending: mask.nonzero()), and reorders what it received from
(source, local expert) chunks to (local expert, source) order, as Megatron's
_sort_chunks_by_idxs does. Returns the rows, scales, sources (s * M + m) and the counts of the
local experts; the caller pads the rows to its capacity."""
import torch
import torch.distributed as dist


def solution(x, topk_idx, num_experts):
    rank, world = dist.get_rank(), dist.get_world_size()
    M, H = x.shape
    E, El = num_experts, num_experts // world
    dev = x.device
    xf = x.float()
    amax = xf.abs().amax(dim=1)
    scale = amax / 127.0
    q = torch.where(scale[:, None] > 0, torch.round(xf / scale[:, None]), torch.zeros_like(xf))
    q = q.clamp(-127, 127).to(torch.int8)
    mask = torch.zeros((M, E), dtype=torch.bool, device=dev)
    mask[torch.arange(M, device=dev)[:, None], topk_idx.long()] = True
    pairs = mask.t().nonzero()  # (expert, token), expert-major, tokens ascending
    send_tok = pairs[:, 1]
    counts = mask.sum(dim=0)  # rows per global expert
    send_x = q[send_tok]
    send_scale = scale[send_tok]
    send_src = rank * M + send_tok
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)  # El counts per rank: [s * El + e]
    in_splits = counts.view(world, El).sum(dim=1).tolist()
    out_splits = recv_counts.view(world, El).sum(dim=1).tolist()
    n = sum(out_splits)
    stage_x = torch.empty((n, H), dtype=torch.int8, device=dev)
    stage_scale = torch.empty((n,), dtype=scale.dtype, device=dev)
    stage_src = torch.empty((n,), dtype=torch.int64, device=dev)
    dist.all_to_all_single(stage_x, send_x, out_splits, in_splits)
    dist.all_to_all_single(stage_scale, send_scale, out_splits, in_splits)
    dist.all_to_all_single(stage_src, send_src, out_splits, in_splits)
    sizes = recv_counts.tolist()  # chunks in (source, local expert) order
    order = torch.arange(world * El).view(world, El).t().reshape(-1).tolist()  # (expert, source)

    def regroup(t):
        chunks = torch.split(t, sizes)
        return torch.cat([chunks[i] for i in order]) if n else t

    expert_counts = recv_counts.view(world, El).sum(dim=0)
    return regroup(stage_x), regroup(stage_scale), regroup(stage_src), expert_counts
