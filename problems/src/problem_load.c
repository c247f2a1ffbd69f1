/* Reads problems/<suite>/<id>/meta.json (jansson) and prompt.md into a pk_problem. */
#include "pk_harness.h" /* PK_EVAL_MAX_TRIALS */
#include "pk_problem_extras.h"
#include "pk_problem_spec.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct loader {
    const char *file;
    pk_error *err;
} loader;

static int bad(loader *ld, const char *field, const char *what) {
    return pk_error_set(ld->err, PK_ERR_INVALID, "%s: field \"%s\": %s", ld->file, field, what);
}

static int get_string(loader *ld, json_t *o, const char *key, int required, char **out,
                      const char *def) {
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required)
            return bad(ld, key, "missing");
        *out = def ? strdup(def) : NULL;
        return PK_OK;
    }
    if (!json_is_string(v))
        return bad(ld, key, "must be a string");
    *out = strdup(json_string_value(v));
    return *out ? PK_OK : pk_error_set(ld->err, PK_ERR_NOMEM, "out of memory");
}

static int copy_string(loader *ld, json_t *o, const char *key, char *dst, size_t cap,
                       int required) {
    json_t *v = json_object_get(o, key);
    if (!v) {
        dst[0] = 0;
        return required ? bad(ld, key, "missing") : PK_OK;
    }
    if (!json_is_string(v))
        return bad(ld, key, "must be a string");
    if (strlen(json_string_value(v)) >= cap)
        return bad(ld, key, "too long");
    strcpy(dst, json_string_value(v));
    return PK_OK;
}

/* An expression field: a JSON integer or a string expression. */
static int copy_expr(loader *ld, json_t *o, const char *key, char *dst, size_t cap) {
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) {
        snprintf(dst, cap, "%lld", (long long)json_integer_value(v));
        return PK_OK;
    }
    return copy_string(ld, o, key, dst, cap, 0);
}

static int get_int(loader *ld, json_t *o, const char *key, long long def, long long lo,
                   long long hi, long long *out) {
    json_t *v = json_object_get(o, key);
    if (!v) {
        *out = def;
        return PK_OK;
    }
    if (!json_is_integer(v))
        return bad(ld, key, "must be an integer");
    *out = json_integer_value(v);
    if (*out < lo || *out > hi)
        return bad(ld, key, "out of range");
    return PK_OK;
}

static int get_list(loader *ld, json_t *o, const char *key, pk_string_list *out) {
    json_t *v = json_object_get(o, key);
    out->n = 0;
    if (!v)
        return PK_OK;
    if (!json_is_array(v))
        return bad(ld, key, "must be an array of strings");
    if (json_array_size(v) > PK_SPEC_MAX_LIST)
        return bad(ld, key, "too many entries");
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it) {
        if (!json_is_string(it))
            return bad(ld, key, "must be an array of strings");
        out->items[out->n++] = strdup(json_string_value(it));
    }
    return PK_OK;
}

/* Reads a "tolerance": {"atol": x, "rtol": y} object into atol/rtol (left alone if absent). */
static int load_tolerance(loader *ld, json_t *o, const char *field, double *atol, double *rtol) {
    json_t *tol = json_object_get(o, "tolerance");
    if (!tol)
        return PK_OK;
    json_t *a = json_object_get(tol, "atol"), *r = json_object_get(tol, "rtol");
    if (!json_is_number(a) || !json_is_number(r) || json_number_value(a) < 0 ||
        json_number_value(r) < 0)
        return bad(ld, field, "needs non-negative numbers atol and rtol");
    *atol = json_number_value(a);
    *rtol = json_number_value(r);
    return PK_OK;
}

/* "checker": "allclose" (default), "exact", "custom", or {"budget": share, "max_ulp": n}. */
static int load_checker(loader *ld, json_t *a, pk_arg_spec *s) {
    json_t *c = json_object_get(a, "checker"), *rms = json_object_get(a, "atol_rms");
    s->checker = PK_CHECKER_ALLCLOSE;
    if (rms && (!json_is_number(rms) || json_number_value(rms) < 0))
        return bad(ld, "args.atol_rms", "must be a non-negative number");
    s->atol_rms = rms ? json_number_value(rms) : 0;
    if (!c)
        return PK_OK;
    if (json_is_object(c)) {
        json_t *b = json_object_get(c, "budget"), *u = json_object_get(c, "max_ulp");
        if (!json_is_number(b) || json_number_value(b) < 0 || json_number_value(b) > 0.5 ||
            (u && (!json_is_integer(u) || json_integer_value(u) < 0)))
            return bad(ld, "args.checker", "budget needs a share in [0, 0.5] and max_ulp >= 0");
        s->checker = PK_CHECKER_BUDGET;
        s->budget = json_number_value(b);
        s->max_ulp = u ? (int)json_integer_value(u) : 1;
        return PK_OK;
    }
    const char *name = json_string_value(c);
    if (name && strcmp(name, "allclose") == 0)
        s->checker = PK_CHECKER_ALLCLOSE;
    else if (name && strcmp(name, "exact") == 0)
        s->checker = PK_CHECKER_EXACT;
    else if (name && strcmp(name, "custom") == 0)
        s->checker = PK_CHECKER_CUSTOM;
    else
        return bad(ld, "args.checker",
                   "allclose, exact, custom, or {\"budget\": share, \"max_ulp\": n}");
    return PK_OK;
}

