/* Internal to the loader: the meta.json fields of problem_extras.c. */
#ifndef PK_PROBLEM_EXTRAS_H
#define PK_PROBLEM_EXTRAS_H

#include <jansson.h>

#include "pk_problem_spec.h"

int pk_load_params(const char *file, json_t *root, pk_problem *p, pk_error *err);
int pk_load_libraries(const char *file, json_t *root, pk_problem *p, pk_error *err);
int pk_load_device_api(const char *file, json_t *root, pk_problem *p, pk_error *err);
int pk_load_presets(const char *file, json_t *root, pk_problem *p, pk_error *err);
int pk_append_reference(const char *file, json_t *root, pk_problem *p, pk_error *err);
/* A list of the reference library headers `src` (a problem.cu) includes, with their size and
 * purpose, for the prompt; NULL when it includes none (reference_library.c). */
int pk_reference_library_note(const char *problem_dir, const char *src, char **note, pk_error *err);
/* The constraints at every allowed world size with the current dims. */
int pk_check_constraints(const pk_problem *p, pk_error *err);

#endif
