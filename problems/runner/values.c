/* Keys of the runner's counter-based streams (values themselves: rn_values.h). */
#include "pk_runner.h"

uint64_t rn_stream_key(uint64_t seed, int trial, int rank, int arg) {
    return pk_splitmix64(pk_splitmix64(pk_splitmix64(seed ^ 0x706b67796dULL) + (uint64_t)trial) +
                         ((uint64_t)rank << 8 | (uint64_t)arg));
}

uint64_t rn_secret(uint64_t seed, uint64_t purpose) {
    return pk_splitmix64(pk_splitmix64(seed) ^ pk_splitmix64(purpose));
}
