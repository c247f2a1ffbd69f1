"""pkb/83_vocab_parallel_log_prob_topk_chunked = ParallelKernelBench problem 83:
solution(vocab_parallel_logits (batch, seq, vocab/W), target (batch, seq), tp_group=None,
top_k=10, top_p=0.9, chunk_size) -> (batch, seq) fp32 log-probs, identical on all ranks.
Checked by problem.cu's check() (admissible kept sets); see the 82 adapter for why an
element-wise comparison is only indicative (ambiguous cuts, -inf entries, fp64 cumsum)."""
from _log_prob_topk import TOP_K, TOP_P, logits_and_target
from _log_prob_topk import compare as compare_elementwise

PKB_REFERENCE = "83_vocab_parallel_log_prob_topk_chunked.py"
ATOL, RTOL = 1e-5, 1e-5  # the output's tolerance in meta.json


def run(pkb, inputs, dims, world, rank, fp64=False):
    logits, target = logits_and_target(inputs, dims, world)
    out = pkb.solution(logits, target, None, TOP_K, TOP_P, dims["chunk"])
    return {"out": out.reshape(-1)}


def compare(name, ref, got, inputs, dims, world, rank):
    """Element by element (adapters/_log_prob_topk.py), at the output's own tolerance."""
    return compare_elementwise(ref, got, ATOL, RTOL)
