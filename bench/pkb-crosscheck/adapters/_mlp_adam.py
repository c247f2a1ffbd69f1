"""Shared by the adapters of the ParallelKernelBench problems that take one Adam step (40, 41,
42, 43, 47): the trial's step number and hyper-parameters, in the order solution() takes them,
and the two-layer MLP's parameters in PKB's _flatten_dense_tensors order [W1 | b1 | W2 | b2]."""
HYPER = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}  # meta.json "params"


class TrialStep:
    """adam_step(params): meta.json's "step": "1 + trial % 7". crosscheck.py does not pass the
    trial (the dump's manifest has no params yet), but it calls run() twice per trial (the
    problem's dtypes, then fp64), trials in order, so the trial is the call count // 2. Each
    adapter makes its own, as crosscheck.py loads it afresh, so each counts its own calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, params):
        if params is not None and "step" in params:
            return int(params["step"])
        trial = self.calls // 2
        self.calls += 1
        return 1 + trial % 7


def adam_args(adam_step, params, defaults=HYPER):
    """solution()'s last arguments: the hyper-parameters in the order of defaults (meta.json's
    values unless the trial's params say otherwise), then the step."""
    step = adam_step(params)
    h = dict(defaults, **{k: params[k] for k in defaults if params and k in params})
    return (*(h[k] for k in defaults), step)


def mlp_batch(inputs, dims):
    """X_local (rows x d_in), y_local (rows x d_out) and the layer sizes (d_in, hidden, d_out)."""
    rows, d_in, hidden, d_out = dims["rows"], dims["d_in"], dims["hidden"], dims["d_out"]
    return (inputs["X_local"].view(rows, d_in), inputs["y_local"].view(rows, d_out),
            (d_in, hidden, d_out))


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


def run_sharded_state(pkb, inputs, dims, adam_step, params):
    """run() of 41 and 42: solution(X_local, y_local, W1, b1, W2, b2, exp_avg_part,
    exp_avg_sq_part, lr, beta1, beta2, eps, step) returns (W1', b1', W2', b2', m_part, v_part);
    the updated parameters are flattened back."""
    X, y, layers = mlp_batch(inputs, dims)
    out = pkb.solution(X, y, *split(inputs["params"], *layers), inputs["exp_avg_part"],
                       inputs["exp_avg_sq_part"], *adam_args(adam_step, params))
    return {"params_out": flat(out[0:4]), "exp_avg_out": out[4], "exp_avg_sq_out": out[5]}
