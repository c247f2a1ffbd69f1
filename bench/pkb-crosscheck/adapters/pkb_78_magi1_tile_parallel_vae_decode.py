"""pkb/78_magi1_tile_parallel_vae_decode = ParallelKernelBench problem 78:
solution(z (1, C, T, Hh, Wd), 3, 32, 32, 0.25, 0.0, 8, 4, 1, False) -> the decoded, blended
video (1, 3, 4T, 8Hh, 8Wd), identical on every rank.

pkgym's z is PKB's tensor flattened (different on every rank, as PKB draws it); the tile
arguments are PKB generator's constants. fp64: the same call on a float64 copy of z; but PKB's
_decode_tile casts every decoded tile to bf16 and its gathers are bf16, so that call is PKB's
bf16 path again, not an fp64 evaluation: the tolerance's fp64 errors come from
bench/pkb/sim_78_magi1_tile_parallel_vae_decode.py (the same math in float64)."""
PKB_REFERENCE = "78_magi1_tile_parallel_vae_decode.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    C, T, Hh, Wd = dims["C"], dims["T"], dims["Hh"], dims["Wd"]
    z = inputs["z"].view(1, C, T, Hh, Wd)
    y = pkb.solution(z, 3, 32, 32, 0.25, 0.0, 8, 4, 1, False)
    return {"y": y.reshape(-1)}
