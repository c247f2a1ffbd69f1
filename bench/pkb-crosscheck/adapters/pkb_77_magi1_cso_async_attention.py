"""pkb/77_magi1_cso_async_attention = ParallelKernelBench problem 77: solution(query (T, HQ, 128),
key_value (T, HKV, 256), k_ranges (R, 2), cp_shuffle_num R, clip_token_nums CLIP) -> out
(T, HQ, 128): MAGI-1's context-shuffle-overlap attention (all-to-alls by heads around one SDPA
per range, the output pipelined back with the next range's queries).

pkgym's k_ranges is PKB's [i CLIP, (i + 1) CLIP) (generate() sets it; passed through as given).
The fp64 evaluation is done here by the definition rather than through PKB's permutations (so the
cross-check also tests PKB's index arithmetic against the contract's closed form): every rank's
key_value all-gathered in rank order; range i's keys are the tokens [i SPB, (i + 1) SPB) of
ranks 0 .. W - 1 concatenated, the first CLIP of them; softmax(q k^T / sqrt(128)) v in float64
per range and key/value head (query heads h / (HQ / HKV) share it), non-causal. Works at W = 1
(one rank: the all-gather is the rank's own key_value)."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "77_magi1_cso_async_attention.py"


def _views(inputs, dims):
    T, HQ, HKV, D = dims["T"], dims["HQ"], dims["HKV"], dims["D"]
    query = inputs["query"].view(T, HQ, D)
    key_value = inputs["key_value"].view(T, HKV, 2 * D)
    k_ranges = inputs["k_ranges"].view(dims["R"], 2)
    return query, key_value, k_ranges


def _attention_fp64(query, key_value, R, clip, world):
    T, HQ, D = query.shape
    HKV = key_value.shape[1]
    spb = T // R
    if world > 1:
        kvs = [torch.empty_like(key_value) for _ in range(world)]
        dist.all_gather(kvs, key_value.contiguous())
    else:
        kvs = [key_value]
    group = HQ // HKV
    out = torch.empty_like(query)
    scale = 1.0 / (D ** 0.5)
    for i in range(R):
        keys = torch.cat([kv[i * spb:(i + 1) * spb] for kv in kvs], dim=0)[:clip]  # (clip, HKV, 2D)
        q = query[i * spb:(i + 1) * spb]  # (spb, HQ, D)
        for g in range(HKV):
            k = keys[:, g, :D]
            v = keys[:, g, D:]
            qg = q[:, g * group:(g + 1) * group, :].reshape(-1, D)  # (spb * group, D)
            p = torch.softmax((qg @ k.transpose(0, 1)) * scale, dim=-1)
            out[i * spb:(i + 1) * spb, g * group:(g + 1) * group, :] = (p @ v).view(spb, group, D)
    return out


def run(pkb, inputs, dims, world, rank, fp64=False):
    query, key_value, k_ranges = _views(inputs, dims)
    R, clip = dims["R"], dims["CLIP"]
    if fp64:
        return {"out": _attention_fp64(query, key_value, R, clip, world).reshape(-1)}
    out = pkb.solution(query, key_value, k_ranges, R, clip, group=dist.group.WORLD)
    return {"out": out.reshape(-1)}
