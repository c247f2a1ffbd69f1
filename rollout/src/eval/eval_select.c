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
        /* suite:pkb is PKB's problems wherever they live (the collectives are its 1-8), as
         * pk_problem_in_suite: the server lists their number as "pkb". */
        if (strcmp(sel + 6, "pkb") == 0 && json_integer_value(json_object_get(problem, "pkb")) > 0)
            return 1;
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

/* GPUs the server evaluates on: hello.gpu_slots (hello.gpus on servers that predate it). */
static int server_gpu_slots(json_t *hello) {
    json_t *slots = json_object_get(hello, "gpu_slots");
    if (json_is_integer(slots))
        return (int)json_integer_value(slots);
    return (int)json_array_size(json_object_get(hello, "gpus"));
}

/* options.check.world_size of --options, or 0. */
static int options_world_size(const char *options) {
    json_t *o = options ? json_loads(options, 0, NULL) : NULL;
    json_t *w = json_object_get(json_object_get(o, "check"), "world_size");
    int world = json_is_integer(w) ? (int)json_integer_value(w) : 0;
    json_decref(o);
    return world;
}

static char *reason_text(const char *fmt, int a, int b) {
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, b);
    return strdup(buf);
}

/* Whether the server can run pr at all, else why not (malloc'd). */
/* gpu_slots < 0: a broker, whose workers (which may connect later) decide. */
static char *cannot_run(json_t *pr, int world, int gpu_slots) {
    if (!json_is_true(json_object_get(pr, "needs_gpu")) || gpu_slots < 0 || world <= gpu_slots)
        return NULL;
    return reason_text("needs %d GPUs; the server has %d", world, gpu_slots);
}

int pk_eval_select(pk_client *c, const pk_eval_args *a, pk_eval_policy *policy, pk_eval_run *run,
                   pk_error *err) {
    int gpu_slots = server_gpu_slots(run->server_hello);
    int forced_world = options_world_size(a->options);
    int n_uncovered = 0, n_gpu_short = 0;
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
        ep->world_size = forced_world > 0
                             ? forced_world
                             : (int)json_integer_value(json_object_get(pr, "world_size"));
        ep->reason = cannot_run(pr, ep->world_size, gpu_slots);
        n_gpu_short += ep->reason != NULL;
        if (!ep->reason && !pk_eval_policy_covers(policy, id)) {
            ep->reason = strdup(pk_eval_policy_is_cmd(policy)
                                    ? "the policy has no responses for it"
                                    : "the replay directory has no responses for it");
            n_uncovered++;
        }
        ep->skipped = ep->reason != NULL;
        if (!ep->id)
            rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        else if (ep->skipped && !a->quiet)
            fprintf(stderr, "pkgym eval: %s left out: %s\n", id, ep->reason);
    }
    json_decref(reply);
    if (rc)
        return rc;
    int active = 0;
    for (int k = 0; k < run->n_problems; k++)
        active += !run->problems[k].skipped;
    /* The shipped replay responses cover the selftests; those of the collectives are made from
     * their solutions by a script. */
    const char *hint = n_uncovered && !pk_eval_policy_is_cmd(policy)
                           ? " (rollout/replay/make-collectives.sh OUT writes replay responses "
                             "for the collectives from their solutions; then --policy replay:OUT)"
                           : "";
    if (n_uncovered && *hint && !a->quiet && active > 0)
        fprintf(stderr, "pkgym eval: %d problem(s) without replay responses%s\n", n_uncovered,
                hint);
    if (active == 0)
        return pk_error_set(err, PK_ERR_NOT_FOUND,
                            "no problem selected by '%s' can be evaluated: %d need more GPUs than "
                            "the server has (%d), %d have no responses in the policy%s",
                            a->problems, n_gpu_short, gpu_slots, n_uncovered, hint);
    if (n_gpu_short && !a->quiet)
        fprintf(stderr,
                "pkgym eval: %d problem(s) left out: they need more GPUs than the server has "
                "(%d)\n",
                n_gpu_short, gpu_slots);
    return PK_OK;
}
