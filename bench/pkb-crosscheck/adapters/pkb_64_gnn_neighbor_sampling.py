"""pkb/64_gnn_neighbor_sampling = ParallelKernelBench problem 64:
solution(seed_nodes, fanouts, local_adj_row_ptr, local_adj_col, node_to_rank, group, replace)
-> (node, row, col, edge): two hops of first-k neighbour sampling (PKB's sampler takes the
first min(k, deg) neighbours: deterministic), the frontier sent to the nodes' owners and their
samples sent back, deduplicated (_remove_duplicates) and relabelled (_relabel_neighborhood).

pkgym's fanouts are the dims K1, K2 (PKB's [10, 5]); local_adj_col is an E = N DM capacity
(garbage past colptr[N], and in graph modes 1-3 at the nodes this rank does not own: PKB reads
only the lists of the nodes a rank owns); its outputs are capacities (node NC, row / col / edge
EC) whose used prefixes are PKB's, zero after, plus sizes = {len(node), len(row)}. generate()
makes every rank sample in both hops, so PKB's ranks agree on the number of hops (they break
out of the loop per rank, before collectives). Integers: the fp64 run is the same call."""
import torch

PKB_REFERENCE = "64_gnn_neighbor_sampling.py"


def run(pkb, inputs, dims, world, rank, fp64=False):
    K1, K2, NC, EC = dims["K1"], dims["K2"], dims["NC"], dims["EC"]
    seeds = inputs["seed_nodes"].long()
    node, row, col, edge = pkb.solution(
        seeds, [K1, K2], inputs["local_adj_row_ptr"].long(), inputs["local_adj_col"].long(),
        inputs["node_to_rank"].long(), None, False)
    dev = seeds.device
    out = {}
    for name, t, cap in (("node", node, NC), ("row", row, EC), ("col", col, EC),
                         ("edge", edge, EC)):
        t = t.reshape(-1).long()
        buf = torch.zeros((cap,), dtype=torch.int64, device=dev)
        buf[: t.numel()] = t
        out[name] = buf
    out["sizes"] = torch.tensor([node.numel(), row.numel()], dtype=torch.int64, device=dev)
    return out
