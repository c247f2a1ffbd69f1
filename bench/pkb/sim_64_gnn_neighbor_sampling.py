#!/usr/bin/env python3
"""Host simulation of pkb/64_gnn_neighbor_sampling (pure Python).

Over every graph mode (key % 4) of problem.cu's generate() (gen_graph and fill_col, ported) at
W = 2, 4, 8 (small graphs, N = 600 and 1500, S = 40, keys 0-7, and PKB's size N = 10000,
S = 512, keys 0-3), it checks that
  - the inputs are what meta.json says: colptr non-decreasing within the capacity E, degree 16 and
    neighbours (v + 1 .. v + 16) % N, owner v % W and seeds (r S + i) % N in mode 0 (PKB's
    generator, bit for bit) with the whole adjacency on every rank; in modes 1-3 isolated nodes,
    hubs, a rank's own lists only (garbage elsewhere), ranks owning no node in mode 2, distinct
    seeds with the guard first;
  - PKB's solution() (a line-by-line port of 64_gnn_neighbor_sampling.py: the partition by
    owner, _exchange_nodes, _sample_one_hop_csc_dist, _exchange_replies, the grouped_index
    reordering, _remove_duplicates with np.unique(return_index), _relabel_neighborhood; all
    ranks stepped together, with all_to_all_single simulated) runs without its ranks disagreeing
    on the number of hops (which would hang its collectives);
  - problem.cu's reference (the stable partition by owner, the count and node exchanges, the
    owners' k-slot replies, the scan, the first-occurrence table, the compaction, the relabel)
    and solutions/correct.cu (the pull from the owner's list at colptr[v]) give PKB's node, row,
    col, edge exactly, padded with zeros to the capacities NC and EC, and sizes;
and counts the calls on which solutions/wrong.cu (the last seed not marked as seen),
solutions/shortcut_skip_exchange.cu (every list read from the rank's own local_adj_col) and
solutions/shortcut_assumed_degree.cu (k samples per node, degrees not read) differ: wrong on
every mode-0 call, the shortcuts on every call of modes 1-3 and none of mode 0.
Usage: python3 bench/pkb/sim_64_gnn_neighbor_sampling.py [--gen-hashes]
(--gen-hashes: the generator's hashes, to compare with bench/pkb/gen_64_graph_check.cu, which
runs problem.cu's own gen_graph on the host)"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_66_gnn_feature_exchange_all2all_backward import (  # noqa: E402 (pk_splits.cuh, ported)
    MASK, apportion, pk_skewed_id, splitmix64, unit)

GEN_SALT = 0x64677300


def gen_base(seed, key):
    return splitmix64(seed ^ splitmix64((GEN_SALT + key) & MASK))


def gen_graph(seed, key, W, r, N, S, E):  # problem.cu gen_graph
    base = gen_base(seed, key)
    mode = key % 4
    G = N - 3 * W
    hd = splitmix64(base ^ 0xD3)
    hub_every = 256 if mode == 3 else 512
    ranges = [0] * W
    if mode == 2:
        w = [0.0 if unit(base + 100 + d) < 0.3 else math.exp(3.0 * unit(base + 200 + d))
             for d in range(W)]
        w[splitmix64((base + 3) & MASK) % W] += 1.0
        ranges = apportion(N, w)
    hot = splitmix64((base + 1) & MASK) % W
    d_rank, d_left = 0, ranges[0]
    colptr = [0] * (N + 1)
    owner = [0] * N
    for v in range(N):
        hub = False
        if mode == 0:
            deg = 16
        elif v >= G:
            deg = 1
        else:
            h = splitmix64((hd + v) & MASK)
            u = (h >> 11) * (1.0 / 9007199254740992.0)
            hub = ((h >> 20) % hub_every) == 0
            if u < 0.25:
                deg, hub = 0, False
            elif hub:
                deg = 2048
            else:
                u2 = unit(h)
                deg = 1 + int(20.0 * u2 * u2 * u2)
            if colptr[v] + deg > E - 3 * W:
                deg, hub = 0, False
        colptr[v + 1] = colptr[v] + deg
        if mode == 2:
            while d_left == 0 and d_rank < W - 1:
                d_rank += 1
                d_left = ranges[d_rank]
            owner[v] = d_rank
            d_left -= 1
        elif mode == 3 and hub:
            owner[v] = hot
        else:
            owner[v] = v % W
    if mode == 0:
        return owner, colptr, [(r * S + i) % N for i in range(S)]
    seeds = [G + 3 * r]
    off = splitmix64((base + 300 + r) & MASK) % G
    stride = 1 + splitmix64((base + 400 + r) & MASK) % (G - 1)
    while math.gcd(stride, G) != 1:
        stride = stride % (G - 1) + 1
    seeds += [(off + (i - 1) * stride) % G for i in range(1, S)]
    return owner, colptr, seeds


def fill_col(seed, key, W, r, N, E, colptr, owner):  # problem.cu fill_col
    base = gen_base(seed, key)
    mode = key % 4
    nbase = splitmix64(base ^ 0x6E62)
    jbase = splitmix64(base ^ ((0x6A756E6B + r) & MASK))
    G = N - 3 * W
    dmode = 0 if mode == 1 else (1 if mode == 2 else 2)  # uniform, power, hubs
    col = [0] * E
    for v in range(N + 1):
        s = colptr[v] if v < N else colptr[N]
        t = colptr[v + 1] if v < N else E
        mine = v < N and (mode == 0 or owner[v] == r)
        for e in range(s, t):
            if not mine:
                x = splitmix64((jbase + e) & MASK) % N
            elif mode == 0:
                x = (v + 1 + (e - s)) % N
            elif v >= G:
                x = G + 3 * ((v - G) // 3) + ((v - G) % 3 + 1) % 3
            else:
                x = pk_skewed_id(splitmix64((nbase + e) & MASK), dmode, N)
            col[e] = x
    return col


class Hang(Exception):
    pass


def pkb_solution(W, seeds, colptr, cols, owner, fanouts):
    """64_gnn_neighbor_sampling.py's solution() on all W ranks at once."""
    src = [list(seeds[r]) for r in range(W)]
    node = [list(seeds[r]) for r in range(W)]
    nwd = [[] for _ in range(W)]
    dwd = [[] for _ in range(W)]
    edge = [[] for _ in range(W)]
    active = [True] * W
    for fanout in fanouts:
        for r in range(W):  # if src.numel() == 0: break
            if active[r] and not src[r]:
                active[r] = False
        if any(active) and not all(active):
            raise Hang("ranks disagree on the number of hops")
        if not any(active):
            break
        part = [[owner[v] for v in src[r]] for r in range(W)]
        porder = [[0] * len(src[r]) for r in range(W)]
        send_lists = []
        for r in range(W):
            lists = []
            for q in range(W):
                pos = [i for i, p in enumerate(part[r]) if p == q]
                for j, i in enumerate(pos):
                    porder[r][i] = j
                lists.append([src[r][i] for i in pos])
            send_lists.append(lists)
        send_counts = [[len(send_lists[r][q]) for q in range(W)] for r in range(W)]
        recv_counts = [[send_counts[q][r] for q in range(W)] for r in range(W)]
        recv_nodes = [sum((send_lists[q][r] for q in range(W)), []) for r in range(W)]
        s_nodes, s_edges, s_counts = [], [], []
        for r in range(W):  # _sample_one_hop_csc_dist
            nb, eb, cnt = [], [], []
            for v in recv_nodes[r]:
                start, end = colptr[v], colptr[v + 1]
                take = min(fanout, end - start) if fanout >= 0 else end - start
                if take > 0:
                    nb += cols[r][start:end][:take]
                    eb += list(range(start, end))[:take]
                cnt.append(take)
            s_nodes.append(nb)
            s_edges.append(eb)
            s_counts.append(cnt)
        # _exchange_replies: rank r sends q the samples of the nodes q sent it
        rn = [[] for _ in range(W)]
        re_ = [[] for _ in range(W)]
        rc = [[] for _ in range(W)]
        for r in range(W):
            off_n = off_c = 0
            for q in range(W):
                c = s_counts[r][off_c:off_c + recv_counts[r][q]]
                off_c += recv_counts[r][q]
                k = sum(c)
                rn[q].append(s_nodes[r][off_n:off_n + k])
                re_[q].append(s_edges[r][off_n:off_n + k])
                rc[q].append(c)
                off_n += k
        for r in range(W):
            reply_nodes = sum(rn[r], [])
            reply_edges = sum(re_[r], [])
            reply_counts = sum(rc[r], [])
            offs = [0]
            for c in reply_counts:
                offs.append(offs[-1] + c)
            node_chunks = [reply_nodes[offs[i]:offs[i + 1]] for i in range(len(reply_counts))]
            edge_chunks = [reply_edges[offs[i]:offs[i + 1]] for i in range(len(reply_counts))]
            rank_offsets = [0]
            for q in range(W - 1):
                rank_offsets.append(rank_offsets[-1] + send_counts[r][q])
            grouped = [rank_offsets[part[r][i]] + porder[r][i] for i in range(len(src[r]))]
            out_node = sum((node_chunks[g] for g in grouped), [])
            out_edge = sum((edge_chunks[g] for g in grouped), [])
            out_dst = []
            for v, g in zip(src[r], grouped):
                out_dst += [v] * reply_counts[g]
            if not out_node:
                active[r] = False  # break
                src[r] = []
                continue
            combined = node[r] + out_node  # _remove_duplicates
            firsts = {}
            for i, x in enumerate(combined):
                firsts.setdefault(x, i)
            idx = sorted(firsts.values())
            num = len(node[r])
            node[r] = [combined[i] for i in idx]
            src[r] = node[r][num:]
            nwd[r] += out_node
            dwd[r] += out_dst
            edge[r] += out_edge
    out = []
    for r in range(W):  # _relabel_neighborhood
        if not nwd[r]:
            out.append((node[r], [], [], edge[r]))
            continue
        assoc = {}
        for i, x in enumerate(node[r]):
            assoc[x] = i
        out.append((node[r], [assoc[x] for x in nwd[r]], [assoc[x] for x in dwd[r]], edge[r]))
    return out


