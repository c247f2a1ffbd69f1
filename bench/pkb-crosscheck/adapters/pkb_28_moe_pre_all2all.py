"""pkb/28_moe_pre_all2all = ParallelKernelBench problem 28:
solution(hidden_states (M, N), expert_mask (E, K, M), num_experts, input_splits, output_splits,
num_global_tokens_per_local_expert (W, E/W), group=None) -> (global_permuted_hidden_states
(sum(output_splits), N), routing_map (E, M), local_input_permutation_mapping (K*M,), the original
shape), with dist.all_to_all_single (torch.distributed, initialized by the cross-check).

pkgym passes the tensors flat and the split sizes as int64 tensors (lists here, as PKB's
generator passes them); every rank receives K*M rows, so the outputs have pkgym's fixed sizes.
The shape (not a tensor) is dropped. The outputs are copies, 0/1 sums and indices, so the fp64
run is the same dispatch on fp64 copies."""
PKB_REFERENCE = "28_moe_pre_all2all.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, n, e, k = dims["M"], dims["N"], dims["E"], dims["K"]
    hidden = inputs["hidden_states"].view(m, n)
    mask = inputs["expert_mask"].view(e, k, m)
    ins = [int(v) for v in inputs["input_splits"].tolist()]
    outs = [int(v) for v in inputs["output_splits"].tolist()]
    tpe = inputs["tokens_per_local_expert"].view(world, e // world)
    out, rmap, mapping, _ = pkb.solution(hidden, mask, e, ins, outs, tpe, None)
    return {"out": out.reshape(-1), "routing_map": rmap.reshape(-1),
            "mapping": mapping.reshape(-1)}
