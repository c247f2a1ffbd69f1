#!/usr/bin/env python3
"""Host simulation of pkb/61_gsplat_3d_gaussian_splatting (plain Python, no numpy/torch).

Ports, line by line, PKB's solution() (reference/61_gsplat_3d_gaussian_splatting.py), with its
collectives simulated over W ranks: the all-gather of N, the all-gather of (viewmats, Ks), the
covariance from (quats, scales), _fully_fused_projection (world to camera, _persp_proj with its
clamped Jacobian, eps2d, det clamp, conics, radius = ceil(3.33 sqrt(cov2d_ii)), the near/far and
inside tests), _pack_projection_results (torch.where: camera-major, then gaussian), the counts
per destination (C_world split), the all-to-all of the counts and of the packed rows, and the id
offsets (camera ids made local to the destination; gaussian ids plus the offset of the
DESTINATION's shard: repeat_interleave(cnts) indexes the offsets by destination, as gsplat does).

Against it:
- contract(): the closed form a prompt would state (rank d receives, for each source s in rank
  order, each of its own cameras c, each local gaussian g of s in order, the visible (s, g, c):
  camera id c, gaussian id g + sum_{j<d} N_j);
- shortcut_local(): a twin that skips the exchange (rank d projects only its own gaussians);
- wrong_last(): an off-by-one at the shard boundary (the last gaussian of every shard dropped);
- natural_ids(): gaussian id g + sum_{j<s} N_j (the source's offset: what a reader would expect
  a "global id" to be); it differs from PKB's whenever s != d and some N_j > 0 in between.

Then the numerics: the same projection in emulated fp32 (every op rounded to fp32, as a CUDA
kernel without FMA contraction would) against fp64: how often the integer radius (a ceil) or the
visibility decision differs. Those flips are what forces either a custom checker (accept a
radius off by one, and a row present or absent, only where the fp64 value is within a band of
the decision) or a generator that keeps every decision out of the band.

--suite N C SEED (the port's check, bench/results/pkb-61-cpu-2026-11-29.md): problem.cu's
generate() (shard_plan and camera_of exactly; the gaussians' classes and redraw rule with
Python's generator), keys 0..4 at W = 2, 4, 8: correct (the contract) equals PKB on every trial,
wrong.cu, shortcut_skip_exchange.cu and shortcut_assumed_all_visible.cu fail at least one trial
at every W, and fp32 makes PKB's fp64 decisions with the proj error within a quarter of the
tolerance; exits 1 otherwise.

Usage: sim_61_gsplat_3d_gaussian_splatting.py [n_local [seed]] (default 256, 1);
--flips COUNT [SEED]: the fp32-against-fp64 decision flips alone, on COUNT of PKB's gaussians. Exits 1 if the
PKB port and contract() disagree, or if the wrong / shortcut variants agree with PKB.
"""
import math
import random
import struct
import sys


def f32(x):
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def bf16(x):
    """Round to bf16 (round to nearest even), returned as a Python float."""
    b = struct.unpack("I", struct.pack("f", f32(x)))[0]
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", b))[0]


def ident(x):
    return x


# ---- PKB's projection, one gaussian against one camera; r() rounds after every op ----------


