"""pkb/30_moe_epgroupgemm_lora_backward = ParallelKernelBench problem 30:
solution(grad_fc1_1_lora_A (r, in_f), grad_fc1_2_lora_A (r, in_f), grad_fc2_lora_B (out_f, r),
group=None) -> the three tensors, each all-reduced (sum) in place with dist.all_reduce
(torch.distributed, initialized by the cross-check).

PKB mutates its inputs; pkgym's inputs stay unchanged and the sums are outputs, so run() hands
PKB clones. With fp64=True the inputs are float64 copies: the same three all-reduces in fp64
(NCCL sums doubles), the evaluation the tolerance rule measures against."""
PKB_REFERENCE = "30_moe_epgroupgemm_lora_backward.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    r, in_f, out_f = dims["r"], dims["in_f"], dims["out_f"]
    a1 = inputs["grad_fc1_1_lora_A"].view(r, in_f).clone()
    a2 = inputs["grad_fc1_2_lora_A"].view(r, in_f).clone()
    b = inputs["grad_fc2_lora_B"].view(out_f, r).clone()
    o1, o2, o3 = pkb.solution(a1, a2, b, None)
    return {"fc1_1_out": o1.reshape(-1), "fc1_2_out": o2.reshape(-1), "fc2_out": o3.reshape(-1)}
