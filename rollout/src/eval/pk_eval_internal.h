/* `pkgym eval`: shared state of its parts: options (eval_args.c), the embedded server
 * (eval_server.c), policies (eval_policy.c), the episode driver (eval_drive.c), the report
 * (eval_report.c) and the turn-scaling chart (eval_svg.c). */
#ifndef PK_EVAL_INTERNAL_H
#define PK_EVAL_INTERNAL_H

#include <jansson.h>
#include <stdio.h>
#include <sys/types.h>

#include "pk_common.h"

#define PK_EVAL_MAX_K 8
#define PK_EVAL_MAX_SERVE_ARGS 32

typedef struct pk_eval_args {
    const char *server;      /* NULL: embedded */
    const char *problems;    /* "all", "tag:T", "suite:S" or "id,id,..." */
    int trajectories;        /* G */
    int turns;               /* T */
    const char *policy;      /* "replay:DIR" or "cmd:PROGRAM" */
    const char *out_dir;     /* report directory */
    const char *options;     /* JSON object passed to reset as options */
    const char *examples;    /* --examples: reset's options.examples (JSON object); NULL: none */
    int compare_examples;    /* --compare-examples: run without, then with, side by side */
    int concurrency;         /* episodes open at once */
    int policy_jobs;         /* cmd policy processes at once */
    double step_timeout_s;   /* one step's reply */
    double policy_timeout_s; /* one cmd policy call */
    int k[PK_EVAL_MAX_K];
    int n_k;
    long long seed; /* < 0: none */
    int transcript; /* print every step (status, reward, feedback) */
    int quiet;
    const char *serve_args[PK_EVAL_MAX_SERVE_ARGS]; /* extra `pkgym serve` args (embedded) */
    int n_serve_args;
    char run_id[64];      /* --run-id, else generated: eval-<UTC time>-<random hex> */
    const char *group;    /* --group LABEL; each episode's group is LABEL/<problem id>;
                             NULL: the run id */
    const char *data_dir; /* embedded server's --data-dir (kept); NULL: <out>/data */
    double noisy_cv;      /* speedups whose candidate or baseline CV exceeds this are flagged */
} pk_eval_args;

/* Returns 0, 1 for --help (printed), -1 on a bad option (message printed). */
int pk_eval_args_parse(int argc, char **argv, pk_eval_args *a);
void pk_eval_usage(FILE *f);

/* An embedded `pkgym serve` child on an ipc:// endpoint in a temporary directory. */
typedef struct pk_eval_server {
    pid_t pid;
    char dir[256]; /* temporary: the ipc socket only */
    char endpoint[300];
    char data_dir[1024]; /* the trajectory store and caches, kept after the run */
    char log[1024];      /* its output, kept beside the report */
} pk_eval_server;
int pk_eval_server_start(const pk_eval_args *a, pk_eval_server *s, pk_error *err);
/* Non-zero (err says why, with the end of its log) when the child has exited. */
int pk_eval_server_check(pk_eval_server *s, pk_error *err);
void pk_eval_server_stop(pk_eval_server *s);

/* A policy maps an observation to the next action. */
typedef struct pk_eval_policy pk_eval_policy;
typedef struct pk_eval_obs {
    const char *problem;
    int trajectory; /* 1-based */
    int turn;       /* 1-based: the turn the action is for */
    const char *prompt;
    const char *feedback; /* of the previous turn, NULL on turn 1 */
} pk_eval_obs;
int pk_eval_policy_open(const char *spec, double timeout_s, pk_eval_policy **out, pk_error *err);
void pk_eval_policy_close(pk_eval_policy *p);
/* 1 when the policy can act on this problem at all (replay: it has responses for it). */
int pk_eval_policy_covers(const pk_eval_policy *p, const char *problem);
/* 1 for cmd policies, which the driver runs on threads (replay answers at once). */
int pk_eval_policy_is_cmd(const pk_eval_policy *p);
/* The action (malloc'd) in *action, or NULL in *action when the policy has no more turns for
 * this trajectory. Non-zero: the policy failed (err says why). Thread-safe. */
int pk_eval_policy_act(pk_eval_policy *p, const pk_eval_obs *obs, char **action, pk_error *err);

/* Results. */
typedef struct pk_eval_turn {
    int status; /* pk_status */
    double speedup;
    double reward;
    double time_us;           /* the candidate's median; 0 when untimed */
    double roofline_floor_us; /* the problem's rooflines on the server's GPU; 0: none */
    double roofline_no_overlap_us;
    double time_cv, baseline_cv; /* of a timed turn; 0 when unknown */
    int baseline_cached;         /* the baseline came from the server's cache */
    int noisy;                   /* a speedup whose candidate or baseline CV > --noisy-cv */
    char gpu[64]; /* the GPU model it was measured on ("" for host runs and no run) */
    /* info.profile of an episode that asks for profiles (docs/feedback.md, "Profiles"):
     * its status ("" none), cost and raw data (owned JSON text, NULL when none). */
    char profile_status[12];
    double profile_cost_s;
    char *profile_raw;
} pk_eval_turn;

