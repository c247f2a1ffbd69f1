/* The parts of meta.json that compute problems need beyond arguments and dims: params (scalars
 * passed by value), constraints (e.g. a dim divisible by the world size), dims presets (PKB's
 * base shape), libraries candidates may link, and the reference source shown in the prompt. */
#include "pk_expr.h"
#include "pk_problem_extras.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(const char *file, pk_error *err, const char *field, const char *what) {
    return pk_error_set(err, PK_ERR_INVALID, "%s: field \"%s\": %s", file, field, what);
}

int pk_load_params(const char *file, json_t *root, pk_problem *p, pk_error *err) {
    json_t *params = json_object_get(root, "params");
    if (!params)
        return PK_OK;
    if (!json_is_object(params))
        return bad(file, err, "params", "must be an object of numbers or expressions");
    const char *key;
    json_t *v;
    json_object_foreach(params, key, v) {
        if (p->n_params == PK_MAX_PARAMS)
            return bad(file, err, "params", "too many params");
        pk_param_spec *s = &p->params[p->n_params++];
        if (strlen(key) >= sizeof s->name)
            return bad(file, err, "params", "name too long");
        strcpy(s->name, key);
        if (json_is_number(v))
            s->value = json_number_value(v);
        else if (json_is_string(v) && strlen(json_string_value(v)) < sizeof s->expr &&
                 json_string_value(v)[0])
            strcpy(s->expr, json_string_value(v));
        else
            return bad(file, err, "params", "values are numbers or integer expressions");
    }
    return PK_OK;
}

int pk_load_libraries(const char *file, json_t *root, pk_problem *p, pk_error *err) {
    json_t *libs = json_object_get(root, "libraries");
    size_t i;
    json_t *it;
    if (libs && !json_is_array(libs))
        return bad(file, err, "libraries", "must be an array");
    json_array_foreach(libs, i, it) {
        const char *name = json_string_value(it);
        if (name && strcmp(name, "cublas") == 0)
            p->link_cublas = 1;
        else if (name && strcmp(name, "cufft") == 0)
            p->link_cufft = 1;
        else
            return bad(file, err, "libraries", "known libraries: cublas, cufft");
    }
    return PK_OK;
}

/* "device_api": true offers NCCL's device API: the candidate compiles with -DPK_DEVICE_API=1, so
 * pk_ctx.h includes nccl_device.h and declares ctx->dev_comm, which the runner creates. Off by
 * default: the header costs the compiler more than a second per candidate. */
int pk_load_device_api(const char *file, json_t *root, pk_problem *p, pk_error *err) {
    json_t *v = json_object_get(root, "device_api");
    if (!v)
        return PK_OK;
    if (!json_is_boolean(v))
        return bad(file, err, "device_api", "must be true or false");
    p->device_api = json_is_true(v);
    if (p->device_api && !p->device_gpu)
        return bad(file, err, "device_api", "only \"device\": \"gpu\" problems have NCCL");
    return PK_OK;
}