def project(mean, quat, scale, view, K, width, height, r, eps2d=0.3, near=0.01, far=1e10,
            keep_all=False):
    # _quat_to_rotmat (F.normalize: q / max(|q|, 1e-12))
    nrm = r(math.sqrt(r(r(r(quat[0] * quat[0]) + r(quat[1] * quat[1])) +
                        r(r(quat[2] * quat[2]) + r(quat[3] * quat[3])))))
    nrm = max(nrm, 1e-12)
    w, x, y, z = (r(q / nrm) for q in quat)
    R = [[r(1 - r(2 * r(r(y * y) + r(z * z)))), r(2 * r(r(x * y) - r(w * z))),
          r(2 * r(r(x * z) + r(w * y)))],
         [r(2 * r(r(x * y) + r(w * z))), r(1 - r(2 * r(r(x * x) + r(z * z)))),
          r(2 * r(r(y * z) - r(w * x)))],
         [r(2 * r(r(x * z) - r(w * y))), r(2 * r(r(y * z) + r(w * x))),
          r(1 - r(2 * r(r(x * x) + r(y * y))))]]
    M = [[r(R[i][j] * scale[j]) for j in range(3)] for i in range(3)]
    cov = [[r(r(r(M[i][0] * M[k][0]) + r(M[i][1] * M[k][1])) + r(M[i][2] * M[k][2]))
            for k in range(3)] for i in range(3)]
    # _world_to_cam
    Rv = [[view[i][j] for j in range(3)] for i in range(3)]
    t = [view[i][3] for i in range(3)]
    mc = [r(r(r(r(Rv[i][0] * mean[0]) + r(Rv[i][1] * mean[1])) + r(Rv[i][2] * mean[2])) + t[i])
          for i in range(3)]
    A = [[r(sum(r(Rv[i][j] * cov[j][k]) for j in range(3))) for k in range(3)] for i in range(3)]
    covc = [[r(sum(r(A[i][k] * Rv[l][k]) for k in range(3))) for l in range(3)] for i in range(3)]
    # _persp_proj
    tx, ty, tz = mc
    tz2 = r(tz * tz)
    fx, fy, cx, cy = K[0][0], K[1][1], K[0][2], K[1][2]
    if not (near < tz < far):  # invalid (radius 0) whatever the rest (NaNs at tz = 0) gives
        return {"radii": (0, 0), "means2d": (0.0, 0.0), "depth": tz, "conic": (0.0, 0.0, 0.0),
                "margin": abs(tz - near)} if keep_all else None
    tan_fovx = r(r(0.5 * width) / fx)
    tan_fovy = r(r(0.5 * height) / fy)
    lim_x_pos = r(r(r(width - cx) / fx) + r(0.3 * tan_fovx))
    lim_x_neg = r(r(cx / fx) + r(0.3 * tan_fovx))
    lim_y_pos = r(r(r(height - cy) / fy) + r(0.3 * tan_fovy))
    lim_y_neg = r(r(cy / fy) + r(0.3 * tan_fovy))
    txc = r(tz * min(max(r(tx / tz), -lim_x_neg), lim_x_pos))
    tyc = r(tz * min(max(r(ty / tz), -lim_y_neg), lim_y_pos))
    J = [[r(fx / tz), 0.0, r(r(-fx * txc) / tz2)], [0.0, r(fy / tz), r(r(-fy * tyc) / tz2)]]
    B = [[r(sum(r(J[i][j] * covc[j][k]) for j in range(3))) for k in range(3)] for i in range(2)]
    c2 = [[r(sum(r(B[i][k] * J[l][k]) for k in range(3))) for l in range(2)] for i in range(2)]
    m2 = [r(r(r(r(K[i][0] * tx) + r(K[i][1] * ty)) + r(K[i][2] * tz)) / tz) for i in range(2)]
    a, b, c, d = r(c2[0][0] + eps2d), c2[0][1], c2[1][0], r(c2[1][1] + eps2d)
    det = max(r(r(a * d) - r(b * c)), 1e-10)
    conic = (r(d / det), r(r(-r(b + c) / 2.0) / det), r(a / det))
    depth = tz
    ux, uy = r(3.33 * r(math.sqrt(a))), r(3.33 * r(math.sqrt(d)))
    rx, ry = math.ceil(ux), math.ceil(uy)
    # the margins of the discrete decisions, as problem.cu's gs_project (generate() only)
    def gap(v, bound):
        return abs(v - bound) - 1e-4 * abs(v)
    # the rounding allowances, as problem.cu: the radii through Sigma2's diagonal (terms up to
    # (|J_i0| + |J_i2|)^2 max(s)^2, which may cancel), the means through K's products over tz
    sm = max(scale)
    ex = 1e-6 * (abs(J[0][0]) + abs(J[0][2])) ** 2 * sm * sm * 3.33 / (2 * math.sqrt(a))
    ey = 1e-6 * (abs(J[1][1]) + abs(J[1][2])) ** 2 * sm * sm * 3.33 / (2 * math.sqrt(d))
    em = 1e-6 * sum(abs(K[i][0] * tx) + abs(K[i][1] * ty) + abs(K[i][2] * tz)
                    for i in range(2)) / abs(tz)
    margin = min(abs(depth - near), gap(ux, math.floor(ux + 0.5)) - ex,
                 gap(uy, math.floor(uy + 0.5)) - ey, gap(m2[0], -rx) - em,
                 gap(m2[0], width + rx) - em, gap(m2[1], -ry) - em, gap(m2[1], height + ry) - em)
    res = {"radii": (rx, ry), "means2d": tuple(m2), "depth": depth, "conic": conic,
           "margin": margin}
    if keep_all:
        return res
    inside = (r(m2[0] + rx) > 0 and r(m2[0] - rx) < width and r(m2[1] + ry) > 0 and
              r(m2[1] - ry) < height)
    if not inside or rx <= 0 or ry <= 0:
        return None
    return res


