/* Generic input values and element conversions, shared by the host backend and the reports. */
#include "pk_runner.h"

uint64_t rn_mix(uint64_t x) { /* splitmix64 finalizer */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t rn_stream_key(uint64_t seed, int trial, int rank, int arg) {
    return rn_mix(rn_mix(rn_mix(seed ^ 0x706b67796dULL) + (uint64_t)trial) +
                  ((uint64_t)rank << 8 | (uint64_t)arg));
}
