/* A worker's view of itself: launcher, GPUs and NVLink domains, cores, problems and their
 * versions, and the announcement built from them (pk_worker_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_worker_internal.h"

#define DEFAULT_PROBLEMS_DIR PK_WORKER_DEFAULT_PROBLEMS_DIR
#define DEFAULT_MODULES_DIR PK_WORKER_DEFAULT_MODULES_DIR

void pk_worker_opts_default(pk_worker_opts *o) {
    memset(o, 0, sizeof *o);
    o->problems_dir = DEFAULT_PROBLEMS_DIR;
    o->modules_dir = DEFAULT_MODULES_DIR;
    o->heartbeat_ms = 1000;
    o->liveness = 5;
    o->reconnect_max_ms = 32000;
    o->grace_ms = 30000;
}

static const char *env_get(const char *name) {
    return getenv(name);
}

static void default_name(pk_worker_ctx *w) {
    char host[128] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    if (w->o.name && *w->o.name)
        snprintf(w->name, sizeof w->name, "%s", w->o.name);
    else if (w->launch.rank >= 0)
        snprintf(w->name, sizeof w->name, "%s/r%d", host, w->launch.rank);
    else
        snprintf(w->name, sizeof w->name, "%s/p%ld", host, (long)getpid());
}

static int load_problems(pk_worker_ctx *w, pk_error *err) {
    int rc = pk_problem_set_load(w->o.problems_dir, w->o.modules_dir, &w->problems, err);
    if (rc)
        return rc;
    size_t n = pk_problem_set_count(w->problems);
    w->versions = calloc(n ? n : 1, sizeof *w->versions);
    w->module_ok = calloc(n ? n : 1, sizeof *w->module_ok);
    if (!w->versions || !w->module_ok)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const pk_problem *p = pk_problem_set_at(w->problems, i);
        char why[256];
        pk_problem_version(p, w->versions[i]);
        w->module_ok[i] = pk_problem_module_present(p, why, sizeof why);
    }
    return PK_OK;
}

static int pick_gpus(pk_worker_ctx *w, pk_error *err) {
    pk_gpu_topology all;
    pk_gpu_topology_read(&all);
    int picked[PK_TOPO_MAX_GPUS], n = 0;
    int rc = pk_launch_pick_gpus(&all, w->o.gpus, &w->launch, picked, &n, w->gpu_note,
                                 sizeof w->gpu_note, err);
    if (rc)
        return rc;
    if (n > PK_SCHED_MAX_GPUS) {
        size_t used = strlen(w->gpu_note);
        snprintf(w->gpu_note + used, sizeof w->gpu_note - used,
                 "%sonly the first %d of %d GPUs are used", used ? "; " : "", PK_SCHED_MAX_GPUS, n);
        n = PK_SCHED_MAX_GPUS;
    }
    w->topo = all;
    pk_gpu_topology_select(&w->topo, picked, n);
    w->n_gpus = n;
    memcpy(w->gpus, picked, (size_t)n * sizeof *picked);
    int pos[PK_TOPO_MAX_GPUS];
    w->max_world = pk_gpu_topology_largest_domain(&w->topo, pos);
    return PK_OK;
}

static json_t *gpus_json(const pk_worker_ctx *w) {
    json_t *a = json_array();
    for (int i = 0; a && i < w->topo.n_gpus; i++) {
        const pk_gpu_desc *g = &w->topo.gpus[i];
        json_array_append_new(a, json_pack("{s:i, s:s, s:I, s:s, s:i}", "index", g->index, "name",
                                           g->name, "memory_mib", (json_int_t)g->memory_mib, "uuid",
                                           g->uuid, "minor", g->minor));
    }
    return a;
}

static json_t *domains_json(const pk_worker_ctx *w) {
    json_t *a = json_array();
    for (int d = 0; a && d < w->topo.n_domains; d++) {
        json_t *dom = json_array();
        for (int i = 0; dom && i < w->topo.n_gpus; i++)
            if (w->topo.domain[i] == d)
                json_array_append_new(dom, json_integer(w->topo.gpus[i].index));
        json_array_append_new(a, dom);
    }
    return a;
}

static json_t *problems_json(const pk_worker_ctx *w, int missing) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < pk_problem_set_count(w->problems); i++) {
        const pk_problem *p = pk_problem_set_at(w->problems, i);
        char why[300];
        if (!missing && w->module_ok[i])
            json_array_append_new(a, json_pack("[s, s]", pk_problem_id(p), w->versions[i]));
        else if (missing && !pk_problem_module_present(p, why, sizeof why))
            json_array_append_new(a, json_pack("[s, s]", pk_problem_id(p), why));
    }
    return a;
}

static int build_info(pk_worker_ctx *w, pk_error *err) {
    char host[128] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    const pk_launch_env *l = &w->launch;
    w->info = json_pack(
        "{s:s, s:s, s:I, s:s, s:{s:s, s:i, s:i, s:i, s:i}, s:o, s:o, s:s, s:s,"
        " s:{s:s, s:s, s:s, s:s}, s:{s:i, s:i, s:i, s:i, s:i}, s:o, s:o}",
        "name", w->name, "host", host, "pid", (json_int_t)getpid(), "version", PK_VERSION,
        "launcher", "kind", l->kind, "rank", l->rank, "size", l->size, "local_rank", l->local_rank,
        "local_size", l->local_size, "gpus", gpus_json(w), "nvlink_domains", domains_json(w),
        "topology_source", w->topo.source, "gpu_note", w->gpu_note, "host_info", "gpu_model",
        w->host.gpu_model, "driver", w->host.driver, "nccl", w->host.nccl, "cpu_model",
        w->host.cpu_model, "capacity", "compile_workers", w->compile_workers, "gpu_slots",
        w->n_gpus, "host_slots", w->host_slots, "max_jobs", w->max_jobs, "max_world", w->max_world,
        "problems", problems_json(w, 0), "missing", problems_json(w, 1));
    return w->info ? PK_OK : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
}

int pk_worker_ctx_init(pk_worker_ctx *w, const pk_worker_opts *o, pk_error *err) {
    memset(w, 0, sizeof *w);
    w->o = *o;
    if (!w->o.heartbeat_ms)
        w->o.heartbeat_ms = 1000;
    if (!w->o.liveness)
        w->o.liveness = 5;
    if (!w->o.reconnect_max_ms)
        w->o.reconnect_max_ms = 32000;
    pk_launch_env_read(&w->launch, env_get);
    default_name(w);
    pk_host_info_read(&w->host);
    if (o->data_dir) {
        w->data_dir = strdup(o->data_dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        char dir[512];
        snprintf(dir, sizeof dir, "%s/pkgym-worker-%ld", tmp && *tmp ? tmp : "/tmp",
                 (long)getuid());
        w->data_dir = strdup(dir);
    }
    if (!w->data_dir)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = load_problems(w, err);
    if (!rc)
        rc = pick_gpus(w, err);
    if (rc)
        return rc;
    w->compile_workers =
        o->compile_workers > 0 ? o->compile_workers : pk_launch_default_compile_workers(&w->launch);
    w->host_slots = w->compile_workers;
    w->max_jobs =
        o->max_jobs > 0 ? o->max_jobs : 2 * (w->compile_workers + w->n_gpus + w->host_slots);
    return build_info(w, err);
}

void pk_worker_ctx_free(pk_worker_ctx *w) {
    json_decref(w->info);
    pk_problem_set_free(w->problems);
    free(w->versions);
    free(w->module_ok);
    free(w->data_dir);
    memset(w, 0, sizeof *w);
}

const pk_problem *pk_worker_find_problem(const pk_worker_ctx *w, const char *id, size_t *index) {
    for (size_t i = 0; i < pk_problem_set_count(w->problems); i++) {
        const pk_problem *p = pk_problem_set_at(w->problems, i);
        if (strcmp(pk_problem_id(p), id) == 0) {
            *index = i;
            return p;
        }
    }
    return NULL;
}

int pk_worker_describe(const pk_worker_opts *o, json_t **out, pk_error *err) {
    pk_worker_ctx w;
    *out = NULL;
    int rc = pk_worker_ctx_init(&w, o, err);
    if (!rc)
        *out = json_incref(w.info);
    pk_worker_ctx_free(&w);
    return rc;
}
