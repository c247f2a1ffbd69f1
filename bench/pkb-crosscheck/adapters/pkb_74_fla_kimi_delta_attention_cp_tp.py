"""pkb/74_fla_kimi_delta_attention_cp_tp = ParallelKernelBench problem 74:
solution(q, k (1, Ls, H, Dk), v (1, Ls, H, Dv), g (1, Ls, H, Dk), beta (1, Ls, H), a_log (H),
dt_bias (H Dk), cp_group, tp_group) -> this rank's tokens of KDA over its CP group's sequence,
summed over its TP pair, (1, Ls, H, Dv).

The groups are PKB's generator's: at W >= 4 (even) _build_tp_cp_groups(2) (Megatron 'tp-cp': TP
pairs {2c, 2c+1}, CP sets {t, t+2, ...}), made once per process (new_group is collective); at
W = 2 the CP group is the world and there is no TP group. fp64: the same call on float64 copies
(PKB's _kda_forward casts with .float(), so that call is fp32 again; the fp64 truth of the
tolerance comes from bench/pkb/sim_74_fla_kimi_delta_attention_cp_tp.py)."""
import torch.distributed as dist

PKB_REFERENCE = "74_fla_kimi_delta_attention_cp_tp.py"

_groups = None


def _cp_tp_groups(world):
    global _groups
    if _groups is None:
        if world >= 4 and world % 2 == 0:
            me, tp, cp = dist.get_rank(), None, None
            for c in range(world // 2):
                ranks = [2 * c, 2 * c + 1]
                g = dist.new_group(ranks=ranks)
                if me in ranks:
                    tp = g
            for t in range(2):
                ranks = list(range(t, world, 2))
                g = dist.new_group(ranks=ranks)
                if me in ranks:
                    cp = g
            _groups = (cp, tp)
        else:
            _groups = (dist.group.WORLD, None)
    return _groups


def run(pkb, inputs, dims, world, rank, fp64=False):
    Ls, H, Dk, Dv = dims["Ls"], dims["H"], dims["Dk"], dims["Dv"]
    cp, tp = _cp_tp_groups(world)
    y = pkb.solution(inputs["q"].view(1, Ls, H, Dk), inputs["k"].view(1, Ls, H, Dk),
                     inputs["v"].view(1, Ls, H, Dv), inputs["g"].view(1, Ls, H, Dk),
                     inputs["beta"].view(1, Ls, H), inputs["a_log"].view(H),
                     inputs["dt_bias"].view(H * Dk), cp, tp)
    return {"y": y.reshape(-1)}
