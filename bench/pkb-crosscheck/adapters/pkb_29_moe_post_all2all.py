"""pkb/29_moe_post_all2all = ParallelKernelBench problem 29:
solution(expert_outputs (sum(output_splits), N), routing_weights (M, K), selected_experts (M, K),
num_experts, input_splits, output_splits, num_global_tokens_per_local_expert (W, E/W),
routing_map (E, M) bool, local_input_permutation_mapping (K*M,), org_hidden_states_shape,
group=None) -> unpermuted tokens (M, N), with dist.all_to_all_single (torch.distributed,
initialized by the cross-check).

pkgym passes the tensors flat, the split sizes as int64 tensors (lists here, as PKB's generator
passes them), routing_map as 0/1 bytes (bool here) and num_global_tokens_per_local_expert as
tokens_per_local_expert; every rank holds and gets back K*M rows. With fp64=True the inputs are
float64 copies: the same combine in fp64 (scatter_add_ of doubles), the evaluation the tolerance
rule measures against."""
import torch

PKB_REFERENCE = "29_moe_post_all2all.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, n, e, k = dims["M"], dims["N"], dims["E"], dims["K"]
    eo = inputs["expert_outputs"].view(k * m, n)
    rw = inputs["routing_weights"].view(m, k)
    sel = inputs["selected_experts"].view(m, k)
    ins = [int(v) for v in inputs["input_splits"].tolist()]
    outs = [int(v) for v in inputs["output_splits"].tolist()]
    tpe = inputs["tokens_per_local_expert"].view(world, e // world)
    rmap = inputs["routing_map"].view(e, m).bool()
    mapping = inputs["mapping"].view(k * m)
    out = pkb.solution(eo, rw, sel, e, ins, outs, tpe, rmap, mapping, torch.Size([m, n]), None)
    return {"out": out.reshape(-1)}
