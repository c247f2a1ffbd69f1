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

/* One evaluation and its report; the exit status it earns. top: the command's own arguments
 * (the server, the store). */
static int run_arm(const pk_eval_args *a, pk_eval_policy *policy, pk_eval_server *embedded,
                   const pk_eval_args *top) {
    pk_error err;
    pk_error_clear(&err);
    pk_eval_run run;
    memset(&run, 0, sizeof run);
    run.args = a;
    if (!top->server)
        snprintf(run.store, sizeof run.store, "%s/trajectories.sqlite", embedded->data_dir);
    int rc = evaluate(a, policy, top->server ? NULL : embedded,
                      top->server ? top->server : embedded->endpoint, &run, &err);
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
    return exit_code;
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
    int exit_code = 0;
    if (rc) {
        fprintf(stderr, "pkgym eval: %s\n", err.message);
        exit_code = PK_EVAL_EXIT_USAGE;
    } else if (!a.compare_examples) {
        exit_code = run_arm(&a, policy, &embedded, &a);
    } else {
        /* The same evaluation without, then with, the examples, on the one server (and archive):
         * reports in OUT/without and OUT/with, then side by side. */
        char dirs[2][1100];
        pk_eval_args arms[2] = {a, a};
        const char *names[2] = {"without", "with"};
        for (int i = 0; i < 2 && exit_code != PK_EVAL_EXIT_USAGE; i++) {
            snprintf(dirs[i], sizeof dirs[i], "%s/%s", a.out_dir, names[i]);
            arms[i].out_dir = dirs[i];
            arms[i].examples = i ? a.examples : NULL;
            snprintf(arms[i].run_id, sizeof arms[i].run_id, "%.50s-%s", a.run_id, names[i]);
            if (!a.quiet)
                fprintf(stderr, "pkgym eval: arm %s examples (run %s)\n", names[i], arms[i].run_id);
            int arm_exit = run_arm(&arms[i], policy, &embedded, &a);
            exit_code = arm_exit > exit_code ? arm_exit : exit_code;
        }
        if (exit_code != PK_EVAL_EXIT_USAGE && pk_eval_compare_write(&a, &err)) {
            fprintf(stderr, "pkgym eval: %s\n", err.message);
            exit_code = PK_EVAL_EXIT_USAGE;
        }
    }
    if (!a.server)
        pk_eval_server_stop(&embedded);
    pk_eval_policy_close(policy);
    return exit_code;
}
