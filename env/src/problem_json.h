/* A problem as the replies show it: its summary (list_problems) and its detail (get_problem,
 * reset's info.problem). */
#ifndef PK_ENV_PROBLEM_JSON_H
#define PK_ENV_PROBLEM_JSON_H

#include <jansson.h>

#include "pk_problems.h"

json_t *pk_problem_summary_json(const pk_problem *p);
/* The summary with the suite and the problem's meta.json. */
json_t *pk_problem_detail_json(const pk_problem *p);

#endif