def dedup_pipeline(r, seeds, hop_samples, N, mark_last=True):
    """The GPU dedup of problem.cu / correct.cu: first[] positions by atomicMin, flags, compaction.
    hop_samples(hop, frontier) -> list of (sampled node, dst, edge id) in frontier order."""
    first = [0x7F7F7F7F] * N
    idx_of = {}
    node = list(seeds)
    for i, u in enumerate(seeds):
        if mark_last or i < len(seeds) - 1:
            first[u] = -1
        idx_of[u] = i
    src = list(seeds)
    rows, cols, edges = [], [], []
    for hop in range(2):
        samp = hop_samples(hop, src)
        e0 = len(rows)
        for t, (u, v, e) in enumerate(samp):
            rows.append(u)
            cols.append(v)
            edges.append(e)
            first[u] = min(first[u], e0 + t)
        new = [u for t, (u, v, e) in enumerate(samp) if first[u] == e0 + t]
        for i, u in enumerate(new):
            idx_of[u] = len(node) + i
        node += new
        src = new
    return node, [idx_of[u] for u in rows], [idx_of[v] for v in cols], edges


def reference_port(W, seeds, colptr, cols, owner, K, N):
    """problem.cu reference(): partition, exchanges, k-slot replies, scan, dedup."""
    outs = []
    # every rank's frontier evolves on its own; the exchange only routes requests and replies, so
    # each rank's replies are the owners' k-slot samples of its frontier nodes in slot order
    for r in range(W):
        def hop_samples(hop, src, r=r):
            k = K[hop]
            part = [owner[v] for v in src]
            counts = [part.count(q) for q in range(W)]
            off = [sum(counts[:q]) for q in range(W)]
            slot, send = [0] * len(src), [0] * len(src)
            for i, v in enumerate(src):  # stable partition (one CTA, block scans per owner)
                slot[i] = off[part[i]]
                send[off[part[i]]] = v
                off[part[i]] += 1
            btake, bnode, bedge = [0] * len(src), {}, {}
            for s_, v in enumerate(send):  # the owner (owner[v]) samples into k slots
                q = owner[v]
                st, d = colptr[v], colptr[v + 1] - colptr[v]
                btake[s_] = min(k, d)
                for j in range(btake[s_]):
                    bnode[s_ * k + j] = cols[q][st + j]
                    bedge[s_ * k + j] = st + j
            out = []
            for i, v in enumerate(src):  # takes by slot, scanned, emitted
                s_ = slot[i]
                for j in range(btake[s_]):
                    out.append((bnode[s_ * k + j], v, bedge[s_ * k + j]))
            return out
        outs.append(dedup_pipeline(r, seeds[r], hop_samples, N))
    return outs