/* "regimes": ["iid", "rank", ...] (floating generators only; default: pk_gen_parse's) and
 * "row": elements per row, an expression (default: the whole count). */
static int load_regimes(loader *ld, json_t *a, pk_gen_spec *g) {
    json_t *v = json_object_get(a, "regimes");
    if (copy_expr(ld, a, "row", g->row, sizeof g->row))
        return PK_ERR_INVALID;
    if (!v)
        return PK_OK;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return bad(ld, "args.regimes", "must be a non-empty array of regime names");
    unsigned set = 0;
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it) {
        int r = json_is_string(it) ? pk_regime_from_name(json_string_value(it)) : -1;
        if (r < 0)
            return bad(ld, "args.regimes", "names are iid, rank, row, heavy, peaked and cancel");
        set |= 1u << r;
    }
    if (set != (1u << PK_REGIME_IID) && g->kind != PK_GEN_NORMAL && g->kind != PK_GEN_UNIFORM)
        return bad(ld, "args.regimes", "lattice, int and index generators keep their values: iid");
    g->regimes = set;
    return PK_OK;
}

/* An argument's generator (inputs), tolerance and checker (outputs). */
static int load_arg_extras(loader *ld, json_t *a, pk_arg_spec *s) {
    char gen[160];
    s->atol = s->rtol = -1;
    json_t *nr = json_object_get(a, "norm_rtol");
    if (nr && (!json_is_number(nr) || json_number_value(nr) < 0))
        return bad(ld, "args.norm_rtol", "must be a non-negative number");
    s->norm_rtol = nr ? json_number_value(nr) : -1;
    if (copy_string(ld, a, "gen", gen, sizeof gen, 0) ||
        load_tolerance(ld, a, "args.tolerance", &s->atol, &s->rtol) || load_checker(ld, a, s))
        return PK_ERR_INVALID;
    char scope[16];
    if (copy_string(ld, a, "scope", scope, sizeof scope, 0))
        return PK_ERR_INVALID;
    pk_error e;
    if (!gen[0])
        pk_gen_default(s->dtype, &s->gen);
    else if (pk_gen_parse(gen, s->dtype, &s->gen, &e))
        return bad(ld, "args.gen", e.message);
    if (!scope[0] || strcmp(scope, "rank") == 0)
        s->gen.scope = PK_GEN_PER_RANK;
    else if (strcmp(scope, "replicated") == 0)
        s->gen.scope = PK_GEN_REPLICATED;
    else if (strcmp(scope, "sharded") == 0)
        s->gen.scope = PK_GEN_SHARDED;
    else
        return bad(ld, "args.scope", "must be rank, replicated or sharded");
    return load_regimes(ld, a, &s->gen);
}

static int load_args(loader *ld, json_t *root, pk_problem *p) {
    json_t *args = json_object_get(root, "args");
    if (!json_is_array(args) || json_array_size(args) == 0)
        return bad(ld, "args", "must be a non-empty array");
    if (json_array_size(args) > PK_MAX_ARGS)
        return bad(ld, "args", "too many arguments");
    size_t i;
    json_t *a;
    json_array_foreach(args, i, a) {
        pk_arg_spec *s = &p->args[p->n_args++];
        char dtype[16], role[16], check[16];
        if (!json_is_object(a))
            return bad(ld, "args", "entries must be objects");
        if (copy_string(ld, a, "name", s->name, sizeof s->name, 1) ||
            copy_string(ld, a, "dtype", dtype, sizeof dtype, 1) ||
            copy_string(ld, a, "role", role, sizeof role, 1) ||
            copy_expr(ld, a, "count", s->count, sizeof s->count) ||
            copy_string(ld, a, "check", check, sizeof check, 0))
            return PK_ERR_INVALID;
        int t = pk_dtype_from_name(dtype);
        if (t < 0)
            return bad(ld, "args.dtype",
                       "unknown dtype (bf16, f16, f32, f64, i32, i64, f8e4m3, i8, u8)");
        s->dtype = (pk_dtype)t;
        if (strcmp(role, "input") == 0)
            s->role = PK_ARG_INPUT;
        else if (strcmp(role, "output") == 0)
            s->role = PK_ARG_OUTPUT;
        else if (strcmp(role, "inout") == 0)
            s->role = PK_ARG_INOUT;
        else
            return bad(ld, "args.role", "must be input, output or inout");
        if (!s->count[0])
            return bad(ld, "args.count", "missing");
        if (load_arg_extras(ld, a, s))
            return PK_ERR_INVALID;
        if (!check[0] || strcmp(check, "all") == 0)
            s->check = s->role == PK_ARG_INPUT ? PK_CHECK_NONE : PK_CHECK_ALL;
        else if (strcmp(check, "root") == 0)
            s->check = PK_CHECK_ROOT;
        else if (strcmp(check, "none") == 0)
            s->check = PK_CHECK_NONE;
        else
            return bad(ld, "args.check", "must be all, root or none");
    }
    return PK_OK;
}

