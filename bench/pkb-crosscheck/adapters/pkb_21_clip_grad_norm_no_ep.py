"""pkb/21_clip_grad_norm_no_ep = ParallelKernelBench problem 21: solution(grads, max_norm,
norm_type, fsdp_group) returns the global norm and clips the gradients in place; the clipped
gradients are pkgym's outputs grad<t>_out.

max_norm is a per-trial param ("(M + N) * (1 + 7 * (trial % 2))"): run() needs the call's params
(params={"max_norm": ...}) or its trial; it refuses to guess."""
import torch.distributed as dist

PKB_REFERENCE = "21_clip_grad_norm_no_ep.py"


def max_norm_of(dims, params, trial):
    if params and "max_norm" in params:
        return float(params["max_norm"])
    if trial is None:
        raise ValueError("pkb/21 needs the call's max_norm (params) or its trial")
    return float((dims["M"] + dims["N"]) * (1 + 7 * (trial % 2)))


def run(pkb, inputs, dims, world, rank, fp64=False, params=None, trial=None):
    m, n = dims["M"], dims["N"]
    grads = [inputs["grad%d" % t].view(m, n) for t in range(3)]
    total = pkb.solution(grads, max_norm_of(dims, params, trial), 2.0, dist.group.WORLD)
    out = {"total_norm": total.reshape(1)}
    for t in range(3):
        out["grad%d_out" % t] = grads[t].reshape(-1)  # clipped in place (or left alone)
    return out
