"""pkb/60_physicsnemo_distributed_irfft = ParallelKernelBench problem 60:
solution(x (B, C, H/W, Wd/2 + 1) complex, s=(H, Wd), dim=(-2, -1), norm="ortho") -> real
(B, C, H, Wd/W), rank r's columns of the inverse 2-D real FFT of a half spectrum split along H.
pkgym's x is the complex64 half spectrum as interleaved (re, im) floats: torch.view_as_complex.
With fp64=True the input is a float64 copy, viewed as complex128: PKB's padding, gathers,
all-to-all and inverse FFTs run in fp64."""
PKB_REFERENCE = "60_physicsnemo_distributed_irfft.py"

import torch


def run(pkb, inputs, dims, world, rank, fp64=False):
    b, c, h, wd = dims["B"], dims["C"], dims["H"], dims["Wd"]
    x = torch.view_as_complex(inputs["x"].view(b, c, h // world, wd // 2 + 1, 2).contiguous())
    out = pkb.solution(x, (h, wd), (-2, -1), "ortho")
    return {"out": out.reshape(-1)}