static int load_dims(loader *ld, json_t *root, pk_problem *p) {
    json_t *dims = json_object_get(root, "dims");
    if (!dims)
        return PK_OK;
    if (!json_is_object(dims))
        return bad(ld, "dims", "must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(dims, key, v) {
        if (p->n_dims == PK_MAX_DIMS)
            return bad(ld, "dims", "too many dims");
        if (strlen(key) >= sizeof p->dim_names[0] || strcmp(key, "world") == 0)
            return bad(ld, "dims", "bad dim name");
        strcpy(p->dim_names[p->n_dims], key);
        if (json_is_integer(v))
            snprintf(p->dim_exprs[p->n_dims], sizeof p->dim_exprs[0], "%lld",
                     (long long)json_integer_value(v));
        else if (json_is_string(v) && strlen(json_string_value(v)) < sizeof p->dim_exprs[0])
            strcpy(p->dim_exprs[p->n_dims], json_string_value(v));
        else
            return bad(ld, "dims", "values must be integers or expressions");
        p->n_dims++;
    }
    return PK_OK;
}

static int load_roofline(loader *ld, json_t *root, pk_problem *p) {
    json_t *phases = json_object_get(json_object_get(root, "roofline"), "phases");
    if (!phases)
        return PK_OK;
    if (!json_is_array(phases) || json_array_size(phases) > PK_SPEC_MAX_PHASES)
        return bad(ld, "roofline.phases", "must be an array (at most 8)");
    size_t i;
    json_t *ph;
    json_array_foreach(phases, i, ph) {
        pk_phase_spec *s = &p->phases[p->n_phases++];
        char dtype[16];
        if (!json_is_object(ph))
            return bad(ld, "roofline.phases", "entries must be objects");
        if (copy_string(ld, ph, "name", s->name, sizeof s->name, 0) ||
            copy_expr(ld, ph, "flops", s->flops, sizeof s->flops) ||
            copy_expr(ld, ph, "hbm_bytes", s->hbm_bytes, sizeof s->hbm_bytes) ||
            copy_expr(ld, ph, "nvlink_bytes", s->nvlink_bytes, sizeof s->nvlink_bytes) ||
            copy_string(ld, ph, "dtype", dtype, sizeof dtype, 0))
            return PK_ERR_INVALID;
        int m = dtype[0] ? pk_math_dtype_from_name(dtype) : PK_MATH_BF16;
        if (m < 0)
            return bad(ld, "roofline.phases.dtype",
                       "unknown math dtype (bf16, fp16, fp8, tf32, fp32)");
        s->math = (pk_math_dtype)m;
    }
    return PK_OK;
}

/* "pkb": {"number": N, "reference": "N_name.py"}: the problem is ParallelKernelBench's N,
 * ported from that reference file (bench/pkb-crosscheck loads it); `suite:pkb` selects it. */
