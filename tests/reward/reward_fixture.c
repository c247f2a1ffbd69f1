/* Test helper: writes a trajectory store the way the server does (pk_store + online scores
 * and returns from pk_reward), with mixed statuses, configs and one unfinished episode. */
#include <stdio.h>
#include <stdlib.h>

#include "pk_reward.h"
#include "pk_store.h"

enum { PROBLEMS = 2, TRAJECTORIES = 6, TURNS = 4 };

static unsigned long long lcg = 12345;
static unsigned next_rand(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(lcg >> 33);
}

static const char *const configs[] = {
    "{\"reward\":{\"gamma\":0.8,\"mode\":\"max\"}}",
    NULL, /* the store keeps a snapshot of the defaults */
    "{\"max_turns\":4,\"reward\":{\"transform\":\"log2\",\"r_compile\":0.1,"
    "\"penalty_format\":0.2}}",
};

static int fail(const pk_error *err) {
    fprintf(stderr, "reward_fixture: %s\n", err->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: reward_fixture DB\n");
        return 2;
    }
    const char *problems[PROBLEMS] = {"allreduce", "allgather"};
    pk_store *s = NULL;
    pk_error err = {0};
    if (pk_store_open(argv[1], &s, &err))
        return fail(&err);
    for (int p = 0; p < PROBLEMS; p++) {
        for (int j = 0; j < TRAJECTORIES; j++) {
            char id[64], group[16], code[64], result[512];
            snprintf(id, sizeof id, "%s-%d", problems[p], j);
            snprintf(group, sizeof group, "g%d", j % 2);
            const char *config = configs[j % 3];
            pk_episode_row e = {.episode_id = id,
                                .problem_id = problems[p],
                                .group = group,
                                .seed = 1000 + j,
                                .max_turns = TURNS,
                                .config_json = config,
                                .task_prompt = "Implement the collective."};
            if (pk_store_begin_episode(s, &e, &err))
                return fail(&err);
            pk_reward_config c;
            pk_reward_config_default(&c);
            if (config && pk_reward_config_from_stored_json(config, &c, &err))
                return fail(&err);
            double scores[TURNS];
            for (int t = 0; t < TURNS; t++) {
                pk_status st = (pk_status)(next_rand() % PK_STATUS_TURN_COUNT);
                double ref = 100.0, cand = 40.0 + next_rand() % 160;
                int timed = st == PK_STATUS_CORRECT;
                snprintf(result, sizeof result,
                         "{\"status\":\"%s\",\"speedup\":%.17g,\"roofline_us\":25.0,"
                         "\"candidate\":{\"median_us\":%.17g,\"cv\":0.02},"
                         "\"reference\":{\"median_us\":%.17g,\"cv\":0.01},"
                         "\"trials\":[{\"passed\":%s}],\"checks\":[]}",
                         pk_status_name(st), timed ? ref / cand : 0.0, timed ? cand : 0.0,
                         timed ? ref : 0.0, st == PK_STATUS_CORRECT ? "true" : "false");
                pk_turn_facts f;
                const char *stored = st == PK_STATUS_FORMAT_ERROR ? NULL : result;
                if (stored && pk_turn_facts_from_result_json(stored, &f, &err))
                    return fail(&err);
                if (!stored)
                    f = (pk_turn_facts){.status = st};
                scores[t] = pk_reward_score(&c, &f);
                snprintf(code, sizeof code, "__global__ void k%d_%d() {}", j, t);
                /* The store only reads the texts: the casts drop const, nothing writes. */
                pk_turn row = {.turn = t + 1,
                               .action = "reasoning + code",
                               .summary = "plan",
                               .code = code,
                               .status = st,
                               .score = scores[t],
                               .result_json = (char *)stored,
                               .feedback = (char *)pk_status_name(st),
                               .started_at = 10.0 * t,
                               .finished_at = 10.0 * t + 5};
                if (pk_store_add_turn(s, id, &row, &err))
                    return fail(&err);
            }
            /* The last episode is left unfinished, as after a server kill. */
            if (p == PROBLEMS - 1 && j == TRAJECTORIES - 1)
                continue;
            double returns[TURNS];
            pk_reward_returns(&c, scores, TURNS, returns);
            if (pk_store_finish_episode(s, id, returns, TURNS, &err))
                return fail(&err);
        }
    }
    pk_store_close(s);
    return 0;
}
