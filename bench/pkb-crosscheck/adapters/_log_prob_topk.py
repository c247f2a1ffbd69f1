"""Shared by the adapters of the top-k/top-p log-prob problems (82-84): their inputs as PKB
takes them, and compare(), for outputs that pkgym judges with a custom checker (every admissible kept set passes). The cross-check is stricter: PKB's own
solution() on the same bf16 inputs makes the same cut decisions as pkgym's reference (both
reproduce PyTorch's bf16 cumsum), so the outputs must agree element by element: -inf where
the other has -inf, finite values within atol + rtol |want|. A cut decided the other way shows
up as a mismatch here (it is admissible for candidates, not for the reference)."""
import torch

TOP_K, TOP_P = 10, 0.9  # solution()'s defaults, which pkgym's problems use


def logits_and_target(inputs, dims, world):
    """This rank's vocab_parallel_logits (batch, seq, vocab/W) and the target (batch, seq)."""
    b, s, v = dims["batch"], dims["seq"], dims["vocab"]
    return inputs["logits"].view(b, s, v // world), inputs["target"].view(b, s)


def compare(ref, got, atol, rtol):
    ref64, got64 = ref.double(), got.to(ref.dtype).double()
    ref_inf, got_inf = torch.isinf(ref64), torch.isinf(got64)
    same_inf = (ref_inf == got_inf) & (~ref_inf | (torch.sign(ref64) == torch.sign(got64)))
    finite = ~ref_inf & ~got_inf
    diff = (ref64 - got64).abs()
    close = ~finite | (diff <= atol + rtol * got64.abs())
    bad = ~same_inf | ~close | ref64.isnan() | got64.isnan()
    max_diff = float(diff[finite].max()) if finite.any() else 0.0
    if bad.any():
        max_diff = max(max_diff, float("inf") if (~same_inf).any() else max_diff)
    return not bool(bad.any()), max_diff
