#include "pk_common.h"

#include <time.h>

uint64_t pk_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double pk_now_ms(void) {
    return (double)pk_now_ns() / 1e6;
}

double pk_now_us(void) {
    return (double)pk_now_ns() / 1e3;
}

double pk_wall_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