static int load_pkb(loader *ld, json_t *root, pk_problem *p) {
    json_t *o = json_object_get(root, "pkb");
    if (!o)
        return PK_OK;
    if (!json_is_object(o))
        return bad(ld, "pkb", "must be an object {\"number\": N, \"reference\": \"N_name.py\"}");
    json_t *num = json_object_get(o, "number"), *ref = json_object_get(o, "reference");
    if (!json_is_integer(num) || json_integer_value(num) < 1 || json_integer_value(num) > 999)
        return bad(ld, "pkb.number", "must be PKB's problem number, an integer 1-999");
    if (!json_is_string(ref))
        return bad(ld, "pkb.reference", "must be PKB's file name \"<number>_<name>.py\"");
    const char *r = json_string_value(ref);
    char prefix[16];
    int len = snprintf(prefix, sizeof prefix, "%lld_", (long long)json_integer_value(num));
    size_t rl = strlen(r);
    if (strncmp(r, prefix, (size_t)len) != 0 || rl < (size_t)len + 4 ||
        strcmp(r + rl - 3, ".py") != 0 || strchr(r, '/'))
        return bad(ld, "pkb.reference", "must be PKB's file name \"<number>_<name>.py\"");
    p->pkb_number = (int)json_integer_value(num);
    return PK_OK;
}

static int load_fields(loader *ld, json_t *root, pk_problem *p) {
    char device[8];
    long long v;
    if (load_pkb(ld, root, p))
        return PK_ERR_INVALID;
    if (get_string(ld, root, "title", 1, &p->title, NULL) ||
        get_string(ld, root, "category", 1, &p->category, NULL) ||
        get_string(ld, root, "entry", 0, &p->entry, "solution") ||
        get_string(ld, root, "signature", 1, &p->signature, NULL) ||
        copy_string(ld, root, "device", device, sizeof device, 1) ||
        copy_string(ld, root, "launcher", p->launcher, sizeof p->launcher, 0))
        return PK_ERR_INVALID;
    if (strcmp(device, "gpu") != 0 && strcmp(device, "host") != 0)
        return bad(ld, "device", "must be \"gpu\" or \"host\"");
    p->device_gpu = strcmp(device, "gpu") == 0;
    if (!p->launcher[0])
        strcpy(p->launcher, p->device_gpu ? "fork" : "mpi");
    if (strcmp(p->launcher, "fork") != 0 && strcmp(p->launcher, "mpi") != 0)
        return bad(ld, "launcher", "must be \"fork\" or \"mpi\"");
    if (!p->device_gpu && strcmp(p->launcher, "mpi") != 0)
        return bad(ld, "launcher", "host problems talk through MPI: use \"mpi\"");
    if (get_int(ld, root, "world_size", 2, 1, PK_MAX_RANKS, &v))
        return PK_ERR_INVALID;
    p->world_size = (int)v;
    json_t *ws = json_object_get(root, "world_sizes");
    if (ws) {
        if (!json_is_array(ws) || json_array_size(ws) > PK_MAX_RANKS)
            return bad(ld, "world_sizes", "must be an array of integers");
        size_t i;
        json_t *it;
        json_array_foreach(ws, i, it) {
            if (!json_is_integer(it) || json_integer_value(it) < 1 ||
                json_integer_value(it) > PK_MAX_RANKS)
                return bad(ld, "world_sizes", "entries must be integers in 1..8");
            p->world_sizes[p->n_world_sizes++] = (int)json_integer_value(it);
        }
    } else {
        p->world_sizes[p->n_world_sizes++] = p->world_size;
    }
    if (!pk_problem_world_allowed(p, p->world_size))
        return bad(ld, "world_sizes", "must contain world_size");
    if (get_int(ld, root, "root", 0, 0, PK_MAX_RANKS - 1, &v))
        return PK_ERR_INVALID;
    p->root = (int)v;
    if (get_int(ld, root, "scratch_bytes", 0, 0, 1LL << 40, &p->scratch_bytes))
        return PK_ERR_INVALID;
    if (get_int(ld, root, "trials", 5, 1, PK_EVAL_MAX_TRIALS, &v))
        return PK_ERR_INVALID;
    p->trials = (int)v;
    p->atol = p->rtol = -1;
    if (load_tolerance(ld, root, "tolerance", &p->atol, &p->rtol))
        return PK_ERR_INVALID;
    json_t *timing = json_object_get(root, "timing");
    loader tl = {ld->file, ld->err};
    long long wi, wm, it, blocks;
    if (get_int(&tl, timing, "warmup_iters", 50, 0, 100000, &wi) ||
        get_int(&tl, timing, "warmup_ms", 300, 0, 60000, &wm) ||
        get_int(&tl, timing, "iters", 100, 1, 100000, &it) ||
        get_int(&tl, timing, "blocks", 2, 1, PK_MAX_TIMING_BLOCKS, &blocks))
        return PK_ERR_INVALID;
    p->timing_blocks = (int)blocks;
    p->warmup_iters = (int)wi;
    p->warmup_ms = (int)wm;
    p->iters = (int)it;
    json_t *l2 = json_object_get(timing, "l2_multiple");
    p->l2_multiple = json_is_number(l2) ? json_number_value(l2) : 3.0;
    if (get_list(ld, root, "allowed_calls", &p->allowed_calls) ||
        get_list(ld, root, "forbidden_calls", &p->forbidden_calls) ||
        get_list(ld, root, "tags", &p->tags) || get_list(ld, root, "constraints", &p->constraints))
        return PK_ERR_INVALID;
    return load_dims(ld, root, p) || load_args(ld, root, p) || load_roofline(ld, root, p) ||
           pk_load_params(ld->file, root, p, ld->err) ||
           pk_load_libraries(ld->file, root, p, ld->err) ||
           pk_load_device_api(ld->file, root, p, ld->err) ||
           pk_load_presets(ld->file, root, p, ld->err);
}

