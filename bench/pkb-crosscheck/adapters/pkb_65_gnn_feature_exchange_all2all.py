"""pkb/65_gnn_feature_exchange_all2all = ParallelKernelBench problem 65:
solution(local_features (F, D), seed_inverse_ids (T,), counts_sent [W], counts_received [W])
-> (sum(counts_sent), D): the gathered rows local_features[seed_inverse_ids], split by
counts_received, exchanged by dist.all_to_all with PKB's rotated chunk lists into the output
split by counts_sent.

pkgym's counts are i64 device inputs (PKB's Python lists: .tolist() here) and its output is an
O-row capacity whose rows beyond sum(counts_sent) are zero: the output here is PKB's rows
padded with zeros, checked exactly by the generic checker. The output is copies, so the fp64
run is the same exchange on float64 copies."""
import torch

PKB_REFERENCE = "65_gnn_feature_exchange_all2all.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    F, D, O = dims["F"], dims["D"], dims["O"]
    sent = [int(v) for v in inputs["counts_sent"].tolist()]
    recvd = [int(v) for v in inputs["counts_received"].tolist()]
    y = pkb.solution(inputs["local_features"].view(F, D), inputs["seed_inverse_ids"].long(),
                     sent, recvd)
    out = torch.zeros((O, D), dtype=y.dtype, device=y.device)
    out[: y.shape[0]] = y
    return {"out": out.reshape(-1)}
