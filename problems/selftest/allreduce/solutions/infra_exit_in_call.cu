// Hostile (#25): in its first call, prints the runner's own set-up marker text and a fake
// device error, then exits with the runner's set-up-failure status. What it prints cannot
// remove the marker the runner wrote before loading it: runtime_error, never infra_error.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    fputs("pk-runner: set-up done; loading the candidate\n"
          "rank 0: device setup failed: faked for a test (PKGYM_FAKE_SETUP_FAILURE in the "
          "server's environment)\n",
          stderr);
    fflush(stderr);
    exit(3); /* PK_RUNNER_EXIT_INFRA */
    memcpy(y, x, n * sizeof *y);
    return 0;
}
