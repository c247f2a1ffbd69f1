/* An entry as one JSON line (`pkgym archive export` and `import`, docs/archive.md). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "archive_internal.h"

static json_t *text_or_null(const char *s) {
    return s ? json_string(s) : json_null();
}

static json_t *tags_json(const char *tags) {
    json_t *a = json_array();
    char *copy = tags ? strdup(tags) : NULL;
    for (char *save = NULL, *t = copy ? strtok_r(copy, " ", &save) : NULL; a && t;
         t = strtok_r(NULL, " ", &save))
        json_array_append_new(a, json_string(t));
    free(copy);
    return a;
}

char *pk_archive_entry_to_json(const pk_archive_entry *e, const pk_archive_problem *p) {
    json_t *dims = e->dims_json ? json_loads(e->dims_json, 0, NULL) : NULL;
    json_t *j = json_pack(
        "{s:I, s:s, s:s, s:i, s:o, s:s, s:o, s:f, s:f, s:o, s:f, s:o}", "id", (json_int_t)e->id,
        "problem_id", e->problem_id, "kernel_hash", e->kernel_hash, "world_size", e->world_size,
        "dims", dims ? dims : json_null(), "code", e->code, "plan", text_or_null(e->plan),
        "speedup", e->speedup, "roofline_share", e->roofline_share, "hardware",
        text_or_null(e->hardware), "created_at", e->created_at, "source", text_or_null(e->source));
    if (j && p)
        json_object_set_new(j, "problem",
                            json_pack("{s:o, s:o, s:o, s:o}", "title", text_or_null(p->title),
                                      "category", text_or_null(p->category), "tags",
                                      tags_json(p->tags), "prompt", text_or_null(p->prompt)));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

/* A string field, or NULL when absent or null; -1 when it is something else. */
static int opt_string(const json_t *o, const char *key, const char **out) {
    json_t *v = json_object_get(o, key);
    *out = json_string_value(v);
    return !v || json_is_null(v) || json_is_string(v) ? 0 : -1;
}

static int opt_number(const json_t *o, const char *key, double *out) {
    json_t *v = json_object_get(o, key);
    *out = json_is_number(v) ? json_number_value(v) : 0;
    return !v || json_is_null(v) || json_is_number(v) ? 0 : -1;
}

/* The problem text of a line: tags as a space-separated string in *tags (malloc'd). */
static int problem_of(const json_t *line, const char *id, pk_archive_problem *p, char **tags,
                      int *given, pk_error *err) {
    json_t *o = json_object_get(line, "problem");
    *tags = NULL;
    *given = o && !json_is_null(o);
    if (!*given)
        return PK_OK; /* none: the archive must know the problem */
    if (!json_is_object(o) || opt_string(o, "title", &p->title) ||
        opt_string(o, "category", &p->category) || opt_string(o, "prompt", &p->prompt))
        return pk_error_set(err, PK_ERR_INVALID,
                            "'problem' must be an object of strings title, category, prompt "
                            "and an array of strings tags");
    pk_strbuf sb = {0};
    json_t *t = json_object_get(o, "tags"), *v;
    size_t i;
    if (t && !json_is_array(t) && !json_is_null(t))
        return pk_error_set(err, PK_ERR_INVALID, "'problem.tags' must be an array of strings");
    json_array_foreach(t, i, v) {
        if (!json_is_string(v)) {
            pk_strbuf_free(&sb);
            return pk_error_set(err, PK_ERR_INVALID, "'problem.tags' must be an array of strings");
        }
        pk_strbuf_printf(&sb, "%s%s", i ? " " : "", json_string_value(v));
    }
    *tags = pk_strbuf_take(&sb);
    p->id = id;
    p->tags = *tags;
    return 0;
}

int pk_archive_import_json(pk_archive *a, const char *text, long long *id, int *added,
                           pk_error *err) {
    json_error_t je;
    json_t *line = json_loads(text, 0, &je);
    if (!json_is_object(line)) {
        json_decref(line);
        return pk_error_set(err, PK_ERR_INVALID, "not a JSON object%s%s", line ? "" : ": ",
                            line ? "" : je.text);
    }
    pk_archive_entry e;
    memset(&e, 0, sizeof e);
    json_t *ws = json_object_get(line, "world_size"), *dims = json_object_get(line, "dims");
    char *dims_text = json_is_object(dims) ? json_dumps(dims, JSON_COMPACT) : NULL;
    int rc = PK_OK;
    if (opt_string(line, "problem_id", &e.problem_id) || opt_string(line, "code", &e.code) ||
        opt_string(line, "plan", &e.plan) || opt_string(line, "hardware", &e.hardware) ||
        opt_string(line, "source", &e.source) || opt_number(line, "speedup", &e.speedup) ||
        opt_number(line, "roofline_share", &e.roofline_share) ||
        opt_number(line, "created_at", &e.created_at) || !json_is_integer(ws) ||
        (dims && !json_is_null(dims) && !json_is_object(dims)))
        rc = pk_error_set(err, PK_ERR_INVALID,
                          "want problem_id, code (strings), world_size (an integer), dims (an "
                          "object), plan, hardware, source (strings), speedup, roofline_share, "
                          "created_at (numbers)");
    e.world_size = json_is_integer(ws) ? (int)json_integer_value(ws) : 0;
    e.dims_json = dims_text;
    pk_archive_problem p;
    memset(&p, 0, sizeof p);
    char *tags = NULL;
    int given = 0;
    if (!rc)
        rc = problem_of(line, e.problem_id, &p, &tags, &given, err);
    if (!rc)
        rc = pk_archive_add(a, given ? &p : NULL, &e, id, added, err);
    free(tags);
    free(dims_text);
    json_decref(line);
    return rc;
}
