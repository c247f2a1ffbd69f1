"""pkb/27_moe_all2all_primitive = ParallelKernelBench problem 27:
solution(local_tensor (M, N), input_split_sizes, output_split_sizes, group=None) -> output
(sum(output_split_sizes), N): dist.all_to_all_single with split sizes (torch.distributed,
initialized by the cross-check).

pkgym passes the tensor flat and the split sizes as int64 tensors (PKB takes lists or tensors;
lists here, as PKB's generator passes them); its output is a dispatch buffer of C rows whose rows
after the received ones are zero, so PKB's output is padded with zero rows to C. The rows are
copies, so the fp64 run is the same exchange on fp64 copies."""
PKB_REFERENCE = "27_moe_all2all_primitive.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    import torch
    m, n, c = dims["M"], dims["N"], dims["C"]
    x = inputs["local_tensor"].view(m, n)
    ins = [int(v) for v in inputs["input_split_sizes"].tolist()]
    outs = [int(v) for v in inputs["output_split_sizes"].tolist()]
    got = pkb.solution(x, ins, outs, None)
    out = torch.zeros((c, n), dtype=got.dtype, device=got.device)
    out[:got.shape[0]] = got
    return {"output": out.reshape(-1)}
