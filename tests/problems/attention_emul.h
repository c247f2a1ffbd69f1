// attention_emul.h: the CUDA names pk_attention.cuh's tile uses, emulated on the host, so the
// tile (pk_attn_fwd_tile, PK_ATTN_EMULATE) runs in a test without a GPU: one std::thread per CUDA
// thread of a CTA, barriers for __syncthreads and __syncwarp, a per-warp exchange for
// __shfl_xor_sync, and WMMA fragments that hold the whole 16 x 16 tile in every lane (loads by
// every lane, stores by lane 0 then a warp barrier, so a store is complete for the warp when it
// returns, as the collective's is). Products of bf16 values are accumulated in fp32.
#ifndef PK_ATTENTION_EMUL_H
#define PK_ATTENTION_EMUL_H

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <type_traits>

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
    std::barrier<> *block;
    std::barrier<> *warp[32];
    float slot[32][32];
};
struct PkEmulIdx {
    unsigned x;
};
extern thread_local PkEmulIdx threadIdx;
extern thread_local PkEmulCta *pk_emul_cta;

static inline void __syncthreads() {
    pk_emul_cta->block->arrive_and_wait();
}
static inline void __syncwarp() {
    pk_emul_cta->warp[threadIdx.x / 32]->arrive_and_wait();
}
static inline float __shfl_xor_sync(unsigned, float v, int m) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    pk_emul_cta->slot[w][l] = v;
    __syncwarp();
    const float r = pk_emul_cta->slot[w][l ^ (unsigned)m];
    __syncwarp();
    return r;
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
