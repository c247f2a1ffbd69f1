/* Archive examples in an episode's prompts (episode_examples.h). */
#include "episode_examples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_K 3

int pk_episode_examples_option(pk_episode *e, const json_t *value, json_t *settings,
                               pk_error *err) {
    if (!value || json_is_null(value))
        return PK_OK;
    if (!json_is_object(value))
        return pk_error_set(err, PK_ERR_INVALID,
                            "options.examples must be a map {k, mode, scope} (or nil for none)");
    pk_examples_spec spec = {
        .k = DEFAULT_K, .mode = PK_EXAMPLES_ALTERNATE, .scope = PK_EXAMPLES_OTHER_PROBLEMS};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)value, key, v) {
        if (strcmp(key, "k") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > PK_ARCHIVE_MAX_K)
                return pk_error_set(err, PK_ERR_INVALID,
                                    "options.examples.k must be an integer in [1, %d]",
                                    PK_ARCHIVE_MAX_K);
            spec.k = (int)json_integer_value(v);
        } else if (strcmp(key, "mode") == 0) {
            int m = pk_examples_mode_parse(json_string_value(v));
            if (m < 0)
                return pk_error_set(err, PK_ERR_INVALID,
                                    "options.examples.mode must be \"alternate\", \"similar\" or "
                                    "\"random\"");
            spec.mode = (pk_examples_mode)m;
        } else if (strcmp(key, "scope") == 0) {
            int sc = pk_examples_scope_parse(json_string_value(v));
            if (sc < 0)
                return pk_error_set(err, PK_ERR_INVALID,
                                    "options.examples.scope must be \"other_problems\" or \"any\"");
            spec.scope = (pk_examples_scope)sc;
        } else {
            return pk_error_set(err, PK_ERR_INVALID,
                                "options.examples.%s: unknown key (k, mode, scope)", key);
        }
    }
    e->examples = calloc(1, sizeof *e->examples);
    json_t *eff =
        json_pack("{s:i, s:s, s:s}", "k", spec.k, "mode", pk_examples_mode_name(spec.mode), "scope",
                  pk_examples_scope_name(spec.scope));
    if (!e->examples || !eff) {
        json_decref(eff);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    e->examples->spec = spec;
    json_object_set_new(settings, "examples", eff);
    return PK_OK;
}

void pk_episode_examples_free(pk_episode_examples *x) {
    if (!x)
        return;
    pk_archive_list_free(&x->picked);
    free(x);
}

void pk_episode_examples_bind(pk_episode *e, pk_archive *archive) {
    if (e->examples)
        e->examples->archive = archive;
}

/* Retrieves the examples of turn's prompt and records their use; on failure the prompt has
 * none, and the reply's info says why (never the episode's failure). */
static void pick(pk_episode *e, int turn) {
    pk_episode_examples *x = e->examples;
    pk_archive_list_free(&x->picked);
    x->turn = turn;
    x->in_prompt = 0;
    x->error[0] = '\0';
    x->used = pk_examples_mode_at(x->spec.mode, turn);
    pk_error err;
    pk_error_clear(&err);
    char *tags = NULL;
    pk_archive_problem p;
    int rc = !x->archive ? pk_error_set(&err, PK_ERR_UNSUPPORTED, "this server has no archive")
                         : pk_archive_problem_of(e->problem, &p, &tags);
    if (!rc)
        rc = pk_archive_retrieve(x->archive, &p, &x->spec, turn, (unsigned long long)e->seed,
                                 &x->picked, &err);
    free(tags);
    if (rc) {
        snprintf(x->error, sizeof x->error, "%s", err.message[0] ? err.message : "out of memory");
        fprintf(stderr, "pkgym serve: episode %s: examples of turn %d: %s\n", e->id, turn,
                x->error);
    }
}

/* Records which entries the prompt used (the first in_prompt picked). */
static void record_uses(pk_episode *e) {
    pk_episode_examples *x = e->examples;
    long long ids[PK_ARCHIVE_MAX_K];
    for (int i = 0; i < x->in_prompt && i < PK_ARCHIVE_MAX_K; i++)
        ids[i] = x->picked.items[i].id;
    pk_error err;
    if (x->archive && !x->error[0] &&
        pk_archive_record_uses(x->archive, e->id, x->turn, pk_examples_mode_name(x->used), ids,
                               x->in_prompt, &err))
        fprintf(stderr, "pkgym serve: episode %s: recording the examples of turn %d: %s\n", e->id,
                x->turn, err.message);
}

