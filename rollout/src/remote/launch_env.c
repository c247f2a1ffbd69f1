/* Launcher variables, GPU choice and core share of a worker (pk_launch_env.h). */
#define _GNU_SOURCE
#include "pk_launch_env.h"

#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static int read_int(const char *(*get)(const char *), const char *name, int *out) {
    const char *v = get(name);
    if (!v || !*v)
        return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > 1 << 24)
        return 0;
    *out = (int)x;
    return 1;
}

int pk_slurm_tasks_on_node(const char *spec, int node_id) {
    /* "2(x3),1": nodes 0-2 run 2 tasks, node 3 runs 1. */
    if (!spec || node_id < 0)
        return -1;
    const char *p = spec;
    int node = 0;
    while (*p) {
        char *end;
        long tasks = strtol(p, &end, 10);
        if (end == p || tasks < 0)
            return -1;
        long repeat = 1;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            repeat = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || repeat < 1)
                return -1;
            p = end + 1;
        }
        if (node_id < node + repeat)
            return (int)tasks;
        node += (int)repeat;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return -1;
}

void pk_launch_env_read(pk_launch_env *e, const char *(*get)(const char *)) {
    memset(e, 0, sizeof *e);
    e->rank = e->size = -1;
    e->local_rank = 0;
    e->local_size = 1;
    snprintf(e->kind, sizeof e->kind, "none");
    int node = -1, tasks;
    if (read_int(get, "OMPI_COMM_WORLD_RANK", &e->rank)) {
        snprintf(e->kind, sizeof e->kind, "mpirun");
        read_int(get, "OMPI_COMM_WORLD_SIZE", &e->size);
        read_int(get, "OMPI_COMM_WORLD_LOCAL_RANK", &e->local_rank);
        read_int(get, "OMPI_COMM_WORLD_LOCAL_SIZE", &e->local_size);
    } else if (read_int(get, "SLURM_PROCID", &e->rank)) {
        snprintf(e->kind, sizeof e->kind, "srun");
        if (!read_int(get, "SLURM_STEP_NUM_TASKS", &e->size))
            read_int(get, "SLURM_NTASKS", &e->size);
        read_int(get, "SLURM_LOCALID", &e->local_rank);
        read_int(get, "SLURM_NODEID", &node);
        const char *tpn = get("SLURM_STEP_TASKS_PER_NODE");
        if (!tpn)
            tpn = get("SLURM_TASKS_PER_NODE");
        if ((tasks = pk_slurm_tasks_on_node(tpn, node)) > 0)
            e->local_size = tasks;
    } else if (read_int(get, "PMI_RANK", &e->rank) || read_int(get, "PMIX_RANK", &e->rank)) {
        snprintf(e->kind, sizeof e->kind, "pmi");
        if (!read_int(get, "PMI_SIZE", &e->size))
            read_int(get, "PMIX_SIZE", &e->size);
        read_int(get, "MPI_LOCALRANKID", &e->local_rank);
        read_int(get, "MPI_LOCALNRANKS", &e->local_size);
    }
    if (e->local_size < 1)
        e->local_size = 1;
    if (e->local_rank >= e->local_size)
        e->local_size = e->local_rank + 1;
    const char *cvd = get("CUDA_VISIBLE_DEVICES");
    if (cvd)
        snprintf(e->cuda_visible, sizeof e->cuda_visible, "%s", cvd);
}

static int launcher_var(const char *entry) {
    static const char *const prefixes[] = {"OMPI_", "PMIX_", "PMI_",   "SLURM_",
                                           "ORTE_", "PRTE_", "HYDRA_", "MPI_LOCAL"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

void pk_launch_env_scrub(void) {
    /* unsetenv shifts environ: restart the scan after each removal. */
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; e && *e; e++) {
            if (!launcher_var(*e))
                continue;
            char name[256];
            size_t n = strcspn(*e, "=");
            if (n >= sizeof name)
                continue;
            memcpy(name, *e, n);
            name[n] = '\0';
            unsetenv(name);
            again = 1;
            break;
        }
    }
}

static int position_of_index(const pk_gpu_topology *t, int index) {
    for (int i = 0; i < t->n_gpus; i++)
        if (t->gpus[i].index == index)
            return i;
    return -1;
}

