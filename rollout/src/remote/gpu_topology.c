/* GPUs and NVLink domains (pk_gpu_topology.h). */
#include "pk_gpu_topology.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_common.h"

#define NVML_P2P_CAPS_INDEX_NVLINK 2 /* nvmlGpuP2PCapsIndex_t */
#define NVML_P2P_STATUS_OK 0

typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

typedef struct nvml_api {
    int (*init)(void);
    int (*shutdown)(void);
    int (*count)(unsigned int *);
    int (*handle)(unsigned int, void **);
    int (*name)(void *, char *, unsigned int);
    int (*memory)(void *, nvml_memory *);
    int (*uuid)(void *, char *, unsigned int);
    int (*p2p)(void *, void *, int, int *);
} nvml_api;

static int load_nvml(void *lib, nvml_api *a) {
    *(void **)&a->init = dlsym(lib, "nvmlInit_v2");
    *(void **)&a->shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&a->count = dlsym(lib, "nvmlDeviceGetCount_v2");
    *(void **)&a->handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&a->name = dlsym(lib, "nvmlDeviceGetName");
    *(void **)&a->memory = dlsym(lib, "nvmlDeviceGetMemoryInfo");
    *(void **)&a->uuid = dlsym(lib, "nvmlDeviceGetUUID");
    *(void **)&a->p2p = dlsym(lib, "nvmlDeviceGetP2PStatus"); /* optional */
    return a->init && a->shutdown && a->count && a->handle && a->name && a->memory && a->uuid;
}

static int find(int *parent, int i) {
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

void pk_gpu_domains_from_links(int n, const unsigned char *links, int *domain, int *n_domains) {
    int parent[PK_TOPO_MAX_GPUS];
    if (n > PK_TOPO_MAX_GPUS)
        n = PK_TOPO_MAX_GPUS;
    for (int i = 0; i < n; i++)
        parent[i] = i;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (links[i * n + j] || links[j * n + i]) {
                int a = find(parent, i), b = find(parent, j);
                if (a != b)
                    parent[a > b ? a : b] = a < b ? a : b;
            }
    int id_of_root[PK_TOPO_MAX_GPUS];
    int next = 0;
    for (int i = 0; i < n; i++)
        id_of_root[i] = -1;
    for (int i = 0; i < n; i++) {
        int r = find(parent, i);
        if (id_of_root[r] < 0)
            id_of_root[r] = next++;
        domain[i] = id_of_root[r];
    }
    *n_domains = next;
}

/* The whitespace-separated tokens of one line (at most max), in place. */
static int tokens(char *line, char **out, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t && n < max;
         t = strtok_r(NULL, " \t\r", &save))
        out[n++] = t;
    return n;
}

static int gpu_label(const char *tok) {
    if (strncmp(tok, "GPU", 3) != 0 || !isdigit((unsigned char)tok[3]))
        return -1;
    char *end;
    long v = strtol(tok + 3, &end, 10);
    return *end || v < 0 || v >= PK_TOPO_MAX_GPUS ? -1 : (int)v;
}

int pk_gpu_topology_parse_smi(const char *text, unsigned char *links, int max_n) {
    char *copy = strdup(text ? text : "");
    if (!copy)
        return -1;
    int n = -1; /* GPU columns, from the header line */
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", line);
        char *tok[PK_TOPO_MAX_GPUS + 16];
        int k = tokens(buf, tok, PK_TOPO_MAX_GPUS + 16);
        if (k == 0)
            continue;
        if (n < 0) {
            /* The header: "GPU0 GPU1 ... [NIC0 ...] CPU Affinity ..." with no row label. */
            if (gpu_label(tok[0]) != 0 || line[0] == 'G')
                continue;
            n = 0;
            while (n < k && gpu_label(tok[n]) == n)
                n++;
            if (n > max_n)
                n = max_n;
            memset(links, 0, (size_t)n * (size_t)n);
            continue;
        }
        int row = gpu_label(tok[0]);
        if (row < 0 || row >= n)
            continue;
        for (int c = 0; c < n && c + 1 < k; c++)
            links[row * n + c] = strncmp(tok[c + 1], "NV", 2) == 0 && c != row;
    }
    free(copy);
    return n > 0 ? n : -1;
}

/* NVML's answer for one pair: 1 NVLink, 0 none, -1 unknown. */
static int nvml_link(const nvml_api *a, void *x, void *y) {
    int status = -1;
    if (!a->p2p || a->p2p(x, y, NVML_P2P_CAPS_INDEX_NVLINK, &status) != 0)
        return -1;
    return status == NVML_P2P_STATUS_OK;
}

static int smi_links(int n, unsigned char *links) {
    FILE *f = popen("nvidia-smi topo -m 2>/dev/null", "r");
    if (!f)
        return -1;
    pk_strbuf sb = {0};
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        pk_strbuf_append(&sb, buf, got);
    pclose(f);
    unsigned char parsed[PK_TOPO_MAX_GPUS * PK_TOPO_MAX_GPUS];
    int m = sb.data ? pk_gpu_topology_parse_smi(sb.data, parsed, PK_TOPO_MAX_GPUS) : -1;
    pk_strbuf_free(&sb);
    if (m != n)
        return -1;
    memcpy(links, parsed, (size_t)n * (size_t)n);
    return 0;
}

