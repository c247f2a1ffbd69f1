"""pkb/25_importance_sampling_loss = ParallelKernelBench problem 25: solution(hidden_states,
weight, labels, old_logprobs, advantages, ignore_index) -> (loss, None, per_token_logprobs,
per_token_loss, metrics). The None is not an output in pkgym.

fp64=True is the evaluation the tolerance rule measures against: PKB's solution() on fp64
copies, except that the logits and the per-token cross entropies are rounded to bf16 before
anything uses them. Those two roundings are the problem's semantics (F.linear and
cross_entropy return bf16 tensors) and the second is amplified: one bf16 step of a log-prob
(0.0625 near 11) moves a ratio by 6.45 %. Without them the rule would measure the bf16
quantization of the log-probs, not the reference's arithmetic. The later bf16 roundings (delta,
ratio, ratio * advantage) stay out of the fp64 evaluation; they are deterministic given the
log-prob, so per_token_loss's tolerance (meta.json "about") is tighter than the rule derives.
"""
import types

import torch

PKB_REFERENCE = "25_importance_sampling_loss.py"
IGNORE_INDEX = -100  # meta.json params.ignore_index


def run(pkb, inputs, dims, world, rank, fp64=False):
    M, N, V = dims["M"], dims["N"], dims["V"]
    hs = inputs["hidden_states"].view(M, N)
    w = inputs["weight"].view(V, N)
    labels, old, adv = inputs["labels"], inputs["old_logprobs"], inputs["advantages"]
    if not fp64:
        loss, _, logp, pg, metrics = pkb.solution(hs, w, labels, old, adv, IGNORE_INDEX)
    else:
        real = pkb.F
        pkb.F = types.SimpleNamespace(
            linear=lambda x, weight, bias=None: real.linear(x, weight, bias).to(
                torch.bfloat16).double(),
            cross_entropy=lambda logits, target, **kw: real.cross_entropy(
                logits, target, **kw).to(torch.bfloat16).double())
        try:
            loss, _, logp, pg, metrics = pkb.solution(hs, w, labels, old, adv, IGNORE_INDEX)
        finally:
            pkb.F = real
    return {"loss": loss.reshape(1), "per_token_logprobs": logp, "per_token_loss": pg,
            "metrics": metrics}