static int position_of_uuid(const pk_gpu_topology *t, const char *uuid) {
    for (int i = 0; i < t->n_gpus; i++)
        if (t->gpus[i].uuid[0] && strcmp(t->gpus[i].uuid, uuid) == 0)
            return i;
    return -1;
}

/* Parses a comma list of indices (or UUIDs when uuids) into NVML indices. */
static int parse_list(const pk_gpu_topology *t, const char *list, int uuids, int *out, int *n,
                      const char *what, pk_error *err) {
    char *copy = strdup(list);
    if (!copy)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = PK_OK;
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && !rc;
         tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        int pos = -1;
        if (uuids && strncmp(tok, "GPU-", 4) == 0) {
            pos = position_of_uuid(t, tok);
        } else {
            char *end;
            long v = strtol(tok, &end, 10);
            pos = (*end || end == tok || v < 0) ? -2 : position_of_index(t, (int)v);
        }
        if (pos == -2)
            rc = pk_error_set(err, PK_ERR_INVALID, "%s: '%s' is not a GPU index", what, tok);
        else if (pos < 0)
            rc = pk_error_set(err, PK_ERR_INVALID,
                              "%s: GPU '%s' does not exist on this host (%d GPU(s) found)", what,
                              tok, t->n_gpus);
        else if (*n >= PK_TOPO_MAX_GPUS)
            rc = pk_error_set(err, PK_ERR_INVALID, "%s: too many GPUs", what);
        else
            out[(*n)++] = t->gpus[pos].index;
    }
    free(copy);
    return rc;
}

int pk_launch_pick_gpus(const pk_gpu_topology *t, const char *spec, const pk_launch_env *e,
                        int *out, int *n_out, char *note, size_t note_cap, pk_error *err) {
    int cand[PK_TOPO_MAX_GPUS], n = 0;
    *n_out = 0;
    if (note_cap)
        note[0] = '\0';
    if (spec && strcmp(spec, "none") == 0)
        return PK_OK;
    int explicit_list = spec && strcmp(spec, "auto") != 0;
    int rc = PK_OK;
    if (explicit_list) {
        rc = parse_list(t, spec, 0, cand, &n, "--gpus", err);
    } else if (e->cuda_visible[0]) {
        /* The launcher (e.g. srun --gpus-per-task) already chose this worker's GPUs. */
        rc = parse_list(t, e->cuda_visible, 1, cand, &n, "CUDA_VISIBLE_DEVICES", err);
    } else {
        int total = t->n_gpus, ls = e->local_size, r = e->local_rank;
        int lo = (int)((long)r * total / ls), hi = (int)((long)(r + 1) * total / ls);
        for (int i = lo; i < hi; i++)
            cand[n++] = t->gpus[i].index;
        if (ls > 1 && note_cap)
            snprintf(note, note_cap, "local rank %d of %d takes GPUs %d..%d of %d", r, ls, lo,
                     hi - 1, total);
    }
    if (rc)
        return rc;
    pk_gpu_topology sub = *t;
    pk_gpu_topology_select(&sub, cand, n);
    if (sub.n_domains > 1) {
        int pos[PK_TOPO_MAX_GPUS];
        int k = pk_gpu_topology_largest_domain(&sub, pos);
        size_t used = strlen(note);
        if (note_cap > used)
            snprintf(note + used, note_cap - used,
                     "%sthe GPUs span %d NVLink domains: using the largest (%d of %d GPUs); "
                     "start one worker per domain (--gpus) to use the others",
                     used ? "; " : "", sub.n_domains, k, n);
        for (int i = 0; i < k; i++)
            out[i] = sub.gpus[pos[i]].index;
        *n_out = k;
        return PK_OK;
    }
    memcpy(out, cand, (size_t)n * sizeof *cand);
    *n_out = n;
    return PK_OK;
}

int pk_launch_default_compile_workers(const pk_launch_env *e) {
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int cores = (int)(online > 0 ? online : 1);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    /* Unbound workers of one node share all of its cores. */
    if (cores >= online && e->local_size > 1)
        cores /= e->local_size;
    return cores > 1 ? cores - 1 : 1;
}
