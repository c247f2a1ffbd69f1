/* `pkgym eval`: scripted multi-turn evaluation against a running or an embedded server. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/pk_eval_internal.h"
#include "pk_client.h"
#include "pk_rollout.h"

#define PK_EVAL_EXIT_ERRORS 3
#define PK_EVAL_EXIT_USAGE 2

static void fetch_stats(pk_client *c, pk_eval_run *run) {
    json_t *req = json_pack("{s:s}", "op", "stats"), *reply = NULL;
    pk_error err;
    if (req && pk_client_call(c, req, 10000, &reply, &err) == PK_OK)
        run->server_stats = reply;
    json_decref(req);
}

static int evaluate(const pk_eval_args *a, pk_eval_policy *policy, pk_eval_server *embedded,
                    const char *endpoint, pk_eval_run *run, pk_error *err) {
    pk_client *c = NULL;
    int rc = pk_client_connect(endpoint, &c, err);
    if (!rc)
        rc = pk_eval_wait_server(c, embedded, embedded ? 120 : 15, &run->server_hello, err);
    if (!rc)
        rc = pk_eval_select(c, a, policy, run, err);
    if (!rc && !a->quiet)
        fprintf(stderr, "pkgym eval: %s, %d trajectories x %d turns per problem, policy %s\n",
                endpoint, a->trajectories, a->turns, a->policy);
    if (!rc)
        rc = pk_eval_drive(c, embedded, policy, run, err);
    if (!rc)
        fetch_stats(c, run);
    pk_client_close(c);
    return rc;
}

int pk_cmd_eval(int argc, char **argv) {
    pk_eval_args a;
    int parsed = pk_eval_args_parse(argc, argv, &a);
    if (parsed)
        return parsed > 0 ? 0 : PK_EVAL_EXIT_USAGE;
    signal(SIGPIPE, SIG_IGN); /* a cmd policy that exits early must not kill eval */
    pk_error err;
    pk_error_clear(&err);
    pk_eval_policy *policy = NULL;
    if (pk_eval_policy_open(a.policy, a.policy_timeout_s, &policy, &err)) {
        fprintf(stderr, "pkgym eval: %s\n", err.message);
        return PK_EVAL_EXIT_USAGE;
    }
    pk_eval_server embedded;
    memset(&embedded, 0, sizeof embedded);
    int rc = PK_OK;
    if (!a.server) {
        rc = pk_eval_server_start(&a, &embedded, &err);
        if (!rc && !a.quiet)
            fprintf(stderr,
                    "pkgym eval: run %s; started an embedded server (log: %s; trajectory store, "
                    "kept: %s/trajectories.sqlite)\n",
                    a.run_id, embedded.log, embedded.data_dir);
    } else if (!a.quiet) {
        fprintf(stderr, "pkgym eval: run %s; the trajectories go to the store of %s\n", a.run_id,
                a.server);
    }
    pk_eval_run run;
    memset(&run, 0, sizeof run);
    run.args = &a;
    if (!a.server && !rc)
        snprintf(run.store, sizeof run.store, "%s/trajectories.sqlite", embedded.data_dir);
    if (!rc)
        rc = evaluate(&a, policy, a.server ? NULL : &embedded,
                      a.server ? a.server : embedded.endpoint, &run, &err);
    if (!a.server)
        pk_eval_server_stop(&embedded);
    int errors = 0;
    for (int i = 0; i < run.n_trajs; i++)
        errors += run.trajs[i].error != NULL;
    if (!rc)
        rc = pk_eval_report_write(&run, &err);
    int exit_code = 0;
    if (rc) {
        fprintf(stderr, "pkgym eval: %s\n", err.message);
        exit_code = PK_EVAL_EXIT_USAGE;
    } else if (errors) {
        fprintf(stderr, "pkgym eval: %d of %d trajectories stopped on an error\n", errors,
                run.n_trajs);
        exit_code = PK_EVAL_EXIT_ERRORS;
    }
    pk_eval_run_free(&run);
    pk_eval_policy_close(policy);
    return exit_code;
}
