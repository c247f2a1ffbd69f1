"""pkb/84_vocab_parallel_log_prob_topk_chunked_backward = ParallelKernelBench problem 84:
solution(vocab_parallel_logits (batch, seq, vocab/W), target (batch, seq), grad_output
(batch, seq) bf16, tp_group=None, top_k=10, top_p=0.9, chunk_size) -> (batch, seq, vocab/W)
fp32 gradient shard. Checked by problem.cu's check() (admissible kept sets); an element-wise
comparison with PKB's output differs on tokens whose top-p cut is ambiguous."""
from _log_prob_topk import TOP_K, TOP_P, logits_and_target
from _log_prob_topk import compare as compare_elementwise

PKB_REFERENCE = "84_vocab_parallel_log_prob_topk_chunked_backward.py"
ATOL, RTOL = 1e-6, 1e-4  # the output's tolerance in meta.json


def run(pkb, inputs, dims, world, rank, fp64=False):
    logits, target = logits_and_target(inputs, dims, world)
    go = inputs["grad_output"].view(dims["batch"], dims["seq"])
    out = pkb.solution(logits, target, go, None, TOP_K, TOP_P, dims["chunk"])
    return {"grad_logits": out.reshape(-1)}


def compare(name, ref, got, inputs, dims, world, rank):
    """Element by element (adapters/_log_prob_topk.py), at the output's own tolerance."""
    return compare_elementwise(ref, got, ATOL, RTOL)
