/* The terms of a score: the one table that the score, the reward config and the step reply
 * follow (pk_reward.h). A new term is a row here, its weight in pk_reward_config and its field
 * in pk_reward_parts (docs/rewards.md, "Adding a reward term"). */
#include <stddef.h>

#include "pk_reward.h"

#define AT(s) PK_REWARD_AT(PK_STATUS_##s)
#define WEIGHT(field) .weight = #field, .weight_at = offsetof(pk_reward_config, field)
#define PART(field) .name = #field, .part_at = offsetof(pk_reward_parts, field)

const pk_reward_term pk_reward_terms[PK_REWARD_TERM_COUNT] = {
    {PART(correctness), WEIGHT(w_correct), .weight_default = 0.3, .sign = 1,
     .statuses = AT(CORRECT)},
    {PART(speedup_term), .kind = PK_REWARD_TERM_SPEEDUP, .statuses = AT(CORRECT)},
    /* compiled */
    {PART(compile), WEIGHT(r_compile), .sign = 1,
     .statuses = AT(RUNTIME_ERROR) | AT(TIMEOUT) | AT(INCORRECT) | AT(CORRECT)},
    /* ran */
    {PART(run), WEIGHT(r_run), .sign = 1, .statuses = AT(INCORRECT) | AT(CORRECT)},
    {PART(penalty_rejected), WEIGHT(penalty_rejected), .sign = -1, .statuses = AT(REJECTED)},
    {PART(penalty_format), WEIGHT(penalty_format), .sign = -1, .statuses = AT(FORMAT_ERROR)},
};

double pk_reward_term_weight(const pk_reward_config *c, const pk_reward_term *t) {
    return *(const double *)((const char *)c + t->weight_at);
}

/* The name and place of the i-th named value of pk_reward_parts; -1 when there is none. */
static int part_of(int i, const char **name, size_t *at) {
    int k = 0;
    for (int t = 0; t < PK_REWARD_TERM_COUNT; t++) {
        if (k++ == i) {
            *name = pk_reward_terms[t].name;
            *at = pk_reward_terms[t].part_at;
            return 0;
        }
        if (pk_reward_terms[t].kind == PK_REWARD_TERM_SPEEDUP && k++ == i) {
            *name = "speedup";
            *at = offsetof(pk_reward_parts, speedup);
            return 0;
        }
    }
    if (k != i)
        return -1;
    *name = "total";
    *at = offsetof(pk_reward_parts, total);
    return 0;
}

const char *pk_reward_part_name(int i) {
    const char *name;
    size_t at;
    return part_of(i, &name, &at) ? NULL : name;
}

double pk_reward_part_value(const pk_reward_parts *p, int i) {
    const char *name;
    size_t at;
    return part_of(i, &name, &at) ? 0.0 : *(const double *)((const char *)p + at);
}
