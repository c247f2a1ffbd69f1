"""pkb/23_grad_acc_loss = ParallelKernelBench problem 23: solution(loss, local_valid_tokens,
global_valid_tokens, grad_normalized_loss, grad_loss_sum) -> (normalized_loss, loss_sum,
grad_loss), all 0-dim.

pkgym passes one-element tensors; PKB's are 0-dim (the type promotion rules it relies on, a
0-dim int64 tensor cast to bf16 before a bf16 op, hold for 0-dim tensors), so they are
reshaped to 0-dim first. fp64=True: the same function on fp64 copies (the counts stay int64,
so they are cast to fp64 exactly: the bf16 rounding of the counts is then absent, which the
tolerance rule counts as the reference's error, as it should).
"""
PKB_REFERENCE = "23_grad_acc_loss.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    args = [inputs[k].reshape(()) for k in ("loss", "local_valid_tokens", "global_valid_tokens",
                                            "grad_normalized_loss", "grad_loss_sum")]
    normalized, loss_sum, grad = pkb.solution(*args)
    return {"normalized_loss": normalized.reshape(1), "loss_sum": loss_sum.reshape(1),
            "grad_loss": grad.reshape(1)}
