/* Placeholder until issue #6 lands: says so and fails, as the CLI contract requires. */
#include "pk_reward.h"

#include <stdio.h>
#include <string.h>

int pk_cmd_reward(int argc, char **argv) {
    int help = argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    fprintf(
        help ? stdout : stderr,
        "pkgym reward: not built yet (issue #6). This subcommand does nothing in this build.\n");
    return 2;
}
