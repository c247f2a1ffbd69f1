"""pkb/67_gnn_sparse_embedding_all2all = ParallelKernelBench problem 67:
solution(idx (nnz,), value (nnz, D), num_nodes) -> (recv_idx (R,), recv_value (R, D)): every
(id, row) pair sent to rank idx % W (a stable argsort by owner, then all_to_all_single of the
splits, the ids and the rows).

pkgym's outputs are capacities of C pairs whose first recv_count are PKB's and the rest zero,
plus recv_count: PKB's outputs padded with zeros here, checked exactly by the generic checker.
The output is copies, so the fp64 run is the same exchange on float64 copies."""
import torch

PKB_REFERENCE = "67_gnn_sparse_embedding_all2all.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    nnz, D, C = dims["nnz"], dims["D"], dims["C"]
    ridx, rval = pkb.solution(inputs["idx"].long(), inputs["value"].view(nnz, D), dims["N"])
    n = ridx.shape[0]
    out_idx = torch.zeros((C,), dtype=ridx.dtype, device=ridx.device)
    out_val = torch.zeros((C, D), dtype=rval.dtype, device=rval.device)
    out_idx[:n] = ridx
    out_val[:n] = rval
    count = torch.tensor([n], dtype=torch.int64, device=ridx.device)
    return {"recv_idx": out_idx, "recv_value": out_val.reshape(-1), "recv_count": count}
