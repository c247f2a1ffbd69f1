"""The PyTorch reference of cuco/kv_cache_transfer (CUCo's KV-cache transfer workload, in pages),
written for pkgym: CUCo has no PyTorch reference, so this plays the part PKB's reference/*.py
plays for the pkb/ suite (crosscheck.py loads it through the adapter's LOCAL_REFERENCE and runs
and times solution() the same way). Run on every rank of a torch.distributed process group.

Rank r prefills its sequences and is the decode rank of its partner p = (r + W/2) % W:
K = x[:n] @ w_k, V = x[:n] @ w_v (n: its tokens), sent to p; the partner's rows received and
written into the paged caches at peer_block_table[b][i // BS], slot i % BS; every other slot
keeps its value (the caches are updated in place and returned)."""
import torch
import torch.distributed as dist


def solution(x, w_k, w_v, seq_lens, block_table, peer_seq_lens, peer_block_table, k_cache,
             v_cache):
    rank, world = dist.get_rank(), dist.get_world_size()
    partner = (rank + world // 2) % world
    bs, d = k_cache.shape[1], k_cache.shape[2]
    n, m = int(seq_lens.sum()), int(peer_seq_lens.sum())
    k = x[:n] @ w_k
    v = x[:n] @ w_v
    recv_k = torch.empty((m, d), dtype=k.dtype, device=k.device)
    recv_v = torch.empty((m, d), dtype=v.dtype, device=v.device)
    ops = []
    if n > 0:
        ops += [dist.P2POp(dist.isend, k.contiguous(), partner),
                dist.P2POp(dist.isend, v.contiguous(), partner)]
    if m > 0:
        ops += [dist.P2POp(dist.irecv, recv_k, partner), dist.P2POp(dist.irecv, recv_v, partner)]
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    if m == 0:
        return k_cache, v_cache
    lens = peer_seq_lens.long()
    seq = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens)
    starts = torch.cumsum(lens, 0) - lens
    tok = torch.arange(m, device=lens.device) - starts[seq]
    page = peer_block_table.long()[seq, tok // bs]
    k_cache[page, tok % bs] = recv_k
    v_cache[page, tok % bs] = recv_v
    return k_cache, v_cache