static char *join3(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

int pk_problem_load_dir(const char *dir, const char *suite, const char *name,
                        const char *module_dir, pk_problem **out, pk_error *err) {
    pk_problem *p = calloc(1, sizeof *p);
    if (!p)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    char *meta_path = pk_path_join(dir, "meta.json");
    char *prompt_path = pk_path_join(dir, "prompt.md");
    int rc = pk_read_file(meta_path, &p->meta_json, NULL, err);
    if (rc == PK_OK)
        rc = pk_read_file(prompt_path, &p->prompt, NULL, err);
    json_t *root = NULL;
    if (rc == PK_OK) {
        json_error_t je;
        root = json_loads(p->meta_json, 0, &je);
        if (!root || !json_is_object(root))
            rc = pk_error_set(err, PK_ERR_INVALID, "%s:%d: %s", meta_path, je.line,
                              root ? "not a JSON object" : je.text);
    }
    loader ld = {meta_path, err};
    if (rc == PK_OK) {
        char *id = NULL;
        p->suite = strdup(suite);
        p->name = strdup(name);
        p->id = join3(suite, "/", name);
        p->dir = strdup(dir);
        rc = get_string(&ld, root, "id", 1, &id, NULL);
        if (rc == PK_OK && strcmp(id, name) != 0 && strcmp(id, p->id) != 0)
            rc = bad(&ld, "id", "must equal the directory name");
        free(id);
    }
    if (rc == PK_OK)
        rc = load_fields(&ld, root, p);
    if (rc == PK_OK)
        rc = pk_append_reference(meta_path, root, p, err);
    if (rc == PK_OK)
        rc = pk_check_constraints(p, err);
    if (rc == PK_OK && module_dir) {
        char *file = malloc(strlen(suite) + strlen(name) + 16);
        if (file) {
            sprintf(file, "pkprob_%s_%s.so", suite, name);
            p->module_path = pk_path_join(module_dir, file);
            free(file);
        }
    }
    json_decref(root);
    free(meta_path);
    free(prompt_path);
    if (rc != PK_OK) {
        pk_problem_free(p);
        return rc;
    }
    *out = p;
    return PK_OK;
}

static void free_list(pk_string_list *l) {
    for (int i = 0; i < l->n; i++)
        free(l->items[i]);
    l->n = 0;
}

void pk_problem_free(pk_problem *p) {
    if (!p)
        return;
    char **strs[] = {&p->id,    &p->suite,     &p->name,   &p->title,     &p->category,   &p->dir,
                     &p->entry, &p->signature, &p->prompt, &p->meta_json, &p->module_path};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        free(*strs[i]);
    free_list(&p->allowed_calls);
    free_list(&p->forbidden_calls);
    free_list(&p->tags);
    free_list(&p->constraints);
    for (int i = 0; i < p->n_presets; i++)
        free(p->preset_json[i]);
    free(p);
}

int pk_problem_world_allowed(const pk_problem *p, int world) {
    for (int i = 0; i < p->n_world_sizes; i++)
        if (p->world_sizes[i] == world)
            return 1;
    return 0;
}

int pk_problem_pkb_number(const pk_problem *p) {
    return p->pkb_number;
}

int pk_problem_in_suite(const pk_problem *p, const char *suite) {
    return strcmp(p->suite, suite) == 0 || (strcmp(suite, "pkb") == 0 && p->pkb_number > 0);
}

int pk_problem_world_is_diagnostic(const pk_problem *p, int world) {
    return world == 1 && !pk_problem_world_allowed(p, 1);
}

int pk_problem_world_admitted(const pk_problem *p, int world, int reference_only) {
    return pk_problem_world_allowed(p, world) ||
           (reference_only && pk_problem_world_is_diagnostic(p, world));
}

int pk_problem_world_sizes(const pk_problem *p, int *out, int cap) {
    for (int i = 0; i < p->n_world_sizes && i < cap; i++)
        out[i] = p->world_sizes[i];
    return p->n_world_sizes;
}