# ---- inputs: PKB's distribution (bf16), plus the hard cases a port's generate() needs -------


def make_rank(rng, n, rank, hard):
    g = []
    for i in range(n):
        mx = bf16((rng.random() - 0.5) * 1.5)
        my = bf16((rng.random() - 0.5) * 1.5)
        mz = bf16(rng.random() * 2.0 + 2.0)
        if hard:
            k = i % 5
            if k == 1:
                mz = bf16(-mz)  # behind the camera
            elif k == 2:
                mz = 3.0  # equal depths (no sort in PKB: order is by index, not depth)
            elif k == 3:
                mx = bf16(mx * 6.0)  # off screen or straddling the image edge
        q = [bf16(rng.gauss(0, 1)) for _ in range(4)]
        s = [bf16(rng.random() * 0.02) for _ in range(3)]
        op = bf16(rng.random() * 0.8 + 0.1)
        col = [bf16(rng.random()) for _ in range(3)]
        g.append(((mx, my, mz), q, s, op, col))
    return g


def camera(width, height, shift=0.0):
    view = [[1.0, 0, 0, bf16(shift)], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]]
    focal = bf16(0.8 * min(width, height))
    K = [[focal, 0, bf16(width * 0.5)], [0, focal, bf16(height * 0.5)], [0, 0, 1.0]]
    return view, K


# ---- problem.cu's generate(): shard_plan and camera_of exactly; the gaussians per class with
# Python's generator (the same distributions and class transforms, not the same bits), redrawn
# as fill_gaussians does until every decision in every camera is >= 1e-3 from its boundary ----

