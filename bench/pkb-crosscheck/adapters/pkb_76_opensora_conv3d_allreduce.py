"""pkb/76_opensora_conv3d_allreduce = ParallelKernelBench problem 76:
solution(input (1, Cl, T, Hh, Wd), weight (Co, Cl, 3, 3, 3), bias (Co), stride=1, padding=0,
dilation=1, groups=1) -> the all-reduced bf16 convolution plus the bias, (1, Co, T-2, Hh-2, Wd-2),
identical on every rank.

pkgym's x, weight and bias are PKB's tensors flattened (x and weight differ per rank, the bias
is replicated); PKB's constants stride, padding, dilation and groups are passed as PKB's
generator passes them. fp64: the same call on float64 copies (F.conv3d and the all-reduce in
float64)."""
PKB_REFERENCE = "76_opensora_conv3d_allreduce.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    Co, Cl, T, Hh, Wd = dims["Co"], dims["Cl"], dims["T"], dims["Hh"], dims["Wd"]
    x = inputs["x"].view(1, Cl, T, Hh, Wd)
    w = inputs["weight"].view(Co, Cl, 3, 3, 3)
    y = pkb.solution(x, w, inputs["bias"].view(Co), 1, 0, 1, 1)
    return {"y": y.reshape(-1)}
