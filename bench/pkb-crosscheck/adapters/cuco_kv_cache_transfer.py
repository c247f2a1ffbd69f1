"""cuco/kv_cache_transfer: CUCo's KV-cache transfer in pages. No PKB reference: the independent
implementation is bench/pkb-crosscheck/local/cuco_kv_cache_transfer.py (LOCAL_REFERENCE),
loaded, run and timed as PKB's solution() is. pkgym's caches are in-out: the reference gets
copies of their old contents and returns them updated; the fp64 run is the same on float64
copies (the GEMMs in fp64, the old slots unchanged)."""
LOCAL_REFERENCE = "cuco_kv_cache_transfer.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    T, H, D, B, BS, MB, NB = (dims[k] for k in ("T", "H", "D", "B", "BS", "MB", "NB"))
    k_cache, v_cache = pkb.solution(
        inputs["x"].view(T, H), inputs["w_k"].view(H, D), inputs["w_v"].view(H, D),
        inputs["seq_lens"], inputs["block_table"].view(B, MB), inputs["peer_seq_lens"],
        inputs["peer_block_table"].view(B, MB), inputs["k_cache"].view(NB, BS, D),
        inputs["v_cache"].view(NB, BS, D))
    return {"k_cache": k_cache.reshape(-1), "v_cache": v_cache.reshape(-1)}