typedef struct pk_eval_traj {
    int problem;    /* index into the problem list */
    int index;      /* 1-based */
    char *episode;  /* the server's episode id */
    char *group;    /* the group it was played in */
    long long seed; /* the seed in effect (reset's info.settings.seed); -1 unknown */
    int n_turns;
    pk_eval_turn *turns; /* capacity: T */
    double *returns;     /* n_turns, from the server when the episode ends; may be NULL */
    char *error;         /* set when the trajectory stopped on an error */
    int infra;           /* it stopped on infra_error (the server's failure): in no figure */
    int policy_ended;    /* the policy had no response for a later turn */
} pk_eval_traj;

typedef struct pk_eval_problem {
    char *id;
    int world_size; /* at which it runs (--options check.world_size, else its default) */
    int skipped;    /* left out: the server cannot run it, or the policy has no responses */
    char *reason;   /* why it was left out */
} pk_eval_problem;

/* The archive examples the prompts carried (reset's and step replies' info.examples). */
typedef struct pk_eval_examples_seen {
    int prompts;               /* prompts of episodes that asked for examples */
    int prompts_with_examples; /* ... that carried at least one */
    long shown;                /* examples in prompts */
    long dropped_for_budget;   /* retrieved, left out to keep the prompt within its budget */
    int errors;                /* prompts whose retrieval failed */
} pk_eval_examples_seen;

typedef struct pk_eval_run {
    const pk_eval_args *args;
    pk_eval_problem *problems;
    int n_problems;
    pk_eval_traj *trajs; /* n_problems * G */
    int n_trajs;
    double wall_s;
    int steps;
    json_t *server_hello; /* the hello reply */
    json_t *server_stats; /* the stats reply at the end */
    char store[1100];     /* the embedded server's trajectory store (kept); "" with --server */
    pk_eval_examples_seen examples;
} pk_eval_run;

/* Waits until the server answers hello (the reply in *hello). */
struct pk_client;
int pk_eval_wait_server(struct pk_client *c, pk_eval_server *embedded, double timeout_s,
                        json_t **hello, pk_error *err);
/* Fills run->problems from the server's list, marking those the policy does not cover. */
int pk_eval_select(struct pk_client *c, const pk_eval_args *a, pk_eval_policy *policy,
                   pk_eval_run *run, pk_error *err);
/* Runs every trajectory of the selected problems. */
int pk_eval_drive(struct pk_client *c, pk_eval_server *embedded, pk_eval_policy *policy,
                  pk_eval_run *run, pk_error *err);
void pk_eval_run_free(pk_eval_run *run);

/* The reset options of args: --options with --examples added as "examples" when with_examples
 * (malloc'd JSON text; NULL with err set when --options is not a JSON object). */
char *pk_eval_reset_options(const pk_eval_args *a, int with_examples, pk_error *err);
/* Reads OUT_DIR/without/report.json and OUT_DIR/with/report.json and writes the two side by
 * side: OUT_DIR/examples_compare.json and .md (printed unless quiet). */
int pk_eval_compare_write(const pk_eval_args *a, pk_error *err);
/* report.json's "examples" (NULL when no episode asked for examples). */
json_t *pk_eval_examples_json(const pk_eval_examples_seen *x);

/* Writes report.json, report.md and turn_scaling.svg into args->out_dir, and prints the
 * Markdown summary to stdout unless quiet. */
int pk_eval_report_write(const pk_eval_run *run, pk_error *err);
/* Problem p's rooflines and its best correct time against them (JSON null when the server
 * reported none), and the Markdown table of all problems that have rooflines (eval_roofline.c). */
json_t *pk_eval_roofline_json(const pk_eval_run *run, int p);
void pk_eval_roofline_markdown(pk_strbuf *md, const pk_eval_run *run);
/* Speedups per GPU model (a turn's speedup is against the baseline of its own model, so a
 * report compares them only within one model): report.json's "gpu_models" and a Markdown
 * section, with a warning when the run used several models. */
json_t *pk_eval_gpu_models_json(const pk_eval_run *run);
void pk_eval_gpu_models_md(const pk_eval_run *run, pk_strbuf *md);
/* best-so-far by turn, one series per problem plus the mean, as an SVG document. */
/* The profiled turns' timelines, OUT/profile-<problem>-<trajectory>-<turn>.svg, and a
 * section of report.md that lists them (nothing when no turn has a profile). */
int pk_eval_profiles_write(const pk_eval_run *run, pk_strbuf *md, pk_error *err);
/* The SVG file name of a profiled turn (k from 0). */
void pk_eval_profile_svg_name(const pk_eval_run *run, int traj, int k, char *out, size_t cap);
char *pk_eval_svg_turn_scaling(const char *title, const char *const *names, const double *series,
                               int n_series, int n_turns);

#endif
