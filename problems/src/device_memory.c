/* How much device memory one job needs on each of its GPUs, from the problem's sizes, so that
 * a scheduler can put several jobs on one GPU (rollout/README.md, "Sharing GPUs"). It follows
 * the runner's allocations (problems/runner: layout.c, rank.c, backend_gpu.cu) and rounds
 * every unknown up; test_device_memory checks it against the runner's own arena layout. */
#include "pk_harness_internal.h"

/* The runner's layout constants (pk_runner.h), and what the harness cannot know here. */
#define GUARD_BYTES 65536ull
#define ALIGN_BYTES 4096ull
#define MIN_COPIES 4
#define MAX_COPIES 64
#define SAMPLES 16384ull
#define MAX_VERIFIED 96ull
/* The largest L2 of the GPUs we run on, rounded up (H100 50 MB, H200 60 MB, B200 126 MB):
 * more L2 means more rotation copies and a larger flush buffer. */
#define L2_ASSUMED (128ull << 20)

static unsigned long long align_up(unsigned long long x) {
    return (x + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
}

long pk_job_device_mb(const pk_problem *p, int world_size) {
    pk_problem_sizes sz;
    pk_error err;
    if (!p->device_gpu || pk_problem_sizes_at(p, world_size, &sz, &err) != PK_OK)
        return p->device_gpu ? PK_JOB_GPU_OVERHEAD_MB : 0;
    unsigned long long args = 0, set = 0;
    for (int i = 0; i < p->n_args; i++) {
        unsigned long long bytes =
            (unsigned long long)sz.counts[i] * pk_dtype_size(p->args[i].dtype);
        args += bytes;
        set = align_up(set + GUARD_BYTES) + bytes + GUARD_BYTES;
    }
    set = align_up(set);
    unsigned long long copies = MIN_COPIES;
    if (set > 0) {
        unsigned long long need =
            (unsigned long long)(p->l2_multiple * (double)L2_ASSUMED) / set + 1;
        copies = need < MIN_COPIES ? MIN_COPIES : need > MAX_COPIES ? MAX_COPIES : need;
    }
    unsigned long long scratch = p->scratch_bytes > 0 ? (unsigned long long)p->scratch_bytes : 0;
    unsigned long long arena = copies * set + align_up(scratch) + 3 * GUARD_BYTES + ALIGN_BYTES;
    /* Reference outputs, pristine inputs and snapshots (the runner makes the first and last for
     * outputs only and pristine copies for inputs only; counted per argument, as an upper
     * bound), the sample
     * positions and verified calls' samples, and the 2 x L2 flush buffer. */
    unsigned long long samples = (unsigned long long)p->n_args * SAMPLES * 8 * (MAX_VERIFIED + 4);
    unsigned long long total = arena + 3 * args + samples + 2 * L2_ASSUMED;
    return (long)((total + (1ull << 20) - 1) >> 20) + PK_JOB_GPU_OVERHEAD_MB;
}