int pk_load_presets(const char *file, json_t *root, pk_problem *p, pk_error *err) {
    json_t *presets = json_object_get(root, "dims_presets");
    if (!presets)
        return PK_OK;
    if (!json_is_object(presets))
        return bad(file, err, "dims_presets", "must be an object of dims objects");
    const char *key;
    json_t *v;
    json_object_foreach(presets, key, v) {
        if (p->n_presets == 4 || strlen(key) >= sizeof p->preset_names[0] || !json_is_object(v))
            return bad(file, err, "dims_presets", "at most 4 named objects of dims");
        strcpy(p->preset_names[p->n_presets], key);
        p->preset_json[p->n_presets++] = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    return PK_OK;
}

/* The problem's reference source, appended to the prompt under its own heading. */
int pk_append_reference(const char *file, json_t *root, pk_problem *p, pk_error *err) {
    json_t *show = json_object_get(root, "show_reference");
    if (!show || !json_is_true(show))
        return show && !json_is_boolean(show)
                   ? bad(file, err, "show_reference", "must be true or false")
                   : PK_OK;
    char *path = pk_path_join(p->dir, "problem.cu"), *src = NULL;
    int rc = path ? pk_read_file(path, &src, NULL, err) : PK_ERR_NOMEM;
    free(path);
    if (rc)
        return rc;
    const char *head = "\n\n## The reference (the baseline you are timed against)\n\n"
                       "This is the problem module's `reference()`: plain CUDA kernels, cuBLAS "
                       "and host-driven NCCL, one after another. `invoke()` shows how your "
                       "entry point is called.\n\n```cuda\n";
    char *note = NULL;
    rc = pk_reference_library_note(p->dir, src, &note, err);
    if (rc) {
        free(src);
        return rc;
    }
    size_t n = strlen(p->prompt) + strlen(head) + strlen(src) + (note ? strlen(note) : 0) + 8;
    char *prompt = malloc(n);
    if (prompt)
        snprintf(prompt, n, "%s%s%s```\n%s", p->prompt, head, src, note ? note : "");
    free(src);
    free(note);
    if (!prompt)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    free(p->prompt);
    p->prompt = prompt;
    return PK_OK;
}

/* Every constraint at one world size with the current dims. */
static int check_constraints_at(const pk_problem *p, int world, pk_error *err) {
    pk_problem_sizes sz;
    return pk_problem_sizes_at(p, world, &sz, err);
}

int pk_check_constraints(const pk_problem *p, pk_error *err) {
    for (int i = 0; i < p->n_world_sizes; i++)
        if (check_constraints_at(p, p->world_sizes[i], err))
            return PK_ERR_INVALID;
    return PK_OK;
}

int pk_problem_override_dims(pk_problem *p, const char *spec, pk_error *err) {
    json_t *preset = NULL;
    for (int i = 0; i < p->n_presets; i++)
        if (strcmp(p->preset_names[i], spec) == 0)
            preset = json_loads(p->preset_json[i], 0, NULL);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *item = preset ? NULL : strtok_r(buf, ",", &save); item || preset;
         item = preset ? NULL : strtok_r(NULL, ",", &save)) {
        const char *key;
        json_t *v;
        if (preset) {
            json_object_foreach(preset, key, v) {
                char one[160];
                if (json_is_integer(v))
                    snprintf(one, sizeof one, "%s=%lld", key, (long long)json_integer_value(v));
                else
                    snprintf(one, sizeof one, "%s=%s", key,
                             json_is_string(v) ? json_string_value(v) : "?");
                int rc = pk_problem_override_dims(p, one, err);
                if (rc) {
                    json_decref(preset);
                    return rc;
                }
            }
            json_decref(preset);
            preset = NULL;
            break;
        }
        char *eq = strchr(item, '=');
        int found = 0;
        if (eq) {
            *eq = 0;
            for (int d = 0; d < p->n_dims; d++)
                if (strcmp(p->dim_names[d], item) == 0 && strlen(eq + 1) < sizeof p->dim_exprs[d]) {
                    strcpy(p->dim_exprs[d], eq + 1);
                    found = 1;
                }
        }
        if (!found)
            return pk_error_set(err, PK_ERR_INVALID,
                                "%s: --dims \"%s\": expected NAME=VALUE with NAME one of the "
                                "problem's dims, or a preset name",
                                p->id, eq ? item : spec);
    }
    return pk_check_constraints(p, err);
}

int pk_problem_params_at(const pk_problem *p, const pk_problem_sizes *sz, long long key,
                         double *out, pk_error *err) {
    const char *names[PK_MAX_DIMS + 2] = {"world", "trial"};
    long long vals[PK_MAX_DIMS + 2] = {sz->world, key};
    int n = 2;
    for (int i = 0; i < p->n_dims; i++) {
        names[n] = p->dim_names[i];
        vals[n++] = sz->dims[i];
    }
    for (int i = 0; i < p->n_params; i++) {
        long long v = 0;
        if (!p->params[i].expr[0]) {
            out[i] = p->params[i].value;
            continue;
        }
        if (pk_expr_eval(p->params[i].expr, names, vals, n, &v, err))
            return PK_ERR_INVALID;
        out[i] = (double)v;
    }
    return PK_OK;
}
