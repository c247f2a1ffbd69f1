"""pkb/73_vocab_parallel_cross_entropy_loss = ParallelKernelBench problem 73:
solution(vocab_parallel_logits (batch, seq, vocab/W), target (batch, seq)) -> loss (batch, seq).
PKB subtracts the max from its logits in place; the cross-check hands it a copy."""
PKB_REFERENCE = "73_vocab_parallel_cross_entropy_loss.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    b, s, v = dims["batch"], dims["seq"], dims["vocab"]
    logits = inputs["logits"].view(b, s, v // world).clone()
    target = inputs["target"].view(b, s)
    return {"loss": pkb.solution(logits, target).reshape(-1)}
