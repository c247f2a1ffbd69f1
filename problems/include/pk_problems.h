/* pk_problems: the problem suite (loader) and the kernel harness that measures submissions.
 * The harness API and the evaluation result are in pk_harness.h. */
#ifndef PK_PROBLEMS_H
#define PK_PROBLEMS_H

#include <stddef.h>

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_problem pk_problem;         /* one loaded problem (immutable once loaded) */
typedef struct pk_problem_set pk_problem_set; /* all problems under a root directory */

/* Loads every problems/<suite>/<id>/meta.json under root_dir. A malformed problem is an
 * error naming its file and field. module_dir: where pkprob_<suite>_<id>.so were built. */
int pk_problem_set_load(const char *root_dir, const char *module_dir, pk_problem_set **out,
                        pk_error *err);
void pk_problem_set_free(pk_problem_set *set);
size_t pk_problem_set_count(const pk_problem_set *set);
const pk_problem *pk_problem_set_at(const pk_problem_set *set, size_t i);
const pk_problem *pk_problem_set_find(const pk_problem_set *set, const char *id);

/* Accessors. id is "<suite>/<name>", e.g. "collectives/allreduce". */
const char *pk_problem_id(const pk_problem *p);
const char *pk_problem_title(const pk_problem *p);
const char *pk_problem_category(const pk_problem *p);
const char *pk_problem_suite(const pk_problem *p);
int pk_problem_world_size(const pk_problem *p);
/* 1 when the problem runs at `world` ranks (meta.json world_sizes). */
int pk_problem_world_allowed(const pk_problem *p, int world);
/* ParallelKernelBench's number for a problem ported from it (meta.json "pkb"), else 0. */
int pk_problem_pkb_number(const pk_problem *p);
/* 1 when the problem belongs to `suite`: its id is "<suite>/...", or suite is "pkb" and it is
 * one of PKB's problems wherever it lives (the collectives are PKB 1-8). */
int pk_problem_in_suite(const pk_problem *p, const char *suite);
/* 1 when `world` is the single-GPU diagnostic: world 1 outside the problem's world sizes. It runs
 * only the reference (its numerics and PKB cross-check, no communication), never a candidate. */
int pk_problem_world_is_diagnostic(const pk_problem *p, int world);
/* 1 when a job may run at `world`: an allowed world size, or the diagnostic one for the
 * reference (`reference_only` set). The one rule the job policy, the sizes and the CLI share. */
int pk_problem_world_admitted(const pk_problem *p, int world, int reference_only);
/* Its valid world sizes, ascending as listed: copies up to cap, returns how many there are. */
int pk_problem_world_sizes(const pk_problem *p, int *out, int cap);
int pk_problem_needs_gpu(const pk_problem *p);
size_t pk_problem_tag_count(const pk_problem *p);
const char *pk_problem_tag(const pk_problem *p, size_t i);
int pk_problem_has_tag(const pk_problem *p, const char *tag);
const char *pk_problem_prompt(const pk_problem *p);    /* prompt.md */
const char *pk_problem_meta_json(const pk_problem *p); /* meta.json, as loaded */
const char *pk_problem_dir(const pk_problem *p);
const char *pk_problem_entry(const pk_problem *p); /* entry point name, "solution" */

/* The problems root and module directory used when none is given: those of the installed tree
 * when this executable is an installed pkgym (pk_install.h), else the source and build trees. */
const char *pk_problems_default_dir(void);
const char *pk_problems_default_modules_dir(void);

/* `pkgym check` and `pkgym problems` entry points. */
int pk_cmd_check(int argc, char **argv);
int pk_cmd_problems(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