void pk_gpu_topology_set_domains(pk_gpu_topology *t, const unsigned char *links,
                                 const char *source) {
    int n = t->n_gpus, any = 0;
    for (int i = 0; links && i < n * n; i++)
        any |= links[i] != 0;
    snprintf(t->source, sizeof t->source, "%s", links && !any && n > 1 ? "pcie" : source);
    if (links && any) {
        pk_gpu_domains_from_links(n, links, t->domain, &t->n_domains);
        return;
    }
    for (int i = 0; i < n; i++)
        t->domain[i] = 0;
    t->n_domains = n > 0 ? 1 : 0;
}

void pk_gpu_topology_read(pk_gpu_topology *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "none");
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    nvml_api a;
    memset(&a, 0, sizeof a);
    if (!lib)
        return;
    unsigned int n = 0;
    void *dev[PK_TOPO_MAX_GPUS];
    if (load_nvml(lib, &a) && a.init() == 0) {
        if (a.count(&n) != 0)
            n = 0;
        for (unsigned int i = 0; i < n && t->n_gpus < PK_TOPO_MAX_GPUS; i++) {
            pk_gpu_desc *g = &t->gpus[t->n_gpus];
            nvml_memory mem = {0, 0, 0};
            if (a.handle(i, &dev[t->n_gpus]) != 0)
                continue;
            g->index = (int)i;
            g->minor = -1;
            snprintf(g->name, sizeof g->name, "unknown");
            a.name(dev[t->n_gpus], g->name, sizeof g->name);
            a.uuid(dev[t->n_gpus], g->uuid, sizeof g->uuid);
            a.memory(dev[t->n_gpus], &mem);
            g->memory_mib = (long long)(mem.total >> 20);
            t->n_gpus++;
        }
        unsigned char links[PK_TOPO_MAX_GPUS * PK_TOPO_MAX_GPUS];
        int m = t->n_gpus, known = 1;
        memset(links, 0, sizeof links);
        for (int i = 0; i < m && known; i++)
            for (int j = i + 1; j < m && known; j++) {
                int l = nvml_link(&a, dev[i], dev[j]);
                known = l >= 0;
                links[i * m + j] = links[j * m + i] = l > 0;
            }
        if (m > 1 && known)
            pk_gpu_topology_set_domains(t, links, "nvml");
        else if (m > 1 && smi_links(m, links) == 0)
            pk_gpu_topology_set_domains(t, links, "nvidia-smi");
        else
            pk_gpu_topology_set_domains(t, NULL, m > 1 ? "unknown" : "none");
        a.shutdown();
    }
    dlclose(lib);
    pk_gpu_nodes *nodes = malloc(sizeof *nodes);
    if (nodes && pk_gpu_nodes_read(NULL, nodes, NULL) == PK_OK)
        pk_gpu_topology_apply_driver(t, nodes);
    free(nodes);
}

void pk_gpu_topology_apply_driver(pk_gpu_topology *t, const pk_gpu_nodes *nodes) {
    for (int i = 0; i < t->n_gpus; i++) {
        pk_gpu_desc *g = &t->gpus[i];
        for (int k = 0; g->uuid[0] && k < nodes->n; k++)
            if (strcmp(nodes->gpu[k].uuid, g->uuid) == 0) {
                g->index = k;
                g->minor = nodes->gpu[k].minor;
            }
    }
}

void pk_gpu_topology_select(pk_gpu_topology *t, const int *indices, int n) {
    pk_gpu_topology out;
    memset(&out, 0, sizeof out);
    memcpy(out.source, t->source, sizeof out.source);
    int map[PK_TOPO_MAX_GPUS];
    for (int i = 0; i < PK_TOPO_MAX_GPUS; i++)
        map[i] = -1;
    for (int k = 0; k < n && out.n_gpus < PK_TOPO_MAX_GPUS; k++)
        for (int i = 0; i < t->n_gpus; i++)
            if (t->gpus[i].index == indices[k]) {
                out.gpus[out.n_gpus] = t->gpus[i];
                /* renumber domains in order of first appearance */
                if (map[t->domain[i]] < 0)
                    map[t->domain[i]] = out.n_domains++;
                out.domain[out.n_gpus++] = map[t->domain[i]];
                break;
            }
    *t = out;
}

int pk_gpu_topology_largest_domain(const pk_gpu_topology *t, int *positions) {
    int best = -1, best_n = 0;
    for (int d = 0; d < t->n_domains; d++) {
        int n = 0;
        for (int i = 0; i < t->n_gpus; i++)
            n += t->domain[i] == d;
        if (n > best_n) {
            best = d;
            best_n = n;
        }
    }
    int k = 0;
    for (int i = 0; i < t->n_gpus && best >= 0; i++)
        if (t->domain[i] == best)
            positions[k++] = i;
    return k;
}
