"""pkb/68_gnn_sparse_feature_fetch_projection = ParallelKernelBench problem 68:
solution(local_embedding_shard (N / W, E), input_node_ids (Q,), proj_matrix (E, O),
num_total_nodes) -> (Q, O): the queried rows fetched from their owners (stable argsort by owner,
three all_to_all_single, the rows put back in query order), then emb @ proj_matrix.

Same shapes and meaning in pkgym (num_total_nodes is the dim N). The output is bf16, compared
with allclose (rtol, atol_rms). With fp64=True the inputs are float64 copies: the same fetch and
a float64 GEMM, the evaluation the tolerance rule measures against."""

PKB_REFERENCE = "68_gnn_sparse_feature_fetch_projection.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    N, E, O = dims["N"], dims["E"], dims["O"]
    shard = inputs["local_embedding_shard"].view(N // world, E)
    proj = inputs["proj_matrix"].view(E, O)
    out = pkb.solution(shard, inputs["input_node_ids"].long(), proj, N)
    return {"out": out.reshape(-1)}