/* The first n picked examples before text; NULL when out of memory. */
static char *with_examples(const pk_episode_examples *x, int n, const char *text) {
    char *block = pk_archive_examples_text(x->picked.items, n, x->spec.scope);
    if (!block)
        return NULL;
    pk_strbuf sb = {0};
    pk_strbuf_puts(&sb, block);
    pk_strbuf_puts(&sb, text);
    free(block);
    return pk_utf8_sanitize_take(pk_strbuf_take(&sb));
}

char *pk_episode_examples_prompt(pk_episode *e, char *base, int turn) {
    pk_episode_examples *x = e->examples;
    if (!x || !base)
        return base;
    if (e->done) { /* nobody answers the prompt after the last turn */
        pk_archive_list_free(&x->picked);
        x->turn = turn;
        x->in_prompt = 0;
        return base;
    }
    pick(e, turn);
    /* Examples go first out of the budget: the prompt without them already fits (the
     * summarizer trimmed its history for it), and they never displace a turn. */
    for (int n = x->picked.n; n > 0; n--) {
        char *full = with_examples(x, n, base);
        if (!full)
            break;
        if (pk_summarizer_within_budget(e->summarizer, full)) {
            x->in_prompt = n;
            free(base);
            record_uses(e);
            return full;
        }
        free(full);
    }
    record_uses(e);
    return base;
}

/* The whole conversation's text, the budget's measure for messages. */
static char *conversation_text(json_t *messages, const char *extra) {
    pk_strbuf sb = {0};
    size_t i;
    json_t *m;
    if (extra)
        pk_strbuf_puts(&sb, extra);
    json_array_foreach(messages, i, m)
        pk_strbuf_puts(&sb, json_string_value(json_object_get(m, "content"))
                                ? json_string_value(json_object_get(m, "content"))
                                : "");
    return pk_strbuf_take(&sb);
}

void pk_episode_examples_messages(pk_episode *e, json_t *messages) {
    pk_episode_examples *x = e->examples;
    json_t *first_user = NULL, *m;
    size_t i;
    json_array_foreach(messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && strcmp(role, "user") == 0) {
            first_user = m;
            break;
        }
    }
    if (!x || x->in_prompt == 0 || !first_user)
        return;
    const char *content = json_string_value(json_object_get(first_user, "content"));
    for (int n = x->in_prompt; n > 0; n--) {
        char *block = pk_archive_examples_text(x->picked.items, n, x->spec.scope);
        char *all = block ? conversation_text(messages, block) : NULL;
        int fits = all && pk_summarizer_within_budget(e->summarizer, all);
        free(all);
        char *joined = fits ? with_examples(x, n, content ? content : "") : NULL;
        free(block);
        if (joined) {
            json_object_set_new(first_user, "content", json_string(joined));
            free(joined);
            return;
        }
    }
}

json_t *pk_episode_examples_info(const pk_episode *e) {
    const pk_episode_examples *x = e->examples;
    if (!x)
        return NULL;
    json_t *entries = json_array();
    for (int i = 0; entries && i < x->in_prompt; i++) {
        const pk_archive_entry *a = &x->picked.items[i];
        json_array_append_new(entries, json_pack("{s:I, s:s, s:f, s:s}", "id", (json_int_t)a->id,
                                                 "problem", a->problem_id, "speedup", a->speedup,
                                                 "kernel_hash", a->kernel_hash));
    }
    return json_pack("{s:i, s:s, s:s, s:i, s:s, s:o, s:i, s:i, s:o}", "k", x->spec.k, "mode",
                     pk_examples_mode_name(x->spec.mode), "scope",
                     pk_examples_scope_name(x->spec.scope), "turn", x->turn, "mode_used",
                     pk_examples_mode_name(x->used), "entries", entries, "retrieved", x->picked.n,
                     "dropped_for_budget", x->picked.n - x->in_prompt, "error",
                     x->error[0] ? json_string(x->error) : json_null());
}
