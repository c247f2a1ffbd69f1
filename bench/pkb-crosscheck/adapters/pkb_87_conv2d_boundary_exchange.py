"""pkb/87_conv2d_boundary_exchange = ParallelKernelBench problem 87:
solution(x (1, C, h, Wd), weight (C, C, 3, 3), bias (C), stride=1, padding=1) -> rank r's rows
of the 3x3 convolution of the image stacked from every rank's shard (halo rows from the
neighbours, zeros at the image's edges), (1, C, h, Wd).

pkgym's x is a C x H x Wd capacity whose first `rows` = h_r rows of every channel plane are
the shard (1 <= h_r <= H, ragged across ranks); PKB's all-gather of every rank's first and
last row works for any h_r >= 1, so PKB's solution() runs on the shards x[:, :, :h_r] as they
are. pkgym's y has the same capacity with rows h_r.. zero: the output here is PKB's rows padded
with zeros, checked by the generic allclose checker. fp64: the same call on float64 copies."""
import torch

PKB_REFERENCE = "87_conv2d_boundary_exchange.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    C, H, Wd = dims["C"], dims["H"], dims["Wd"]
    h = int(inputs["rows"][0])
    x = inputs["x"].view(1, C, H, Wd)[:, :, :h, :].contiguous()
    y = pkb.solution(x, inputs["weight"].view(C, C, 3, 3), inputs["bias"].view(C), 1, 1)
    out = torch.zeros((1, C, H, Wd), dtype=y.dtype, device=y.device)
    out[:, :, :h, :] = y
    return {"y": out.reshape(-1)}
