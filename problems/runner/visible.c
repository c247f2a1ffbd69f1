/* --rank-visibility own: each rank process sees only its own GPU. The sandbox sets
 * CUDA_VISIBLE_DEVICES to the job's GPUs in rank order (UUIDs, or positions when the driver
 * shows none: docs/sandbox.md); a rank keeps the r-th entry, before anything in it initializes
 * CUDA, and then uses device 0. A CUDA context that enumerates one GPU instead of all of them is
 * created faster, most of all under load (bench/results, issue 30). The device nodes, the GPU
 * locks and the GPU ids the result reports are the job's, unchanged. */
#include "pk_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rn_visible_own(const char *list, int rank, char *out, size_t cap) {
    if (rank < 0 || cap == 0)
        return -1;
    if (!list || !*list) { /* no sandbox (a test): rank r used device r of all */
        int w = snprintf(out, cap, "%d", rank);
        return w > 0 && (size_t)w < cap ? 0 : -1;
    }
    const char *p = list;
    for (int i = 0; i < rank; i++) {
        p = strchr(p, ',');
        if (!p)
            return -1;
        p++;
    }
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= cap)
        return -1;
    memcpy(out, p, len);
    out[len] = 0;
    return 0;
}

int rn_visible_apply(int rank) {
    char own[128];
    if (rn_visible_own(getenv("CUDA_VISIBLE_DEVICES"), rank, own, sizeof own) != 0) {
        fprintf(stderr, "pk-runner: CUDA_VISIBLE_DEVICES names no GPU for rank %d\n", rank);
        return -1;
    }
    return setenv("CUDA_VISIBLE_DEVICES", own, 1) == 0 ? 0 : -1;
}
