"""pkb/63_deepmd_kalman_filter_optimizer = ParallelKernelBench problem 63:
solution(H (nb blocks of (block, 1)), error (scalar), weights (nb blocks), P (nb blocks of
(block, block)), kalman_lambda, kalman_nue) -> (every rank's updated weights, W nb blocks in rank
order; the local updated P; lambda_next). PKB updates its lists in place: the adapter hands it
copies. fp64 throughout: the fp64 evaluation is the same call."""
import torch

PKB_REFERENCE = "63_deepmd_kalman_filter_optimizer.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    nb, blk = dims["nb"], dims["block"]
    p = params or {}
    lam = float(p.get("kalman_lambda", 0.98))
    nue = float(p.get("kalman_nue", 0.9987))
    H = [t.reshape(blk, 1).clone() for t in inputs["H"].double().view(nb, blk)]
    w = [t.reshape(blk, 1).clone() for t in inputs["weights"].double().view(nb, blk)]
    P = [t.clone() for t in inputs["P"].double().view(nb, blk, blk)]
    err = inputs["error"].double().view(())
    weights, P_out, lam_next = pkb.solution(H, err, w, P, lam, nue)
    return {
        "weights_out": torch.cat([t.reshape(-1) for t in weights]),
        "P_out": torch.cat([t.reshape(-1) for t in P_out]),
        "lambda_next": lam_next.reshape(-1).double(),
    }
