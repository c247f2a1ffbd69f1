// attention_emul.h: the CUDA names pk_attention.cuh's tile uses, emulated on the host, so the
// tile (pk_attn_fwd_tile, PK_ATTN_EMULATE) runs in a test without a GPU: one fiber per CUDA
// thread of a CTA (attention_fiber.h), barriers for __syncthreads and __syncwarp, a per-warp
// exchange for __shfl_xor_sync, and WMMA fragments that hold the whole 16 x 16 tile in every
// lane (loads by every lane, stores by lane 0 then a warp barrier, so a store is complete for the
// warp when it returns, as the collective's is). Products of bf16 values are accumulated in fp32.
// The forward tile's primitives (cp.async, ldmatrix, mma.sync m16n8k16) keep the hardware's
// per-lane fragment layouts: each lane passes its own addresses and registers through a per-warp
// exchange, so a wrong fragment index gives a wrong result here too.
#ifndef PK_ATTENTION_EMUL_H
#define PK_ATTENTION_EMUL_H

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <type_traits>

#include "attention_fiber.h"

#define PK_ATTN_EMULATE 1
#define __device__
#define __forceinline__

using std::max;
using std::min;

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
    return uint4{x, y, z, w};
}

struct __nv_bfloat16 {
    uint16_t bits;
};
static inline __nv_bfloat16 __float2bfloat16(float x) { // round to nearest even
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16{(uint16_t)(u >> 16)};
}
static inline float pk_emul_bf16_to_float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.bits << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

// The CTA a thread belongs to: its barriers and the warps' shuffle slots.
struct PkEmulCta {
    PkEmulBarrier block;
    PkEmulBarrier warp[32];
    float slot[32][32];
    // The exchange of the forward tile's primitives, [set][warp][lane]: ldmatrix's row
    // addresses, mma's A and B fragments.
    const void *ptr[2][32][32];
    uint32_t xa[2][32][32][4], xb[2][32][32][2];
};
struct PkEmulIdx {
    unsigned x;
};
// The running fiber's (attention_fiber.h sets threadIdx and pk_emul_phase at each switch).
extern PkEmulIdx threadIdx;
extern PkEmulCta *pk_emul_cta;
extern unsigned pk_emul_phase; // exchanges this thread has made (0 at its start)

static inline void __syncthreads() {
    pk_emul_barrier_wait(&pk_emul_cta->block);
}
static inline void __syncwarp() {
    pk_emul_barrier_wait(&pk_emul_cta->warp[threadIdx.x / 32]);
}
static inline float __shfl_xor_sync(unsigned, float v, int m) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    pk_emul_cta->slot[w][l] = v;
    __syncwarp();
    const float r = pk_emul_cta->slot[w][l ^ (unsigned)m];
    __syncwarp();
    return r;
}

