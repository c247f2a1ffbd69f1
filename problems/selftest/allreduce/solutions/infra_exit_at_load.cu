// Hostile (#25): tries to pass its own failure off as ours (infra_error is never scored, so a
// policy that learned it would dodge its zeros). While the runner loads it (a static
// constructor), it prints what a failed device set-up prints and exits with the runner's own
// set-up-failure status. The runner wrote its set-up marker before loading it: runtime_error.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

__attribute__((constructor)) static void fake_infra(void) {
    fputs("pk-runner: rank 0: device setup failed: cudaSetDevice: no CUDA-capable device is "
          "detected\n",
          stderr);
    fflush(stderr);
    exit(3); /* PK_RUNNER_EXIT_INFRA */
}

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    memcpy(y, x, n * sizeof *y);
    return 0;
}
