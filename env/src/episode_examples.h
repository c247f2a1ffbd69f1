/* reset's options.examples: archive entries shown to an episode as in-context examples
 * (docs/protocol.md, docs/archive.md). An episode sees other episodes' kernels only this way. */
#ifndef PK_ENV_EPISODE_EXAMPLES_H
#define PK_ENV_EPISODE_EXAMPLES_H

#include <jansson.h>

#include "episodes.h"
#include "pk_archive.h"

/* What an episode asked for, and the examples of its current prompt. */
typedef struct pk_episode_examples {
    pk_examples_spec spec;
    pk_archive *archive;    /* the server's, borrowed */
    int turn;               /* the turn (1-based) the current prompt is for */
    pk_examples_mode used;  /* the mode that turn used (similar or random) */
    pk_archive_list picked; /* retrieved for it, best first */
    int in_prompt;          /* how many of them fit in the prompt's budget */
    char error[512];        /* why retrieval failed ("" when it did not): the prompt has none */
} pk_episode_examples;

/* Parses options.examples (a map, or null for none) into e->examples and records the settings
 * in effect in settings["examples"]. PK_ERR_INVALID names the offending key. */
int pk_episode_examples_option(pk_episode *e, const json_t *value, json_t *settings, pk_error *err);
void pk_episode_examples_free(pk_episode_examples *x);

/* The archive the episode's retrieval reads (no-op without options.examples). */
void pk_episode_examples_bind(pk_episode *e, pk_archive *archive);

/* The prompt of turn (1-based) with its examples: retrieves them, records their use in the
 * archive, and puts as many as fit within the context budget before base (consumed), dropping
 * the lowest-ranked first; base unchanged without options.examples. NULL: out of memory. */
char *pk_episode_examples_prompt(pk_episode *e, char *base, int turn);
/* The same examples, put before the first user message of messages while the whole
 * conversation stays within the budget. */
void pk_episode_examples_messages(pk_episode *e, json_t *messages);
/* The reply's info.examples: what was asked, which entries the prompt used; NULL without
 * options.examples. */
json_t *pk_episode_examples_info(const pk_episode *e);

#endif
