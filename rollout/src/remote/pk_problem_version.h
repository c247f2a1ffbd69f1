/* What identifies a problem across machines: its version is the SHA-256 (16 hex digits) of
 * its meta.json and problem.cu, the two files that define what a submission is checked
 * against; the prompt does not enter it. A worker runs a job only when its copy of the
 * problem has the broker's version and its module (pkprob_<suite>_<name>.so) is built. */
#ifndef PK_PROBLEM_VERSION_H
#define PK_PROBLEM_VERSION_H

#include <stddef.h>

#include "pk_problems.h"

#define PK_PROBLEM_VERSION_LEN 16

void pk_problem_version(const pk_problem *p, char out[PK_PROBLEM_VERSION_LEN + 1]);
/* 1 when the problem's module file is present, else 0 and why in reason. */
int pk_problem_module_present(const pk_problem *p, char *reason, size_t cap);

#endif
