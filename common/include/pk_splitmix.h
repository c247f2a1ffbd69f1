/* pk_splitmix.h: the one splitmix64 of the project, for host C and CUDA device code.
 *
 * Counter-based: the value for element i of a stream is pk_splitmix64(key + i), so any
 * element can be recomputed on its own (the harness regenerates inputs to verify a call).
 */
#ifndef PK_SPLITMIX_H
#define PK_SPLITMIX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PK_HD __host__ __device__
#else
#define PK_HD
#endif

/* The splitmix64 finalizer of Steele, Lea and Flood (2014). */
static inline PK_HD uint64_t pk_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A uniform double in (0, 1]: never 0, so log() of it is finite. */
static inline PK_HD double pk_splitmix_unit(uint64_t x) {
    return (double)((pk_splitmix64(x) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

#endif
