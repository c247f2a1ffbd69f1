"""pkb/26_moe_token_preprocess = ParallelKernelBench problem 26:
solution(expert_mask (E, K, M) fp32, num_experts, group=None) -> (input_splits (W,) int64,
output_splits (W,) int64, num_global_tokens_per_local_expert (W, E/W) fp32,
num_global_sum_tokens_per_local_expert (E/W,) fp32), the last three from an fp32 all-gather of
the per-expert counts (torch.distributed, initialized by the cross-check).

pkgym passes the mask flat (E * K * M); PKB returns its outputs on the CPU, moved here to the
inputs' device. Every output is an integer count (exact in fp32 below 2^24), so the fp64 run is
the same counts."""
PKB_REFERENCE = "26_moe_token_preprocess.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    m, e, k = dims["M"], dims["E"], dims["K"]
    mask = inputs["expert_mask"].view(e, k, m)
    dev = mask.device
    ins, outs, per_local, sum_local = pkb.solution(mask, e, None)
    return {"input_splits": ins.reshape(-1).to(dev),
            "output_splits": outs.reshape(-1).to(dev),
            "tokens_per_local_expert": per_local.reshape(-1).to(dev),
            "sum_per_local_expert": sum_local.reshape(-1).to(dev)}
