"""pkb/81_sam3_allgather_iou_suppression = ParallelKernelBench problem 81:
solution(low_res_masks_local (n, H, W), obj_scores_local (n,), num_obj_per_gpu, last_occluded
(T,), iou_threshold, reverse) -> (masks_global (T, H, W) fp32 with the suppressed objects' masks
at -10, scores_global (T,) fp32, to_suppress (T,) bool).

pkgym's masks and scores are C-row capacities whose first counts[rank] rows are the rank's
(sliced here), counts and last_occluded replicated (last_occluded a W C capacity: its first T
values are PKB's tensor). The outputs are placed at the front of pkgym's W C capacities, zero
past T (to_suppress as uint8), and compared by the generic checkers, exactly (tolerance 0): the
suppression is order-free and computed from integer counts with one fp32 division, so the output
is unique. fp64: the same call on float64 copies (PKB's solution() casts the masks to fp32
itself, so it is the same computation)."""
import torch

PKB_REFERENCE = "81_sam3_allgather_iou_suppression.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    C, H, Wd = dims["C"], dims["H"], dims["Wd"]
    params = params or {}
    thr = float(params.get("iou_threshold", 0.7))
    reverse = bool(int(params.get("reverse", 0)))
    counts = [int(v) for v in inputs["counts"].reshape(-1)[:world].tolist()]
    n = counts[rank]
    T = sum(counts)
    masks = inputs["masks"].reshape(C, H, Wd)[:n].contiguous()
    scores = inputs["scores"].reshape(C)[:n].contiguous()
    last = inputs["last_occluded"].reshape(-1)[:T].contiguous()
    mg, sg, sup = pkb.solution(masks, scores, counts, last, iou_threshold=thr, reverse=reverse)
    dev = mg.device
    masks_out = torch.zeros(world * C * H * Wd, dtype=mg.dtype, device=dev)
    masks_out[: T * H * Wd] = mg.reshape(-1)
    scores_out = torch.zeros(world * C, dtype=sg.dtype, device=dev)
    scores_out[:T] = sg.reshape(-1)
    flags = torch.zeros(world * C, dtype=torch.uint8, device=dev)
    flags[:T] = sup.reshape(-1).to(torch.uint8)
    return {"masks_out": masks_out, "scores_out": scores_out, "suppress": flags}
