/* Private to reward/: recomputes scores, returns and advantages of every stored trajectory. */
#ifndef PK_ABLATION_H
#define PK_ABLATION_H

#include "pk_metrics.h"
#include "pk_reward.h"
#include "pk_store.h"
#include "store_reader.h"

typedef struct pk_ablation_turn {
    int turn; /* 1-based */
    pk_status status;
    double speedup; /* against the config's baseline, before the transform */
    double score, ret, advantage;
    double online_score, online_return; /* online_return valid when the episode finished */
    int mismatch;                       /* score or return differs from the online one */
} pk_ablation_turn;

typedef struct pk_ablation_episode {
    char *id, *problem_id, *group; /* group NULL when none */
    long long seed;
    int finished, returns_malformed;
    pk_reward_config config; /* the one used */
    int n_turns;
    pk_ablation_turn *turns;
} pk_ablation_episode;

typedef enum pk_normalize { PK_NORMALIZE_PROBLEM = 0, PK_NORMALIZE_GROUP } pk_normalize;

/* One normalization set: its key and the statistics of its returns. Under group
 * normalization an episode without a group is a set of its own (ungrouped = 1, key
 * "(ungrouped) <episode id>"): ungrouped episodes are never merged with one another. */
typedef struct pk_ablation_set {
    char *key;
    int ungrouped;
    int n_trajectories, n_turns;
    double mean, std;
} pk_ablation_set;

typedef struct pk_ablation {
    int n_episodes;
    pk_ablation_episode *episodes;
    int n_sets;
    pk_ablation_set *sets;
    int n_mismatches; /* turns whose score or return differs from the online one */
    int n_unfinished; /* episodes without online returns (e.g. the server was killed) */
    int n_ungrouped;  /* group normalization: episodes without a group, each its own set */
} pk_ablation;

typedef struct pk_ablation_opts {
    const pk_reward_config *config; /* NULL: each episode's stored config */
    pk_normalize normalize;
    double eps;                    /* advantage denominator: std + eps */
    double tolerance;              /* relative, for comparing with the online values */
    const pk_store_filter *filter; /* NULL: every episode */
} pk_ablation_opts;

int pk_ablation_run(pk_store *s, const pk_ablation_opts *o, pk_ablation *out, pk_error *err);
void pk_ablation_free(pk_ablation *a);
/* The set key of an episode: its problem, or its group; NULL under group normalization for an
 * episode without a group (it is a set of its own). */
const char *pk_ablation_key(const pk_ablation_episode *e, pk_normalize normalize);

/* Metrics (pk_metrics.h) of one problem's trajectories, speedups against the config's
 * baseline. PK_ERR_INVALID when the problem has fewer than k trajectories. */
int pk_ablation_problem_metrics(const pk_ablation *a, const char *problem_id, int k, double p,
                                pk_metrics_summary *out, pk_error *err);

#endif
