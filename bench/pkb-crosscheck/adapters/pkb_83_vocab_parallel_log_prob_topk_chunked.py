"""pkb/83_vocab_parallel_log_prob_topk_chunked = ParallelKernelBench problem 83:
solution(vocab_parallel_logits (batch, seq, vocab/W), target (batch, seq), tp_group=None,
top_k=10, top_p=0.9, chunk_size) -> (batch, seq) fp32 log-probs, identical on all ranks.
Checked by problem.cu's check() (admissible kept sets); see the 82 adapter for why an
element-wise comparison is only indicative (ambiguous cuts, -inf entries, fp64 cumsum)."""
PKB_REFERENCE = "83_vocab_parallel_log_prob_topk_chunked.py"
ATOL, RTOL = 1e-5, 1e-5  # the output's tolerance in meta.json
TOP_K, TOP_P = 10, 0.9


def run(pkb, inputs, dims, world, rank, fp64=False):
    b, s, v = dims["batch"], dims["seq"], dims["vocab"]
    logits = inputs["logits"].view(b, s, v // world)
    out = pkb.solution(logits, inputs["target"].view(b, s), None, TOP_K, TOP_P, dims["chunk"])
    return {"out": out.reshape(-1)}


def compare(name, ref, got, inputs, dims, world, rank):
    """Element by element (adapters/_topk_compare.py), at the output's own tolerance."""
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        "topk_compare", os.path.join(os.path.dirname(__file__), "_topk_compare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.compare(ref, got, ATOL, RTOL)
