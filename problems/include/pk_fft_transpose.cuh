// pk_fft_transpose.cuh: the distributed transposes of PhysicsNeMo's 2-D FFTs (pkb/59
// distributed_rfft, pkb/60 distributed_irfft; issue 33), for their references, simulations and
// tests/problems/test_fft_transpose.c (C).
//
// Prompt: the distributed transposes of the 2-D FFTs: pack, NCCL all-to-all, unpack.
//
// PKB's _all_to_all_transpose splits a rank's tensor into W chunks along one dimension
// (torch.split, each chunk made contiguous), sends chunk k to rank k (dist.all_to_all) and
// concatenates the W received chunks, in rank order, along another dimension. Seen as a
// (O, A, C) row-major tensor (O: the leading dimensions, A and C the two that take part):
//   PK_XPOSE_ROWS (pkb/59: split H, concatenate W): chunk k is rows [k A/W, (k+1) A/W); the
//     result is (O, A/W, W C), rank q's chunk in columns [q C, (q+1) C);
//   PK_XPOSE_COLS (pkb/60: split W, concatenate H): chunk k is columns [k C/W, (k+1) C/W); the
//     result is (O, W A, C/W), rank q's chunk in rows [q A, (q+1) A).
// A send buffer holds chunk k at [k n, (k+1) n) (n = O A C / W, the chunk row-major), a receive
// buffer chunk q (from rank q) at [q n, (q+1) n): what ncclSend / ncclRecv of n elements per
// peer move.
//
// pkb/60's _conj_pad_2d completes the Hermitian half-spectrum X (H x (Wd/2 + 1) per plane) to
// H x Wd: X[h][k] for k <= Wd/2, conj(X[(H - h) % H][Wd - k]) beyond (its zero padding, flips
// and the gather along H leave exactly that): pk_hermitian_src.
#ifndef PK_FFT_TRANSPOSE_CUH
#define PK_FFT_TRANSPOSE_CUH

#include "pk_splitmix.h" // PK_HD

enum { PK_XPOSE_ROWS = 0, PK_XPOSE_COLS = 1 };

// The element of the local (O, A, C) tensor at send-buffer position p.
static inline PK_HD long long pk_xpose_pack_src(int orient, long long p, long long O, long long A,
                                                long long C, int W) {
    const long long n = O * A * C / W, k = p / n, e = p % n;
    if (orient == PK_XPOSE_ROWS) {
        const long long a = A / W, o = e / (a * C), i = e / C % a, j = e % C;
        return (o * A + k * a + i) * C + j;
    }
    const long long c = C / W, o = e / (A * c), i = e / c % A, j = e % c;
    return (o * A + i) * C + k * c + j;
}

// The element of the result that receive-buffer position p fills.
static inline PK_HD long long pk_xpose_unpack_dst(int orient, long long p, long long O, long long A,
                                                  long long C, int W) {
    const long long n = O * A * C / W, q = p / n, e = p % n;
    if (orient == PK_XPOSE_ROWS) {
        const long long a = A / W, o = e / (a * C), i = e / C % a, j = e % C;
        return (o * a + i) * (W * C) + q * C + j;
    }
    const long long c = C / W, o = e / (A * c), i = e / c % A, j = e % c;
    return (o * W * A + q * A + i) * c + j;
}

// Where element (h, k) of the completed H x Wd spectrum comes from in the half-spectrum
// (H x (Wd/2 + 1)): *sh, *sk, and whether it is conjugated (the return value).
static inline PK_HD int pk_hermitian_src(long long h, long long k, long long H, long long Wd,
                                         long long *sh, long long *sk) {
    if (k <= Wd / 2) {
        *sh = h;
        *sk = k;
        return 0;
    }
    *sh = (H - h) % H;
    *sk = Wd - k;
    return 1;
}

#ifdef __CUDACC__
// send[p] = scale * src[pk_xpose_pack_src(p)] (complex, as float2), p over all W n positions.
__global__ void pk_xpose_pack(const float2 *src, float2 *send, int orient, long long O, long long A,
                              long long C, int W, float scale) {
    const long long total = O * A * C;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x) {
        const float2 v = src[pk_xpose_pack_src(orient, p, O, A, C, W)];
        send[p] = make_float2(scale * v.x, scale * v.y);
    }
}

// dst[pk_xpose_unpack_dst(p)] = recv[p].
__global__ void pk_xpose_unpack(const float2 *recv, float2 *dst, int orient, long long O,
                                long long A, long long C, int W) {
    const long long total = O * A * C;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x)
        dst[pk_xpose_unpack_dst(orient, p, O, A, C, W)] = recv[p];
}
#endif

#endif