M64 = (1 << 64) - 1
KEY_POST_TIMING = 1 << 20
KEY_TIMED_BASE = 1 << 21


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def shard_plan(seed, key, world, N):
    k = splitmix64(seed ^ splitmix64((0x61 << 40) ^ key))

    def draw(j, lo, hi):
        return lo + splitmix64((k + j) & M64) % (hi - lo + 1)
    cls = 0 if key >= KEY_TIMED_BASE else 1 if key == KEY_POST_TIMING else key % 5
    lens = []
    for r in range(world):
        if cls == 0:
            lens.append(N)
        elif cls == 2:
            lens.append(0 if r % 2 else N)
        elif cls == 3:
            lens.append(draw(r, 0, N // 16))
        else:
            lens.append(draw(r, 0, N))
    if cls == 3:
        lens[draw(100, 0, world - 1)] = N
    if cls in (1, 4):
        lens[draw(101, 0, world - 1)] = 0
    return cls, lens


def camera_of(cls, ck, r, c, width, height):
    V = [[1.0 if i == j else 0.0 for j in range(4)] for i in range(4)]
    f = bf16(0.8 * min(width, height))
    K = [[f, 0.0, bf16(0.5 * width)], [0.0, f, bf16(0.5 * height)], [0.0, 0.0, 1.0]]
    if cls == 0:
        return V, K
    h = splitmix64(ck ^ (r << 32) ^ c)
    V[0][3] = ((h % 9) - 4) * 0.125
    V[1][3] = (((h >> 8) & 7) - 4) * 0.125
    V[2][3] = ((h >> 16) & 3) * 0.25
    if cls == 4 and r == 0 and c == 0:
        V[0][0] = -1.0
        V[2][2] = -1.0
        V[2][3] = 0.0
    return V, K


def fill_gaussians(rng, n, cls, cams_all, width, height):
    out, redraws = [], 0
    for i in range(n):
        for attempt in range(16):
            m = [(rng.random() - 0.5) * 1.5, (rng.random() - 0.5) * 1.5, rng.random() * 2 + 2]
            smax = 0.02
            kind = rng.randrange(5)
            if cls == 1 and kind == 1:
                m[2] = -m[2]
            if cls == 1 and kind == 2:
                m[0] *= 6.0
            if cls == 3:
                m[0] *= 0.1
                m[1] *= 0.1
                m[2] = 3.0
                smax = 0.3
            if cls == 4 and kind < 2:
                m[2] = rng.random() - 0.5
            q = [bf16(rng.gauss(0, 1)) for _ in range(4)]
            m = [bf16(v) for v in m]
            sc = [bf16(rng.random() * smax) for _ in range(3)]
            worst = min(margin_of(m, q, sc, V, K, width, height) for V, K in cams_all)
            if worst >= 1e-3:
                break
            redraws += 1
        out.append((tuple(m), q, sc, bf16(rng.random() * 0.8 + 0.1),
                    [bf16(rng.random()) for _ in range(3)]))
    return out, redraws


def margin_of(m, q, sc, V, K, width, height):
    p = project(m, q, sc, V, K, width, height, ident, keep_all=True)
    return p["margin"]


def contract_all_visible(ranks, cams, width, height):
    """shortcut_assumed_all_visible.cu: every pair (s, c, g < n_s) gets a row."""
    W, C = len(ranks), len(cams[0])
    out = []
    for d in range(W):
        rows = []
        for s in range(W):
            for c in range(C):
                V, K = cams[d][c]
                for gi, (m, q, sc, op, col) in enumerate(ranks[s]):
                    p = project(m, q, sc, V, K, width, height, ident, keep_all=True)
                    rows.append([c, gi + sum(len(x) for x in ranks[:d]), p, op, col])
        out.append(rows)
    return out


def suite(N, C, seed):
    """expected.json's verdicts on generate()'s trials (keys 0..4) at W = 2, 4, 8."""
    width = height = 512
    bad = 0
    for W in (2, 4, 8):
        fails = {"correct": 0, "wrong": 0, "skip_exchange": 0, "all_visible": 0}
        for key in range(5):
            cls, lens = shard_plan(seed, key, W, N)
            vkey = splitmix64(seed ^ 0x6161 ^ (key << 20))
            ck = splitmix64(vkey ^ 0xCA3)
            cams = [[camera_of(cls, ck, r, c, width, height) for c in range(C)]
                    for r in range(W)]
            cams_all = [x for rc in cams for x in rc]
            rng = random.Random(seed * 7919 + key * 31 + W)
            ranks, redraws = [], 0
            for r in range(W):
                g, k = fill_gaussians(rng, lens[r], cls, cams_all, width, height)
                ranks.append(g)
                redraws += k
            pk = pkb_solution(ranks, cams, width, height)
            res = {"correct": contract(ranks, cams, width, height),
                   "wrong": contract(ranks, cams, width, height, variant="wrong_last"),
                   "skip_exchange": contract(ranks, cams, width, height, variant="local"),
                   "all_visible": contract_all_visible(ranks, cams, width, height)}
            line = []
            for name, got in res.items():
                same = all(key_ids(got[d]) == key_ids(pk[d]) for d in range(W))
                fails[name] += not same
                line.append(f"{name}:{'ok' if same else 'FAIL'}")
            # fp32 against fp64 on the generated inputs: decisions, and proj against tolerance
            p32 = contract(ranks, cams, width, height, f32)
            flips = sum(key_ids(p32[d]) != key_ids(pk[d]) for d in range(W))
            ratio = 0.0
            for d in range(W):
                for a, b in zip(pk[d], p32[d]):
                    va = list(a[2]["means2d"]) + [a[2]["depth"]] + list(a[2]["conic"])
                    vb = list(b[2]["means2d"]) + [b[2]["depth"]] + list(b[2]["conic"])
                    for x, y in zip(va, vb):
                        ratio = max(ratio, abs(x - y) / (1e-3 + 1e-4 * abs(x)))
            rows = sum(len(x) for x in pk)
            print(f"W={W} key={key} class={cls} n={lens} rows={rows} redraws={redraws} "
                  f"{' '.join(line)} fp32-decision-diffs={flips} proj-err/tol={ratio:.3g}")
            if flips or ratio > 0.25:
                bad = 1
        print(f"W={W} trials failed: {fails}")
        if fails["correct"] or not fails["wrong"] or not fails["skip_exchange"] or \
                not fails["all_visible"]:
            bad = 1
    return bad


def key_ids(rows):
    return [(x[0], x[1], x[2]["radii"]) for x in rows]


# ---- PKB's solution(), the collectives simulated ---------------------------------------------


def pkb_solution(ranks, cams, width, height, r=ident):
    W = len(ranks)
    N_world = [len(g) for g in ranks]  # _all_gather_int32
    C = len(cams[0])
    C_world = [C] * W
    all_cams = [c for rc in cams for c in rc]  # _all_gather_tensor_list([viewmats, Ks])
    send = []  # per source: list of per-destination row lists
    for s in range(W):
        rows = []  # torch.where over (camera, gaussian): camera-major
        for ci, (view, K) in enumerate(all_cams):
            for gi, (m, q, sc, op, col) in enumerate(ranks[s]):
                p = project(m, q, sc, view, K, width, height, r)
                if p is not None:
                    rows.append([ci, gi, p, op, col])
        cnts = [sum(1 for x in rows if x[0] // C == d) for d in range(W)]
        cam_off = [sum(C_world[:d]) for d in range(W)]  # cumsum([0] + C_world[:-1])
        g_off = [sum(N_world[:d]) for d in range(W)]  # cumsum([0] + N_world[:-1])
        rep_c = [cam_off[d] for d in range(W) for _ in range(cnts[d])]  # repeat_interleave
        rep_g = [g_off[d] for d in range(W) for _ in range(cnts[d])]
        for k, x in enumerate(rows):
            x[0] -= rep_c[k]
            x[1] += rep_g[k]
        pos, per = 0, []
        for d in range(W):
            per.append(rows[pos:pos + cnts[d]])
            pos += cnts[d]
        send.append(per)
    # all_to_all: rank d concatenates what every source s sent it, in source order
    return [[row for s in range(W) for row in send[s][d]] for d in range(W)]


def contract(ranks, cams, width, height, r=ident, variant="pkb"):
    W = len(ranks)
    N_world = [len(g) for g in ranks]
    C = len(cams[0])
    out = []
    for d in range(W):
        rows = []
        sources = [d] if variant == "local" else range(W)
        for s in sources:
            n = N_world[s] - 1 if variant == "wrong_last" else N_world[s]
            for c in range(C):
                view, K = cams[d][c]
                for gi in range(n):
                    m, q, sc, op, col = ranks[s][gi]
                    p = project(m, q, sc, view, K, width, height, r)
                    if p is not None:
                        off = sum(N_world[:s]) if variant == "natural" else sum(N_world[:d])
                        rows.append([c, gi + off, p, op, col])
        out.append(rows)
    return out


def key(rows):
    return [(x[0], x[1], x[2]["radii"], x[2]["means2d"], x[2]["depth"], x[2]["conic"], x[3],
             tuple(x[4])) for x in rows]


def flips_only(count, seed):
    """fp32 against fp64 on `count` of PKB's gaussians (one identity camera, 512 x 512)."""
    rng = random.Random(seed)
    view, K = camera(512, 512)
    rad = vis = near_band = 0
    for m, q, sc, op, col in make_rank(rng, count, 0, False):
        a = project(m, q, sc, view, K, 512, 512, ident)
        b = project(m, q, sc, view, K, 512, 512, f32)
        if (a is None) != (b is None):
            vis += 1
        elif a is not None:
            rad += a["radii"] != b["radii"]
            near_band += a["margin"] < 1e-4
    print(f"{count} PKB gaussians: fp32 vs fp64 radius flips {rad}, visibility flips {vis}, "
          f"decisions within 1e-4 of their boundary (fp64) {near_band}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--suite":
        N = int(sys.argv[2]) if len(sys.argv) > 2 else 48
        C = int(sys.argv[3]) if len(sys.argv) > 3 else 1
        return suite(N, C, int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    if len(sys.argv) > 1 and sys.argv[1] == "--flips":
        flips_only(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
        return 0
    n_local = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    width = height = 512
    bad = 0
    for W in (2, 4, 8):
        for case in ("pkb", "ragged+hard"):
            rng = random.Random(seed * 1000 + W)
            hard = case != "pkb"
            if hard:  # ragged, an empty rank, one rank holding many
                lens = [rng.randint(0, n_local) for _ in range(W)]
                lens[rng.randrange(W)] = 0
                lens[rng.randrange(W)] = n_local
            else:
                lens = [n_local] * W
            ranks = [make_rank(rng, lens[s], s, hard) for s in range(W)]
            # PKB: one identity camera per rank; hard: two cameras per rank, shifted views
            cams = ([[camera(width, height)] for _ in range(W)] if not hard else
                    [[camera(width, height, 0.3 * s), camera(width, height, -0.2 * s)]
                     for s in range(W)])
            pk = pkb_solution(ranks, cams, width, height)
            verdict = {}
            for v in ("pkb", "local", "wrong_last", "natural"):
                got = contract(ranks, cams, width, height, variant=v)
                verdict[v] = all(key(got[d]) == key(pk[d]) for d in range(W))
            rows = sum(len(x) for x in pk)
            ids = [x[1] for x in pk[W - 1]]
            dup = len(ids) - len(set(ids))
            print(f"W={W} {case:12s} N={lens} rows={rows} contract==PKB:{verdict['pkb']} "
                  f"local:{verdict['local']} wrong_last:{verdict['wrong_last']} "
                  f"natural_ids:{verdict['natural']} dup_gids_last_rank={dup}")
            if not verdict["pkb"] or verdict["local"] or verdict["wrong_last"]:
                bad = 1
            # numerics: fp32 (every op rounded) against fp64, rank 0's view of everything
            p64 = contract(ranks, cams, width, height, ident)
            p32 = contract(ranks, cams, width, height, f32)
            flips = rad = 0
            small = 1.0
            for d in range(W):
                a = {(x[0], x[1] - 0): x for x in p64[d]}
                b = {(x[0], x[1]): x for x in p32[d]}
                flips += len(set(a) ^ set(b))
                for k in set(a) & set(b):
                    if a[k][2]["radii"] != b[k][2]["radii"]:
                        rad += 1
                    small = min(small, a[k][2]["margin"])
            print(f"      fp32 vs fp64: visibility flips {flips}, radius flips {rad}, "
                  f"smallest decision margin (fp64) {small:.3g}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
