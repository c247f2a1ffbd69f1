"""pkb/35_ulysses_all_gather_variable_primitive = ParallelKernelBench problem 35:
solution(x (rows, N), gather_dim=0) -> every rank's shard concatenated along dim 0, (total, N),
identical on every rank; the shards' row counts differ per rank (zero included).

pkgym's x is an M x N capacity whose first `rows` rows are the shard; its y is a W M-row
capacity whose first `total` rows are the output (the rest is not output), so y has a custom
checker: compare() below checks PKB's (total, N) against the first total rows of pkgym's,
bit for bit; `total` is checked exactly by the generic checker. The output is exact copies, so
the fp64 run is the same gather on fp64 copies."""
import torch

PKB_REFERENCE = "35_ulysses_all_gather_variable_primitive.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    n = dims["N"]
    rows = int(inputs["rows"][0])
    y = pkb.solution(inputs["x"].view(dims["M"], n)[:rows], 0)
    total = torch.tensor([y.shape[0]], dtype=torch.int64, device=y.device)
    return {"y": y.reshape(-1), "total": total}


def compare(name, ref, got, inputs, dims, world, rank):
    """y: PKB's rows against the first as many of pkgym's, bit for bit (exact copies)."""
    n = got.numel()
    if n > ref.numel():
        return False, float("inf")
    want = ref[:n]
    got = got.to(ref.dtype)
    ok = bool(torch.equal(got.view(torch.int16), want.view(torch.int16)))
    diff = (got.float() - want.float()).abs().max().item() if n else 0.0
    return ok, diff
