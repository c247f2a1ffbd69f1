#!/usr/bin/env python3
"""Host simulation of pkb/72_hyena_forward_cp's index arithmetic (pure Python, no GPU).

Small shapes at W = 2, 4, 8 (B = 2, group_dim D = 1 or 2, C / W channels per rank, local
sequence S, filter Lf <= W S), values N(0, 1) in exact float arithmetic: the bf16 roundings are
left out (index errors, not rounding, are what is tested), and every FFT convolution is the
circular convolution of size n = 2 W S it computes (PKB's rfft(n) / irfft(n)), evaluated
directly. It checks that
  - the circular convolution of size n equals the causal linear one (no aliasing: Lf <= W S);
  - problem.cu's reference (pack_in, the grouped send/recv, unpack_in's zigzag_owner map and
    u = x2 v, pack_filter's rows me G/W + cl / D, the epilogue's bias index and zigzag packing
    by destination, the exchange back, transpose_out) and solutions/correct.cu (pull_u from the
    owner of each position, filter_rows, push_out's tiles of TS x TS stored into the owner's
    out) give PKB's result (a line-by-line port of 72_hyena_forward_cp.py's solution():
    _a2a_split_to_full with _inverse_zigzag_indices, h_local.repeat_interleave, _fftconv_ref,
    _a2a_full_to_split with _zigzag_indices, transpose(1, 2)) on every rank;
and applies meta.json's tolerance (|d| <= 0.016 |want| + 0.005 rms(want)) to wrong.cu
(contiguous split instead of zigzag), shortcut_skip_exchange.cu (each rank alone, all channels)
and shortcut_truncated_filter.cu (Lf / 4 taps): all must fail (expected.json: incorrect).
Usage: python3 bench/pkb/sim_72_hyena_forward_cp.py [calls_per_world]"""
import math
import random
import sys

TS = 2  # the examples' tile (32 on the GPU), shrunk


def argsort(xs):
    return sorted(range(len(xs)), key=lambda i: xs[i])


def zigzag_indices(n):  # PKB _zigzag_indices
    half = (n + 1) // 2
    left, right = list(range(half)), list(range(n - 1, half - 1, -1))
    idx = [0] * n
    idx[0::2], idx[1::2] = left, right
    return idx


def inverse_zigzag_indices(n):  # PKB _inverse_zigzag_indices
    half = n // 2
    left, right = list(range(half)), list(range(n - 1, half - 1, -1))
    idx = [0] * n
    idx[0::2], idx[1::2] = left, right
    return argsort(idx)


def circ_conv(u, h, n):
    """irfft(rfft(u, n) * rfft(h, n), n)[:len(u)] with norm='forward' and kernel_f / n: the
    circular convolution of size n (h truncated to n), first len(u) outputs."""
    up = u + [0.0] * (n - len(u))
    hp = (h + [0.0] * n)[:n]
    return [sum(hp[s] * up[(t - s) % n] for s in range(n) if hp[s] != 0.0) for t in range(len(u))]


