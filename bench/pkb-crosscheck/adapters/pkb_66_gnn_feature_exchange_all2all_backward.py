"""pkb/66_gnn_feature_exchange_all2all_backward = ParallelKernelBench problem 66:
solution(grad_output (sum(counts_sent), D), seed_inverse_ids (T,), seed_size, counts_sent [W],
counts_received [W]) -> (seed_size, D): the gradient rows split by counts_sent, exchanged by
dist.all_to_all with PKB's rotated chunk lists into T rows split by counts_received, then
torch.sparse.mm of the one-hot (seed_size x T) COO matrix with them (a scatter-add by id).

pkgym's counts are i64 device inputs (PKB's Python lists: .tolist() here), its grad_output an
O-row capacity whose first sum(counts_sent) rows are PKB's grad_output (the slice passed here),
and seed_size is the dim F. The output is compared with allclose (atol_rms, rtol). With
fp64=True the inputs are float64 copies: the same exchange and sparse.mm in fp64, the
evaluation the tolerance rule measures against."""
import torch

PKB_REFERENCE = "66_gnn_feature_exchange_all2all_backward.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    F, D, O = dims["F"], dims["D"], dims["O"]
    sent = [int(v) for v in inputs["counts_sent"].tolist()]
    recvd = [int(v) for v in inputs["counts_received"].tolist()]
    gout = inputs["grad_output"].view(O, D)[: sum(sent)]
    y = pkb.solution(gout, inputs["seed_inverse_ids"].long(), F, sent, recvd)
    return {"grad_features": y.reshape(-1)}
