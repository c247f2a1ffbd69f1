/* The driver's GPU list (pk_gpu_nodes.h). */
#define _GNU_SOURCE
#include "pk_gpu_nodes.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *pk_gpu_driver_root(void) {
    const char *root = getenv("PKGYM_DRIVER_PROC");
    return root && *root ? root : "/proc/driver/nvidia";
}

/* The value of "Key:   value" in text, trimmed, into out; 0 when found. */
static int info_value(const char *text, const char *key, char *out, size_t cap) {
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == ':') {
            const char *v = line + klen + 1, *e = line + len;
            while (v < e && isspace((unsigned char)*v))
                v++;
            while (e > v && isspace((unsigned char)e[-1]))
                e--;
            snprintf(out, cap, "%.*s", (int)(e - v), v);
            return 0;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

static void read_information(const char *dir, pk_gpu_node *g) {
    char path[2100], value[96];
    snprintf(path, sizeof path, "%s/information", dir);
    char *text = NULL;
    size_t len = 0;
    g->minor = -1;
    g->uuid[0] = '\0';
    if (pk_read_file_untrusted(path, 64 * 1024, &text, &len, NULL) != PK_OK)
        return;
    char *end;
    if (info_value(text, "Device Minor", value, sizeof value) == 0) {
        long v = strtol(value, &end, 10);
        if (end != value && !*end && v >= 0 && v < 256)
            g->minor = (int)v;
    }
    /* The driver masks what it may not show ("GPU-????????-..."): no UUID then. */
    if (info_value(text, "GPU UUID", value, sizeof value) == 0 && strncmp(value, "GPU-", 4) == 0 &&
        !strchr(value, '?'))
        memcpy(g->uuid, value, sizeof value);
    free(text);
}

static int by_bus_id(const void *a, const void *b) {
    return strcasecmp(((const pk_gpu_node *)a)->bus_id, ((const pk_gpu_node *)b)->bus_id);
}

int pk_gpu_nodes_read(const char *root, pk_gpu_nodes *out, pk_error *err) {
    memset(out, 0, sizeof *out);
    if (!root)
        root = pk_gpu_driver_root();
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/gpus", root);
    DIR *d = opendir(dir);
    if (!d)
        return pk_error_errno(err, PK_ERR_NOT_FOUND, "no NVIDIA driver GPU list at %s", dir);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof out->gpu[0].bus_id)
            continue;
        if (out->n == PK_GPU_NODES_MAX) {
            closedir(d);
            return pk_error_set(err, PK_ERR_INVALID, "more than %d GPUs in %s", PK_GPU_NODES_MAX,
                                dir);
        }
        pk_gpu_node *g = &out->gpu[out->n++];
        snprintf(g->bus_id, sizeof g->bus_id, "%s", e->d_name);
        for (char *c = g->bus_id; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        char gdir[2048];
        snprintf(gdir, sizeof gdir, "%s/%s", dir, e->d_name);
        read_information(gdir, g);
    }
    closedir(d);
    qsort(out->gpu, (size_t)out->n, sizeof out->gpu[0], by_bus_id);
    return PK_OK;
}

const pk_gpu_node *pk_gpu_nodes_lookup(const pk_gpu_nodes *m, int index, pk_error *err) {
    if (index < 0 || index >= m->n) {
        pk_error_set(err, PK_ERR_NOT_FOUND, "GPU %d: the driver lists %d GPU(s) (%s/gpus)", index,
                     m->n, pk_gpu_driver_root());
        return NULL;
    }
    const pk_gpu_node *g = &m->gpu[index];
    if (g->minor < 0) {
        pk_error_set(err, PK_ERR_NOT_FOUND, "GPU %d (%s): the driver gives no device minor", index,
                     g->bus_id);
        return NULL;
    }
    return g;
}

int pk_gpu_nodes_visible(const pk_gpu_nodes *m, const int *indices, int n, char *out, size_t cap,
                         pk_error *err) {
    int all_uuids = 1;
    for (int i = 0; i < n; i++) {
        const pk_gpu_node *g = pk_gpu_nodes_lookup(m, indices[i], err);
        if (!g)
            return err ? err->code : PK_ERR_NOT_FOUND;
        all_uuids &= g->uuid[0] != '\0';
    }
    size_t used = 0;
    if (cap)
        out[0] = '\0';
    for (int i = 0; i < n; i++) {
        int w;
        if (all_uuids) {
            w = snprintf(out + used, cap - used, "%s%s", i ? "," : "", m->gpu[indices[i]].uuid);
        } else {
            /* Position among the job's distinct GPUs, in PCI bus order (= index order). */
            int pos = 0;
            for (int k = 0; k < n; k++) {
                int seen = 0;
                for (int j = 0; j < k; j++)
                    seen |= indices[j] == indices[k];
                pos += !seen && indices[k] < indices[i];
            }
            w = snprintf(out + used, cap - used, "%s%d", i ? "," : "", pos);
        }
        if (w < 0 || (size_t)w >= cap - used)
            return pk_error_set(err, PK_ERR_INVALID, "CUDA_VISIBLE_DEVICES for %d GPUs is too long",
                                n);
        used += (size_t)w;
    }
    return PK_OK;
}
