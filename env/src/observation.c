/* The observation built from an episode's turns: its chat form (`messages`, docs/protocol.md)
 * and the next prompt. */
#include <stdlib.h>

#include "episode_examples.h"
#include "observation.h"

static json_t *messages_json(pk_summarizer *sum, const char *task, const pk_turn *turns,
                             int n_turns) {
    pk_chat_message *m = NULL;
    int n = 0;
    pk_error err;
    if (pk_summarizer_messages(sum, task, turns, n_turns, &m, &n, &err) != PK_OK)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; out && i < n; i++) {
        /* Contents quote feedback and code: valid UTF-8 for msgpack and JSON. */
        char *clean = pk_utf8_sanitize(m[i].content);
        json_t *msg = clean ? json_pack("{s:s, s:s}", "role", m[i].role, "content", clean) : NULL;
        free(clean);
        if (!msg || json_array_append_new(out, msg)) {
            json_decref(out);
            out = NULL;
        }
    }
    pk_chat_messages_free(m, n);
    return out;
}

json_t *pk_episode_messages_json(pk_episode *e) {
    json_t *out = messages_json(e->summarizer, pk_problem_prompt(e->problem), e->turns, e->n_turns);
    if (out)
        pk_episode_examples_messages(e, out);
    return out;
}

char *pk_episode_next_prompt(pk_episode *e) {
    char *prompt = pk_summarizer_next_prompt(e->summarizer, pk_problem_prompt(e->problem), e->turns,
                                             e->n_turns);
    prompt = pk_utf8_sanitize_take(prompt); /* it quotes earlier feedback */
    return pk_episode_examples_prompt(e, prompt, e->n_turns + 1);
}

json_t *pk_first_messages_json(const pk_server *s, const pk_problem *p) {
    char *fb = json_dumps(s->feedback_default, JSON_COMPACT);
    pk_summarizer *sum = NULL;
    pk_error err;
    json_t *out = NULL;
    if (fb && pk_summarizer_create(fb, s->opts.templates_dir, &sum, &err) == PK_OK)
        out = messages_json(sum, pk_problem_prompt(p), NULL, 0);
    pk_summarizer_free(sum);
    free(fb);
    return out;
}
