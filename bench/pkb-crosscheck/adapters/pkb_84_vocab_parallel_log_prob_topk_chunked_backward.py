"""pkb/84_vocab_parallel_log_prob_topk_chunked_backward = ParallelKernelBench problem 84:
solution(vocab_parallel_logits (batch, seq, vocab/W), target (batch, seq), grad_output
(batch, seq) bf16, tp_group=None, top_k=10, top_p=0.9, chunk_size) -> (batch, seq, vocab/W)
fp32 gradient shard. Checked by problem.cu's check() (admissible kept sets); an element-wise
comparison with PKB's output differs on tokens whose top-p cut is ambiguous."""
PKB_REFERENCE = "84_vocab_parallel_log_prob_topk_chunked_backward.py"
ATOL, RTOL = 1e-6, 1e-4  # the output's tolerance in meta.json
TOP_K, TOP_P = 10, 0.9


def run(pkb, inputs, dims, world, rank, fp64=False):
    b, s, v = dims["batch"], dims["seq"], dims["vocab"]
    logits = inputs["logits"].view(b, s, v // world)
    go = inputs["grad_output"].view(b, s)
    out = pkb.solution(logits, inputs["target"].view(b, s), go, None, TOP_K, TOP_P,
                       dims["chunk"])
    return {"grad_logits": out.reshape(-1)}


def compare(name, ref, got, inputs, dims, world, rank):
    """Element by element (adapters/_topk_compare.py), at the output's own tolerance."""
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        "topk_compare", os.path.join(os.path.dirname(__file__), "_topk_compare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.compare(ref, got, ATOL, RTOL)
