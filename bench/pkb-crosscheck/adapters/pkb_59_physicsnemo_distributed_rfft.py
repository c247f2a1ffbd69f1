"""pkb/59_physicsnemo_distributed_rfft = ParallelKernelBench problem 59:
solution(x (B, H, Wd/W) real, s=(H, Wd), dim=(1, 2), norm="ortho") -> complex (B, H/W, Wd/2 + 1),
rank r's rows of rfft2 of the field split along its last dimension. pkgym's out is that tensor
as interleaved (re, im) floats: torch.view_as_real. With fp64=True the input is a float64 copy
and PKB's FFTs and all-to-all run in complex128: the fp64 evaluation."""
import torch

PKB_REFERENCE = "59_physicsnemo_distributed_rfft.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    b, h, wd = dims["B"], dims["H"], dims["Wd"]
    x = inputs["x"].view(b, h, wd // world)
    out = pkb.solution(x, (h, wd), (1, 2), "ortho")
    return {"out": torch.view_as_real(out.contiguous()).reshape(-1)}