def pull_port(W, seeds, colptr, cols, owner, K, N, local=False, mark_last=True, assume=False):
    """correct.cu; shortcut_skip_exchange.cu (local); wrong.cu (mark_last False);
    shortcut_assumed_degree.cu (assume: k samples per node, whatever its degree)."""
    outs = []
    for r in range(W):
        def hop_samples(hop, src, r=r):
            out = []
            for v in src:
                st = colptr[v]
                take = K[hop] if assume else min(K[hop], colptr[v + 1] - st)
                adj = cols[r] if local else cols[owner[v]]
                out += [(adj[st + j], v, st + j) for j in range(take)]
            return out
        outs.append(dedup_pipeline(r, seeds[r], hop_samples, N, mark_last))
    return outs


def padded(res, NC, EC):
    node, row, col, edge = res
    pad = lambda x, n: list(x) + [0] * (n - len(x))  # noqa: E731
    return (pad(node, NC), pad(row, EC), pad(col, EC), pad(edge, EC), [len(node), len(row)])


def main():
    seed = 0x5EED64
    K = (10, 5)
    cases = [(600, 40, 16, keys) for keys in [range(8)]] + [(1500, 40, 16, range(8))]
    cases.append((10000, 512, 16, range(4)))
    fails = {"wrong": {}, "shortcut": {}, "assumed_degree": {}}
    totals = {}
    for W in (2, 4, 8):
        for N, S, DM, keys in cases:
            E = N * DM
            NC, EC = S * (1 + K[0] + K[0] * K[1]), S * (K[0] + K[0] * K[1])
            for key in keys:
                mode = key % 4
                g = [gen_graph(seed, key, W, r, N, S, E) for r in range(W)]
                owner, colptr = g[0][0], g[0][1]
                assert all(x[0] == owner and x[1] == colptr for x in g)
                seeds = [x[2] for x in g]
                cols = [fill_col(seed, key, W, r, N, E, colptr, owner) for r in range(W)]
                # the inputs
                assert colptr[0] == 0 and colptr[N] <= E
                assert all(colptr[v] <= colptr[v + 1] for v in range(N))
                assert all(0 <= x < N for c in cols for x in c)
                assert all(0 <= o < W for o in owner)
                for r in range(W):
                    assert len(set(seeds[r])) == S and all(0 <= x < N for x in seeds[r])
                degs = [colptr[v + 1] - colptr[v] for v in range(N)]
                if mode == 0:
                    assert all(d == 16 for d in degs) and owner == [v % W for v in range(N)]
                    assert all(cols[r][:16 * N] == [(v + 1 + j) % N for v in range(N)
                                                    for j in range(16)] for r in range(W))
                    assert all(seeds[r] == [(r * S + i) % N for i in range(S)] for r in range(W))
                else:
                    assert degs.count(0) > N // 10 and seeds[0][0] == N - 3 * W
                    totals["calls with a hub"] = (totals.get("calls with a hub", 0)
                                                  + (max(degs) == 2048))
                    totals["isolated share (min)"] = min(totals.get("isolated share (min)", 1.0),
                                                         degs.count(0) / N)
                    diff = sum(cols[r][colptr[v] + j] != cols[owner[v]][colptr[v] + j]
                               for r in range(W) for v in range(N) if owner[v] != r
                               for j in range(degs[v]))
                    assert diff > 0  # the other ranks hold garbage there
                if mode == 2:
                    totals.setdefault("mode2 ranks owning nothing", 0)
                    owners = set(owner)
                    totals["mode2 ranks owning nothing"] += sum(q not in owners for q in range(W))
                pkb = pkb_solution(W, seeds, colptr, cols, owner, K)
                want = [padded(x, NC, EC) for x in pkb]
                args = (W, seeds, colptr, cols, owner, K, N)
                ref = [padded(x, NC, EC) for x in reference_port(*args)]
                cor = [padded(x, NC, EC) for x in pull_port(*args)]
                assert ref == want, (W, N, key, "reference")
                assert cor == want, (W, N, key, "correct")
                wr = [padded(x, NC, EC) for x in pull_port(*args, mark_last=False)]
                sc = [padded(x, NC, EC) for x in pull_port(*args, local=True)]
                ad = [padded(x, NC, EC) for x in pull_port(*args, assume=True)]
                for name, got in (("wrong", wr), ("shortcut", sc), ("assumed_degree", ad)):
                    d = fails[name].setdefault(mode, [0, 0])
                    d[0] += got != want
                    d[1] += 1
                totals["calls"] = totals.get("calls", 0) + 1
                totals["edges"] = totals.get("edges", 0) + sum(w[4][1] for w in want)
                totals["max nodes / NC"] = max(
                    totals.get("max nodes / NC", 0),
                    max(w[4][0] for w in want) / NC)
            print(f"W={W}: reference and correct.cu == PKB on {totals['calls']} calls so far",
                  flush=True)
    print("totals:", totals)
    for name in fails:
        print(name, "fails (calls failed / calls) by mode:",
              {m: tuple(v) for m, v in sorted(fails[name].items())})
    assert fails["wrong"][0][0] == fails["wrong"][0][1]
    assert fails["shortcut"][0][0] == 0
    assert fails["assumed_degree"][0][0] == 0
    for m in (1, 2, 3):
        assert fails["shortcut"][m][0] == fails["shortcut"][m][1]
        assert fails["assumed_degree"][m][0] == fails["assumed_degree"][m][1]
    print("OK")


def gen_hashes():  # the lines of bench/pkb/gen_64_graph_check.cu
    for N, S, DM in ((600, 40, 16), (1500, 40, 16), (10000, 512, 16)):
        for W in (2, 4, 8):
            for key in range(8):
                for r in range(W):
                    owner, colptr, seeds = gen_graph(0x5EED64, key, W, r, N, S, N * DM)
                    h = 1469598103934665603
                    for x in owner + colptr + seeds:
                        h = ((h ^ x) * 1099511628211) & MASK
                    if N > 1500:
                        print(N, W, key, r, h, "-")
                        continue
                    hc = 1469598103934665603
                    for x in fill_col(0x5EED64, key, W, r, N, N * DM, colptr, owner):
                        hc = ((hc ^ x) * 1099511628211) & MASK
                    print(N, W, key, r, h, hc)


if __name__ == "__main__":
    if sys.argv[1:] == ["--gen-hashes"]:
        gen_hashes()
    else:
        main()