def pkb_solution(x1s, x2s, vs, h, bias, G, D, B, C, S, Lf, world):
    """PKB's solution() on every rank: x*s[q][b][c][t]; returns out[q][b][t][c]."""
    Cl, Sf = C // world, S * world

    def split_to_full(xs):  # _a2a_split_to_full on every rank: [r][b][cl][g]
        res = []
        for r in range(world):
            # recv[j] = rank j's send[r] = x_j[:, r Cl:(r+1) Cl, :]; out = cat over j along seq
            out = [[sum((xs[j][b][r * Cl + cl] for j in range(world)), []) for cl in range(Cl)]
                   for b in range(B)]
            nch = 2 * world
            index = inverse_zigzag_indices(nch)
            L = Sf // nch
            out = [[sum((row[index[i] * L:(index[i] + 1) * L] for i in range(nch)), [])
                    for row in rows] for rows in out]
            res.append(out)
        return res

    x1, x2, v = split_to_full(x1s), split_to_full(x2s), split_to_full(vs)
    zs = []
    for r in range(world):
        lg = G // world
        h_local = [h[g] for g in range(r * lg, (r + 1) * lg) for _ in range(D)]
        bias_local = bias[r * Cl:(r + 1) * Cl]
        z = [[None] * Cl for _ in range(B)]
        for b in range(B):
            for cl in range(Cl):
                u = [a * c for a, c in zip(x2[r][b][cl], v[r][b][cl])]
                y = circ_conv(u, h_local[cl], 2 * Sf)
                y = [yy + uu * bias_local[cl] for yy, uu in zip(y, u)]
                z[b][cl] = [a * yy for a, yy in zip(x1[r][b][cl], y)]
        zs.append(z)
    # _a2a_full_to_split: zigzag, then rank j gets seq part j of every rank's channels
    nch = 2 * world
    index = zigzag_indices(nch)
    L = Sf // nch
    zz = [[[sum((row[index[i] * L:(index[i] + 1) * L] for i in range(nch)), []) for row in z[b]]
           for b in range(B)] for z in zs]
    outs = []
    for j in range(world):
        # recv[q] = rank q's send[j]: channels q Cl.., positions j S..(j+1) S of q's zigzag seq
        seq = [[zz[c // Cl][b][c % Cl][j * S:(j + 1) * S] for c in range(C)] for b in range(B)]
        outs.append([[[seq[b][c][t] for c in range(C)] for t in range(S)] for b in range(B)])
    return outs


def owner(g, S, W, zigzag=True):  # zigzag_owner / owner()
    if not zigzag:
        return g // S, g % S
    half = S // 2
    k, off = g // half, g % half
    return (k, off) if k < W else (2 * W - 1 - k, half + off)


def conv_rows(u_rows, h_rows, n, rows_of, Sf):
    """R2C, spectral product, C2R: row `row` convolved with h_rows[rows_of(row)]."""
    return [circ_conv(u_rows[row][:Sf], h_rows[rows_of(row)], n) for row in range(len(u_rows))]


def reference(X1, X2, V, h, bias, G, D, B, C, S, Lf, W):
    """problem.cu reference(); X*[q] flat [b][c][t]; h flat [g][s]; returns out[q] flat."""
    Cl, Gl, Sf = C // W, G // W, W * S
    n = 2 * Sf
    blk_in, blk_out = 3 * B * Cl * S, B * Cl * S
    send_in = []
    for q in range(W):  # pack_in
        sb = [0.0] * (W * blk_in)
        for i in range(W * blk_in):
            j, m = i // blk_in, i % blk_in // (B * Cl * S)
            b, cl, t = i % (B * Cl * S) // (Cl * S), i % (Cl * S) // S, i % S
            sb[i] = (X1, X2, V)[m][q][(b * C + j * Cl + cl) * S + t]
        send_in.append(sb)
    send_out = []
    for me in range(W):
        recv = sum((send_in[q][me * blk_in:(me + 1) * blk_in] for q in range(W)), [])
        x1full, u = [0.0] * (B * Cl * Sf), [0.0] * (B * Cl * n)
        for i in range(B * Cl * n):  # unpack_in
            row, g = i // n, i % n
            if g >= Sf:
                continue
            q, t = owner(g, S, W)
            base = q * 3 * B * Cl * S + row * S + t
            x1full[row * Sf + g] = recv[base]
            u[i] = recv[base + B * Cl * S] * recv[base + 2 * B * Cl * S]
        hb = [[h[(me * Gl + cl // D) * Lf + s] if s < Lf else 0.0 for s in range(n)]
              for cl in range(Cl)]  # pack_filter
        urows = [u[row * n:(row + 1) * n] for row in range(B * Cl)]
        y = conv_rows(urows, hb, n, lambda row: row % Cl, Sf)
        sb = [0.0] * (W * blk_out)
        for i in range(B * Cl * Sf):  # epilogue
            row, g = i // Sf, i % Sf
            cl = row % Cl
            z1 = y[row][g] + u[row * n + g] * bias[me * Cl + cl]
            j, tl = owner(g, S, W)
            sb[j * blk_out + row * S + tl] = x1full[i] * z1
        send_out.append(sb)
    outs = []
    for me in range(W):
        recv = sum((send_out[q][me * blk_out:(me + 1) * blk_out] for q in range(W)), [])
        out = [0.0] * (B * S * C)
        for b in range(B):  # transpose_out
            for c in range(C):
                for t in range(S):
                    out[(b * S + t) * C + c] = recv[((c // Cl * B + b) * Cl + c % Cl) * S + t]
        outs.append(out)
    return outs


def correct(X1, X2, V, h, bias, G, D, B, C, S, Lf, W, variant='correct'):
    """solutions/correct.cu and its twins: pull_u, filter_rows, FFTs, push_out into peers."""
    Wr = W
    zig = variant != 'wrong'
    if variant == 'skip_exchange':
        Weff = 1
    else:
        Weff = W
    outs = [[None] * (B * S * C) for _ in range(Wr)]
    for rank in range(Wr):
        me = 0 if Weff == 1 else rank
        Cl, Sf = C // Weff, Weff * S
        n = 2 * Sf

        def peer(arr, q):
            return arr[rank] if Weff == 1 else arr[q]
        u = [0.0] * (B * Cl * n)
        for i in range(B * Cl * n):  # pull_u
            row, g = i // n, i % n
            b, cl = row // Cl, row % Cl
            if g < Sf:
                q, t = owner(g, S, Weff, zig)
                e = (b * C + me * Cl + cl) * S + t
                u[i] = peer(X2, q)[e] * peer(V, q)[e]
        taps = Lf // 4 if variant == 'truncated' else Lf
        hb = [[h[(me * (G // Weff) + cl // D) * Lf + s] if s < taps else 0.0 for s in range(n)]
              for cl in range(Cl)]
        urows = [u[row * n:(row + 1) * n] for row in range(B * Cl)]
        y = conv_rows(urows, hb, n, lambda row: row % Cl, Sf)
        tc, tg = Cl // TS, Sf // TS
        for job in range(B * tc * tg):  # push_out
            b, cl0, g0 = job // (tc * tg), job // tg % tc * TS, job % tg * TS
            q, t0 = owner(g0, S, Weff, zig)
            x1q = peer(X1, q)
            tile = [[0.0] * TS for _ in range(TS)]
            for r in range(TS):
                for tx in range(TS):
                    cl = cl0 + r
                    row = b * Cl + cl
                    z1 = y[row][g0 + tx] + u[row * n + g0 + tx] * bias[me * Cl + cl]
                    tile[r][tx] = x1q[(b * C + me * Cl + cl) * S + t0 + tx] * z1
            dest = rank if Weff == 1 else q
            for r in range(TS):
                for tx in range(TS):
                    outs[dest][(b * S + t0 + r) * C + me * Cl + cl0 + tx] = tile[tx][r]
    return outs


def within(got, want):
    if any(g is None for g in got):
        return False
    rms = math.sqrt(sum(v * v for v in want) / len(want))
    return all(abs(g - v) <= 0.016 * abs(v) + 0.005 * rms for g, v in zip(got, want))


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    rng = random.Random(72)
    ok = True
    shapes = ((2, 8, 2, 8, 12), (4, 16, 2, 4, 14), (8, 16, 1, 4, 20))  # W, C, D, S, Lf
    for W, C, D, S, Lf in shapes:
        B, G = 2, C // D
        assert G % W == 0 and (C // W) % TS == 0 and (S // 2) % TS == 0 and Lf <= W * S
        fails = {'wrong': 0, 'skip_exchange': 0, 'truncated': 0}
        for _ in range(calls):
            X1, X2, V = ([[rng.gauss(0, 1) for _ in range(B * C * S)] for _ in range(W)]
                         for _ in range(3))
            h = [rng.gauss(0, 1) for _ in range(G * Lf)]
            bias = [rng.gauss(0, 1) for _ in range(C)]
            u = [rng.gauss(0, 1) for _ in range(W * S)]
            lin = [sum(h[s] * u[t - s] for s in range(min(t + 1, Lf))) for t in range(W * S)]
            circ = circ_conv(u, h[:Lf], 2 * W * S)
            assert max(abs(a - c) for a, c in zip(lin, circ)) < 1e-9, 'aliasing'

            def nest(X):
                return [[[X[q][(b * C + c) * S:(b * C + c + 1) * S] for c in range(C)]
                         for b in range(B)] for q in range(W)]
            pk = pkb_solution(nest(X1), nest(X2), nest(V),
                              [h[g * Lf:(g + 1) * Lf] for g in range(G)], bias, G, D, B, C, S,
                              Lf, W)
            want = [[pk[q][b][t][c] for b in range(B) for t in range(S) for c in range(C)]
                    for q in range(W)]
            for name, outs in (('reference', reference(X1, X2, V, h, bias, G, D, B, C, S, Lf, W)),
                               ('correct', correct(X1, X2, V, h, bias, G, D, B, C, S, Lf, W))):
                for q in range(W):
                    err = max(abs(a - b) for a, b in zip(outs[q], want[q]))
                    if err > 1e-9:
                        print(f'MISMATCH {name} W={W} rank={q} err={err}')
                        ok = False
            for name in fails:
                outs = correct(X1, X2, V, h, bias, G, D, B, C, S, Lf, W, name)
                fails[name] += any(not within(outs[q], want[q]) for q in range(W))
        print(f'W={W} C={C} D={D} S={S} Lf={Lf}: reference and correct == PKB on every rank'
              f' ({calls} calls); fail: ' + ', '.join(f'{k} {v}/{calls}' for k, v in fails.items()))
        if any(v != calls for v in fails.values()):
            print('  UNEXPECTED: a wrong solution or twin passed')
            ok = False
    print('OK' if ok else 'FAILED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
