"""pkb/43_fused_adam_grad_unshard_allgather = ParallelKernelBench problem 43:
solution(grad_shard, master_shard, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, step) returns
the all-gathered updated master weights."""
PKB_REFERENCE = "43_fused_adam_grad_unshard_allgather.py"

HYPER = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}  # meta.json "params"
_calls = [0]


def adam_step(params):
    """meta.json's "step": "1 + trial % 7". crosscheck.py does not pass the trial (the dump's
    manifest has no params yet), but it calls run() twice per trial (the problem's dtypes, then
    fp64), trials in order, so the trial is the call count // 2."""
    if params is not None and "step" in params:
        return int(params["step"])
    trial = _calls[0] // 2
    _calls[0] += 1
    return 1 + trial % 7


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    step = adam_step(params)
    h = dict(HYPER, **{k: params[k] for k in HYPER if params and k in params})
    gathered = pkb.solution(inputs["grad_shard"], inputs["master_shard"], inputs["exp_avg"],
                            inputs["exp_avg_sq"], h["lr"], h["beta1"], h["beta2"], h["eps"], step)
    return {"gathered": gathered}
