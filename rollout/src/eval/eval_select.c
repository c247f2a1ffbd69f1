/* Connects to the server (waiting for it to answer) and selects the problems to evaluate. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pk_client.h"
#include "pk_eval_internal.h"

int pk_eval_wait_server(pk_client *c, pk_eval_server *embedded, double timeout_s, json_t **hello,
                        pk_error *err) {
    double deadline = pk_now_ms() + timeout_s * 1000.0;
    for (;;) {
        json_t *req = json_pack("{s:s}", "op", "hello");
        json_t *reply = NULL;
        int rc = req ? pk_client_call(c, req, 500, &reply, err) : PK_ERR_NOMEM;
        json_decref(req);
        if (rc == PK_OK) {
            if (json_is_true(json_object_get(reply, "ok"))) {
                *hello = reply;
                return PK_OK;
            }
            json_decref(reply);
            return pk_error_set(err, PK_ERR_IO, "the server refused hello");
        }
        if (rc != PK_ERR_TIMEOUT)
            return rc;
        if (embedded && (rc = pk_eval_server_check(embedded, err)))
            return rc;
        if (pk_now_ms() > deadline)
            return pk_error_set(err, PK_ERR_TIMEOUT, "no server answered within %.0f s", timeout_s);
    }
}

static int has_tag(json_t *problem, const char *tag) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(problem, "tags"), i, t) {
        if (json_is_string(t) && strcmp(json_string_value(t), tag) == 0)
            return 1;
    }
    return 0;
}

static int in_list(const char *list, const char *id) {
    size_t n = strlen(id);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, id, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static int selected(const char *sel, json_t *problem, const char *id) {
    if (strcmp(sel, "all") == 0)
        return 1;
    if (strncmp(sel, "tag:", 4) == 0)
        return has_tag(problem, sel + 4);
    if (strncmp(sel, "suite:", 6) == 0) {
        size_t n = strlen(sel + 6);
        return strncmp(id, sel + 6, n) == 0 && id[n] == '/';
    }
    return in_list(sel, id);
}

/* Every id named in a list must exist on the server. */
static int check_list(const char *sel, json_t *problems, pk_error *err) {
    if (strcmp(sel, "all") == 0 || strncmp(sel, "tag:", 4) == 0 || strncmp(sel, "suite:", 6) == 0)
        return PK_OK;
    for (const char *p = sel; *p;) {
        size_t len = strcspn(p, ",");
        int found = 0;
        size_t i;
        json_t *pr;
        json_array_foreach(problems, i, pr) {
            const char *id = json_string_value(json_object_get(pr, "id"));
            found |= id && strlen(id) == len && strncmp(id, p, len) == 0;
        }
        if (!found && len > 0)
            return pk_error_set(err, PK_ERR_NOT_FOUND, "the server has no problem '%.*s'", (int)len,
                                p);
        p += len + (p[len] == ',');
    }
    return PK_OK;
}

int pk_eval_select(pk_client *c, const pk_eval_args *a, pk_eval_policy *policy, pk_eval_run *run,
                   pk_error *err) {
    json_t *req = json_pack("{s:s}", "op", "list_problems"), *reply = NULL;
    int rc = req ? pk_client_call(c, req, 30000, &reply, err) : PK_ERR_NOMEM;
    json_decref(req);
    if (rc)
        return rc;
    json_t *list = json_object_get(reply, "problems");
    if (!json_is_array(list)) {
        json_decref(reply);
        return pk_error_set(err, PK_ERR_IO, "list_problems: no problem list in the reply");
    }
    rc = check_list(a->problems, list, err);
    run->problems = rc ? NULL : calloc(json_array_size(list) + 1, sizeof *run->problems);
    if (!rc && !run->problems)
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *pr;
    json_array_foreach(list, i, pr) {
        const char *id = json_string_value(json_object_get(pr, "id"));
        if (rc || !id || !selected(a->problems, pr, id))
            continue;
        pk_eval_problem *ep = &run->problems[run->n_problems++];
        ep->id = strdup(id);
        ep->world_size = (int)json_integer_value(json_object_get(pr, "world_size"));
        ep->skipped = !pk_eval_policy_covers(policy, id);
        if (!ep->id)
            rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        else if (ep->skipped && !a->quiet)
            fprintf(stderr, "pkgym eval: the policy has no responses for %s: skipped\n", id);
    }
    json_decref(reply);
    if (rc)
        return rc;
    int active = 0;
    for (int k = 0; k < run->n_problems; k++)
        active += !run->problems[k].skipped;
    if (active == 0)
        return pk_error_set(err, PK_ERR_NOT_FOUND,
                            "no problem selected by '%s' has responses in the policy", a->problems);
    return PK_OK;
}