// ---- The forward tile's primitives (pk_attention.cuh), per lane as on the hardware ----
// An exchange has one warp barrier: the slots alternate between two sets, and a lane writes a
// set again only after the barrier of the exchange in between, which every lane reaches only
// after it has read what it needed.
static inline unsigned pk_emul_exchange_set() {
    return pk_emul_phase++ & 1u;
}
static inline void pk_emul_aligned16(const void *p) { // the hardware faults on these
    if ((uintptr_t)p % 16)
        std::abort();
}
static inline void pk_attn_cp_async16(void *dst, const void *src, bool valid) {
    pk_emul_aligned16(dst);
    pk_emul_aligned16(src);
    if (valid)
        std::memcpy(dst, src, 16);
    else
        std::memset(dst, 0, 16);
}
static inline void pk_attn_cp_async_commit() {}
template <int N> static inline void pk_attn_cp_async_wait() { // the copies were synchronous
}
static inline void pk_emul_ldmatrix(uint32_t (&r)[4], const void *p, bool trans) {
    pk_emul_aligned16(p);
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32, set = pk_emul_exchange_set();
    pk_emul_cta->ptr[set][w][l] = p;
    __syncwarp();
    const void *const *rows = pk_emul_cta->ptr[set][w];
    for (unsigned j = 0; j < 4; j++) {
        uint16_t lo, hi;
        if (!trans) { // row l / 4, columns 2 (l % 4), +1 of matrix j
            const uint16_t *row = static_cast<const uint16_t *>(rows[8 * j + l / 4]);
            lo = row[2 * (l % 4)];
            hi = row[2 * (l % 4) + 1];
        } else { // rows 2 (l % 4), +1 of column l / 4
            lo = static_cast<const uint16_t *>(rows[8 * j + 2 * (l % 4)])[l / 4];
            hi = static_cast<const uint16_t *>(rows[8 * j + 2 * (l % 4) + 1])[l / 4];
        }
        r[j] = (uint32_t)lo | (uint32_t)hi << 16;
    }
}
static inline void pk_attn_ldmatrix_x4(uint32_t (&r)[4], const void *p) {
    pk_emul_ldmatrix(r, p, false);
}
static inline void pk_attn_ldmatrix_x4_trans(uint32_t (&r)[4], const void *p) {
    pk_emul_ldmatrix(r, p, true);
}
static inline float pk_emul_bf16_half(uint32_t x, unsigned hi) {
    return pk_emul_bf16_to_float(__nv_bfloat16{(uint16_t)(hi ? x >> 16 : x & 0xffffu)});
}
// mma.sync.m16n8k16.row.col, lane (g, t) = (l / 4, l % 4): A register i holds row g + 8 (i & 1),
// columns 2 t + 8 (i >> 1), +1; B register i rows 2 t + 8 i, +1 of column g; C element e row
// g + 8 (e >> 1), column 2 t + (e & 1). Accumulated in fp32.
static inline void pk_attn_mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32, set = pk_emul_exchange_set();
    PkEmulCta *x = pk_emul_cta;
    std::memcpy(x->xa[set][w][l], a, sizeof a);
    x->xb[set][w][l][0] = b0;
    x->xb[set][w][l][1] = b1;
    __syncwarp();
    const unsigned g = l / 4, t = l % 4;
    for (unsigned e = 0; e < 4; e++) {
        const unsigned row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        float s = c[e];
        for (unsigned k = 0; k < 16; k++) {
            const uint32_t ar = x->xa[set][w][(row % 8) * 4 + (k % 8) / 2][(row / 8) + 2 * (k / 8)];
            const uint32_t br = x->xb[set][w][col * 4 + (k % 8) / 2][k / 8];
            s += pk_emul_bf16_half(ar, k % 2) * pk_emul_bf16_half(br, k % 2);
        }
        c[e] = s;
    }
}
static inline float __uint_as_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t pk_attn_pack_bf16(float lo, float hi) {
    return (uint32_t)__float2bfloat16(lo).bits | (uint32_t)__float2bfloat16(hi).bits << 16;
}

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    float x[16][16]; // [row][col] of the tile, in every lane
};

template <class Use, class T, class L>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const __nv_bfloat16 *p,
                                    unsigned ldm) {
    const bool col = std::is_same<L, col_major>::value;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.x[i][j] = pk_emul_bf16_to_float(col ? p[j * ldm + i] : p[i * ldm + j]);
}
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                                    unsigned ldm, layout_t) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.x[i][j] = p[i * ldm + j];
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t) {
    __syncwarp(); // every lane has done what came before (its reads of p)
    if (threadIdx.x % 32 == 0)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++)
                p[i * ldm + j] = f.x[i][j];
    __syncwarp();
}
static inline void fill_fragment(fragment<accumulator, 16, 16, 16, float> &f, float v) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.x[i][j] = v;
}
template <class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                            const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c) {
    float r[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i][j];
            for (int k = 0; k < 16; k++)
                s += a.x[i][k] * b.x[k][j];
            r[i][j] = s;
        }
    std::memcpy(d.x, r, sizeof r);
}
} // namespace wmma
} // namespace nvcuda

#endif
