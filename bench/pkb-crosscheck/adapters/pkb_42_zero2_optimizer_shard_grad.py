"""pkb/42_zero2_optimizer_shard_grad = ParallelKernelBench problem 42: solution(X_local, y_local, W1, b1, W2, b2,
exp_avg_part, exp_avg_sq_part, lr, beta1, beta2, eps, step) returns (W1', b1', W2', b2',
m_part, v_part). pkgym passes params as one flat vector in PKB's _flatten_dense_tensors order
[W1 | b1 | W2 | b2]; this adapter splits it into PKB's tensors and flattens PKB's updated
parameters back."""
import torch

PKB_REFERENCE = "42_zero2_optimizer_shard_grad.py"

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


def split(flat, d_in, hidden, d_out):
    """[W1 (hidden x d_in) | b1 (hidden) | W2 (d_out x hidden) | b2 (d_out)] as PKB's tensors."""
    sizes = [hidden * d_in, hidden, d_out * hidden, d_out]
    shapes = [(hidden, d_in), (hidden,), (d_out, hidden), (d_out,)]
    out, off = [], 0
    for n, shape in zip(sizes, shapes):
        out.append(flat[off:off + n].reshape(shape).contiguous())
        off += n
    assert off == flat.numel()
    return out


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    step = adam_step(params)
    h = dict(HYPER, **{k: params[k] for k in HYPER if params and k in params})
    rows, d_in, hidden, d_out = dims["rows"], dims["d_in"], dims["hidden"], dims["d_out"]
    out = pkb.solution(inputs["X_local"].view(rows, d_in), inputs["y_local"].view(rows, d_out),
                       *split(inputs["params"], d_in, hidden, d_out), inputs["exp_avg_part"],
                       inputs["exp_avg_sq_part"], h["lr"], h["beta1"], h["beta2"], h["eps"],
                       step)
    return {"params_out": torch.cat([t.detach().reshape(-1) for t in out[0:4]]),
            "exp_avg_out": out[4], "exp_avg_sq_out": out[5]}
