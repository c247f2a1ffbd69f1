/* What pk-runner tells the harness about where a failure happened, through channels its
 * candidate cannot take back (docs/sandbox.md, "Whose failure is it"). */
#ifndef PK_RUNNER_EXIT_H
#define PK_RUNNER_EXIT_H

/* Written by each rank to stderr, in one write(2), after every rank's set-up succeeded and
 * before the candidate is loaded. Once in the sandbox's pipe it cannot be removed, and the
 * candidate's own output comes after it, so it is kept within the output cap. A run whose
 * captured stderr holds it has loaded candidate code. */
#define PK_RUNNER_SETUP_DONE "pk-runner: set-up done; loading the candidate\n"

/* The runner's exit status when it stopped before loading the candidate (set-up failed on a
 * rank, the seed or problem could not be read, bad arguments). A candidate can exit with it
 * too, but only after the marker above is out. */
#define PK_RUNNER_EXIT_INFRA 3
/* The runner's exit status when rank 0 could not write the result (after the candidate ran). */
#define PK_RUNNER_EXIT_RESULT 4

#endif
