"""pkb/22_clip_grad_norm_ep = ParallelKernelBench problem 22: solution(non_ep, ep, max_norm,
norm_type, ep_size, fsdp_group, ep_fsdp_group, ep_group) returns the global norm and scales and
clips both gradient lists in place; the results are pkgym's outputs non_ep_out and ep_out.

The groups are PKB's _build_ep_fsdp_groups (utils/input_output_tensors.py), built once per
process: at W = 2 (ep_size 1) they are (None, WORLD). max_norm is a per-trial param
("3 * (M + N) / 4 * (1 + 10 * (trial % 2))"): run() needs the call's params or its trial."""
import torch.distributed as dist

PKB_REFERENCE = "22_clip_grad_norm_ep.py"
_groups = {}


def ep_groups(ep_size):
    """(ep_group, ep_fsdp_group) as PKB builds them; every rank creates every group."""
    if ep_size in _groups:
        return _groups[ep_size]
    world, rank = dist.get_world_size(), dist.get_rank()
    if ep_size <= 1 or world % ep_size != 0:
        _groups[ep_size] = (None, dist.group.WORLD)
        return _groups[ep_size]
    ep_group = ep_fsdp_group = None
    for blk in range(world // ep_size):
        ranks = list(range(blk * ep_size, (blk + 1) * ep_size))
        g = dist.new_group(ranks=ranks)
        if rank in ranks:
            ep_group = g
    for ep_idx in range(ep_size):
        ranks = [ep_idx + blk * ep_size for blk in range(world // ep_size)]
        g = dist.new_group(ranks=ranks)
        if rank in ranks:
            ep_fsdp_group = g
    _groups[ep_size] = (ep_group, ep_fsdp_group)
    return _groups[ep_size]


def max_norm_of(dims, params, trial):
    if params and "max_norm" in params:
        return float(params["max_norm"])
    if trial is None:
        raise ValueError("pkb/22 needs the call's max_norm (params) or its trial")
    return float(3 * (dims["M"] + dims["N"]) // 4 * (1 + 10 * (trial % 2)))


def run(pkb, inputs, dims, world, rank, fp64=False, params=None, trial=None):
    m, n = dims["M"], dims["N"]
    ep_size = max(1, world // 2)
    ep_group, ep_fsdp_group = ep_groups(ep_size)
    non_ep = [inputs["non_ep"].view(m, n)]
    ep = [inputs["ep"].view(m, n)]
    total = pkb.solution(non_ep, ep, max_norm_of(dims, params, trial), 2.0, ep_size,
                         dist.group.WORLD, ep_fsdp_group, ep_group)
    return {"total_norm": total.reshape(1), "non_ep_out": non_ep[0].reshape(-1),
            "ep_out": ep[0].reshape(-1)}
