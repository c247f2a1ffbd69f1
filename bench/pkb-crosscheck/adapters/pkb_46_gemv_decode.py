"""pkb/46_gemv_decode = ParallelKernelBench problem 46: solution(hidden_states, weight_shard,
bias_shard) -> the logits over the whole vocabulary, identical on every rank."""
PKB_REFERENCE = "46_gemv_decode.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    T, hidden, vocab = dims["T"], dims["hidden"], dims["vocab"]
    V = vocab // world
    logits = pkb.solution(inputs["hidden_states"].view(T, hidden),
                          inputs["weight_shard"].view(V, hidden), inputs["bias_shard"].view(V))
    return {"logits": logits.reshape(-1)}
