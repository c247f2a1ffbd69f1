"""pkb/61_gsplat_3d_gaussian_splatting = ParallelKernelBench problem 61:
solution(means, quats, scales, opacities, colors, viewmats, Ks, W, H) -> the visible (gaussian,
camera) pairs of this rank's cameras, from every rank (camera_ids, gaussian_ids, radii, means2d,
depths, conics, opacities, colors), gsplat's distributed projection and all-to-all.

pkgym's gaussian inputs are N-row capacities whose first n rows are the shard (ragged, zero on
some ranks); PKB's solution() runs on the first n rows as they are, with the C cameras as
(C, 4, 4) and (C, 3, 3). pkgym's contract computes in fp32 from bf16 inputs (PKB computes in its
inputs' dtype, bf16, whose 2-pixel means2d and bf16 ceil decisions no fp32 code matches): the
non-fp64 call is PKB's solution() on fp32 copies (the bf16 values exactly), the fp64 call on
float64 copies. The rows are laid out as pkgym's outputs: ids (camera, gaussian) and radii as
int32 pairs, proj = (means2d, depth, conic, opacity, color) as 10 fp32 per row, the capacity of
W C N rows zero past total."""
import torch

PKB_REFERENCE = "61_gsplat_3d_gaussian_splatting.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    N, C, IW, IH = dims["N"], dims["C"], dims["IW"], dims["IH"]
    n = int(inputs["n"][0])
    ft = torch.float64 if fp64 else torch.float32

    def rows(name, k):
        return inputs[name][:k * n].to(ft).reshape(n, k).contiguous()

    (cam, gid, radii, means2d, depths, conics, opac, colors) = pkb.solution(
        rows("means", 3), rows("quats", 4), rows("scales", 3),
        inputs["opacities"][:n].to(ft).contiguous(), rows("colors", 3),
        inputs["viewmats"].to(ft).reshape(C, 4, 4).contiguous(),
        inputs["Ks"].to(ft).reshape(C, 3, 3).contiguous(), IW, IH)
    m = cam.numel()
    R = world * C * N
    dev = cam.device
    ids = torch.zeros(R, 2, dtype=torch.int32, device=dev)
    ids[:m, 0] = cam.to(torch.int32)
    ids[:m, 1] = gid.to(torch.int32)
    rad = torch.zeros(R, 2, dtype=torch.int32, device=dev)
    rad[:m] = radii.to(torch.int32).reshape(m, 2)
    proj = torch.zeros(R, 10, dtype=ft, device=dev)
    proj[:m] = torch.cat([means2d.reshape(m, 2), depths.reshape(m, 1), conics.reshape(m, 3),
                          opac.reshape(m, 1), colors.reshape(m, 3)], dim=1).to(ft)
    return {"ids": ids.reshape(-1), "radii": rad.reshape(-1), "proj": proj.reshape(-1),
            "total": torch.tensor([m], dtype=torch.int64, device=dev)}
