"""pkb/82_vocab_parallel_log_prob_topk = ParallelKernelBench problem 82:
solution(vocab_parallel_logits (batch, seq, vocab/W), target (batch, seq), tp_group=None,
top_k=10, top_p=0.9) -> (batch, seq) fp32 log-probs, identical on all ranks.
The output is checked by problem.cu's check() (admissible kept sets): an element-wise
comparison with PKB's output can differ where the top-p cut is ambiguous, and -inf entries
must be compared as equal infinities. With fp64 inputs PKB's cumsum runs in fp64 (no bf16
rounding), so its decisions are those of exact arithmetic, not a bound on the reference's."""
from _log_prob_topk import TOP_K, TOP_P, logits_and_target
from _log_prob_topk import compare as compare_elementwise

PKB_REFERENCE = "82_vocab_parallel_log_prob_topk.py"
ATOL, RTOL = 1e-5, 1e-5  # the output's tolerance in meta.json


def run(pkb, inputs, dims, world, rank, fp64=False):
    logits, target = logits_and_target(inputs, dims, world)
    out = pkb.solution(logits, target, None, TOP_K, TOP_P)
    return {"out": out.reshape(-1)}


def compare(name, ref, got, inputs, dims, world, rank):
    """Element by element (adapters/_log_prob_topk.py), at the output's own tolerance."""
    return compare_elementwise(ref, got, ATOL, RTOL)
