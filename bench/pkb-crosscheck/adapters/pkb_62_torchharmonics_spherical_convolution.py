"""pkb/62_torchharmonics_spherical_convolution = ParallelKernelBench problem 62:
solution(x (B, C, Hp, L/2), psi sparse (K, H, Hp*L), weight (O, C/G, K), groups, nlon_out,
nlon_in, azimuth_group, polar_group, bias (O)) -> (B, O, H/P, L/2), rank (p, a)'s block of the
distributed DISCO convolution.

The groups are PKB's _build_polar_azimuth_groups with azimuth_size 2 (utils/input_output_tensors.py:
rank = p * 2 + a; azimuth groups are consecutive pairs, polar groups the ranks with the same a),
built once per process. pkgym's psi is psi_col (local_lat * L + lon) and psi_val, row (k, h) at
(k H + h) E: the adapter builds PKB's sparse COO tensor from them (indices (k, h, col),
coalesced, which sums repeated columns as pkgym's contraction does). fp64: the same call on
float64 copies (psi's values included)."""
import torch
import torch.distributed as dist

PKB_REFERENCE = "62_torchharmonics_spherical_convolution.py"
_groups = {}


def polar_azimuth_groups(world):
    """(azimuth_group, polar_group) as PKB builds them; every rank creates every group."""
    if world in _groups:
        return _groups[world]
    rank, az = dist.get_rank(), 2
    azimuth_group = polar_group = None
    for p in range(world // az):
        ranks = list(range(p * az, (p + 1) * az))
        g = dist.new_group(ranks=ranks)
        if rank in ranks:
            azimuth_group = g
    for a in range(az):
        ranks = [p * az + a for p in range(world // az)]
        g = dist.new_group(ranks=ranks)
        if rank in ranks:
            polar_group = g
    _groups[world] = (azimuth_group, polar_group)
    return _groups[world]


def run(pkb, inputs, dims, world, rank, fp64=False):
    B, C, O, K, G = dims["B"], dims["C"], dims["O"], dims["K"], dims["G"]
    H, L, E = dims["H"], dims["L"], dims["E"]
    P = world // 2
    Hp = H // P
    azimuth_group, polar_group = polar_azimuth_groups(world)
    x = inputs["x"].view(B, C, Hp, L // 2)
    col = inputs["psi_col"].to(torch.long).view(K, H, E)
    kk = torch.arange(K, device=col.device).view(K, 1, 1).expand(K, H, E)
    hh = torch.arange(H, device=col.device).view(1, H, 1).expand(K, H, E)
    idx = torch.stack([kk.reshape(-1), hh.reshape(-1), col.reshape(-1)])
    psi = torch.sparse_coo_tensor(idx, inputs["psi_val"].reshape(-1), size=(K, H, Hp * L),
                                  device=x.device).coalesce()
    out = pkb.solution(x, psi, inputs["weight"].view(O, C // G, K), G, L, L,
                       azimuth_group, polar_group, inputs["bias"].view(O))
    return {"out": out.contiguous().reshape(-1)}
