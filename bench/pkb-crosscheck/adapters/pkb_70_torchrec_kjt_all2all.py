"""pkb/70_torchrec_kjt_all2all = ParallelKernelBench problem 70:
solution(lengths (F B,), values (sum(lengths),), key_splits [W], batch_size) -> {lengths,
values, stride, stride_per_rank}: TorchRec's KJT all-to-all (the metadata, the lengths and the
ids by all_to_all_single, then the recat of the received rows).

pkgym's key_splits is an i64 device input (PKB's Python list: .tolist() here), its values an
F B L capacity whose first sum(lengths) ids are PKB's values (the slice passed here), and its
outputs capacities whose used prefixes are PKB's lengths and values, zero after, plus out_sizes
= {len(lengths), len(values)}; stride (W B) and stride_per_rank ([B] * W) are constants and
are checked here instead of compared. Integers: the fp64 run is the same call."""
import torch

PKB_REFERENCE = "70_torchrec_kjt_all2all.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    B, NL, NV = dims["B"], dims["NL"], dims["NV"]
    lengths = inputs["lengths"].long()
    ks = [int(v) for v in inputs["key_splits"].tolist()]
    used = int(lengths.sum().item())
    out = pkb.solution(lengths, inputs["values"].long()[:used], ks, B)
    assert int(out["stride"]) == world * B
    assert [int(v) for v in out["stride_per_rank"].tolist()] == [B] * world
    ol, ov = out["lengths"].reshape(-1), out["values"].reshape(-1)
    out_lengths = torch.zeros((NL,), dtype=torch.int64, device=lengths.device)
    out_values = torch.zeros((NV,), dtype=torch.int64, device=lengths.device)
    out_lengths[: ol.numel()] = ol
    out_values[: ov.numel()] = ov
    sizes = torch.tensor([ol.numel(), ov.numel()], dtype=torch.int64, device=lengths.device)
    return {"out_lengths": out_lengths, "out_values": out_values, "out_sizes": sizes}
