/* Open episodes: their settings, turns so far and the step in flight, in a table keyed by id. */
#ifndef PK_ENV_EPISODES_H
#define PK_ENV_EPISODES_H

#include <stddef.h>

#include <jansson.h>

#include "pk_harness.h"
#include "pk_problems.h"
#include "pk_reward.h"
#include "client_limits.h"
#include "pk_summarizer.h"
#include "pk_turn.h"
#include "transport.h"

#define PK_EPISODE_ID_LEN 32 /* hex characters */

/* A step waiting for its evaluation: where to send the reply. */
typedef struct pk_pending_step {
    pk_envelope env;
    char *id_raw;
    size_t id_len;
    struct pk_episode *ep;
    pk_client_entry *client; /* charged for this step while it is in flight */
    pk_turn turn;            /* prompt, action, summary, code, started_at filled at submit */
    size_t bytes;            /* what turn's texts take (pk_turn_text_bytes), charged meanwhile */
} pk_pending_step;

typedef struct pk_episode {
    char id[PK_EPISODE_ID_LEN + 1];
    const pk_problem *problem;
    char *group;
    long long seed; /* the client's, or drawn at reset (seed_drawn): always in effect */
    int seed_drawn;
    int max_turns;
    int stop_on_correct;
    pk_reward_config reward;
    pk_summarizer *summarizer;
    struct pk_episode_examples *examples; /* options.examples (episode_examples.h); NULL: none */
    pk_eval_opts eval;
    json_t *settings; /* the settings in effect, as returned by reset and stored */
    char *prompt;     /* the current prompt */
    pk_turn *turns;   /* turns[i].turn == i + 1 */
    int n_turns;
    int n_stored;       /* turns 1..n_stored are committed to the store (a full disk may leave later
                           ones unstored: they go with the next store job, issue 27, finding 5) */
    int n_trimmed;      /* turns 1..n_trimmed are stored, and their prompt, action and result_json
                           freed: `trajectory` reads them from the store (what the next prompt needs
                           stays: code, summary, feedback) */
    size_t turns_bytes; /* what the texts of turns take (pk_turn_text_bytes) */
    int done;
    double *returns; /* n_turns values once done */
    pk_pending_step *in_flight;
    int closed;            /* closed with a step in flight or a turn not yet committed: freed when
                              both are over (pk_server_release_if_closed) */
    int store_pending;     /* store jobs of its turns submitted and not yet committed */
    int interrupted_turn;  /* restored: turn (1-based) being evaluated when the last run died;
                              its next step is answered `internal` saying so; 0: none */
    double interrupted_at; /* that step's start (seconds since the epoch) */
    char gpu_model[64];    /* the GPU its first measured turn ran on ("" until then) */
    double last_active_ms;
    pk_client_entry *owner;  /* the client that opened it, charged until it is freed */
    size_t bytes;            /* charged to the owner: its turns, the step in flight, the prompt */
    struct pk_episode *next; /* hash chain */
} pk_episode;

#define PK_EPISODE_BUCKETS 8192

typedef struct pk_episode_table {
    pk_episode *bucket[PK_EPISODE_BUCKETS];
    size_t count;
} pk_episode_table;

pk_episode *pk_episode_find(pk_episode_table *t, const char *id);
void pk_episode_insert(pk_episode_table *t, pk_episode *e);
/* Unlinks e from the table (it is not freed). */
void pk_episode_remove(pk_episode_table *t, pk_episode *e);
void pk_episode_free(pk_episode *e);
/* Appends *t (its texts move to e, *t is zeroed); PK_ERR_NOMEM leaves both as they were. */
int pk_episode_add_turn(pk_episode *e, pk_turn *t);
/* Frees the last turn (one not stored yet). */
void pk_episode_drop_last_turn(pk_episode *e);
/* Frees what the store has of e's stored turns (1..n_stored) and the next prompt does not need:
 * their prompts, actions and results (issue 27, finding 4). */
void pk_episode_trim_stored(pk_episode *e);
/* Brings e's charge to its owner (and the owner table's total) to what it holds now. */
void pk_episode_recharge(pk_episode *e);
/* Makes c the owner of e, moving the episode's count and bytes. */
void pk_episode_set_owner(pk_episode *e, pk_client_entry *c);
/* Fills id with 32 random hex characters. */
int pk_episode_new_id(char id[PK_EPISODE_ID_LEN + 1]);

#endif
