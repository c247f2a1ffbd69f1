"""pkb/24_load_balancing_loss_fn = ParallelKernelBench problem 24: solution(gate_logits,
num_experts, top_k=2, attention_mask=None) -> 0-dim fp32 loss, all-reduced over the ranks
(torch.distributed, initialized by the cross-check) and divided by the world size.

pkgym passes gate_logits flat (M * E bf16); PKB's is (M, E). The loss is returned as one
element. fp64=True: the same function on an fp64 copy (softmax, top-2 and means in fp64, no bf16
rounding of the probabilities or of their means: the tolerance rule counts those roundings as
the reference's error, at most 2^-9 of the loss; meta.json "about").
"""
PKB_REFERENCE = "24_load_balancing_loss_fn.py"
TOP_K = 2  # meta.json params.top_k


def run(pkb, inputs, dims, world, rank, fp64=False, params=None, trial=None):
    M, E = dims["M"], dims["E"]
    top_k = int(params["top_k"]) if params and "top_k" in params else TOP_K
    gate = inputs["gate_logits"].view(M, E)
    loss = pkb.solution(gate, E, top_k, None)
    return {"loss": loss.reshape(1)}
