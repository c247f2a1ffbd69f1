"""pkb/40_ddp = ParallelKernelBench problem 40: solution(X_local, y_local, W1, b1, W2, b2,
exp_avg_W1, ..., exp_avg_sq_b2, lr, beta1, beta2, eps, step) returns the 12 updated tensors.
pkgym passes params, exp_avg and exp_avg_sq as flat vectors in PKB's _flatten_dense_tensors
order [W1 | b1 | W2 | b2]; this adapter splits them into PKB's tensors and flattens PKB's
outputs back."""
PKB_REFERENCE = "40_ddp.py"

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


def flat(tensors):
    import torch
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    step = adam_step(params)
    h = dict(HYPER, **{k: params[k] for k in HYPER if params and k in params})
    rows, d_in, hidden, d_out = dims["rows"], dims["d_in"], dims["hidden"], dims["d_out"]
    X = inputs["X_local"].view(rows, d_in)
    y = inputs["y_local"].view(rows, d_out)
    out = pkb.solution(X, y, *split(inputs["params"], d_in, hidden, d_out),
                       *split(inputs["exp_avg"], d_in, hidden, d_out),
                       *split(inputs["exp_avg_sq"], d_in, hidden, d_out),
                       h["lr"], h["beta1"], h["beta2"], h["eps"], step)
    return {"params_out": flat(out[0:4]), "exp_avg_out": flat(out[4:8]),
            "exp_avg_sq_out": flat(out[8:12])}
