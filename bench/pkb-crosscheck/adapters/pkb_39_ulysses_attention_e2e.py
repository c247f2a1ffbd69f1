"""pkb/39_ulysses_attention_e2e = ParallelKernelBench problem 39: solution(hidden_states (B, S,
NH HD), w_qkv (3 NH HD, NH HD), w_o (NH HD, NH HD), group=None, num_heads, causal=False) -> out
(B, S, NH HD): the QKV projection, gather_seq_scatter_heads of q and of the stacked (k, v),
_local_attention (over the last two dims of (B, T, HL, HD): each position's local heads attend
to one another), gather_heads_scatter_seq and the output projection.

PKB's scale is head_dim ** -0.5 = 0.125, pkgym's softmax_scale param (the same value). Every
step of solution() is plain PyTorch in the inputs' dtype, so the fp64 evaluation is the same
call on float64 copies (dist.all_to_all moves float64 as well): the definition, unrounded."""
PKB_REFERENCE = "39_ulysses_attention_e2e.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    B, S, NH, HD = dims["B"], dims["S"], dims["NH"], dims["HD"]
    hid = NH * HD
    hidden = inputs["hidden"].view(B, S, hid)
    w_qkv = inputs["w_qkv"].view(3 * hid, hid)
    w_o = inputs["w_o"].view(hid, hid)
    out = pkb.solution(hidden, w_qkv, w_o, None, NH, False)
    return {"out": out.reshape(-1)}
