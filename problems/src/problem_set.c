/* All problems under a root directory, and the public accessors. */
#include "pk_problem_spec.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

struct pk_problem_set {
    size_t n, cap;
    pk_problem **items;
};

static int by_id(const void *a, const void *b) {
    return strcmp((*(pk_problem *const *)a)->id, (*(pk_problem *const *)b)->id);
}

static int is_dir_entry(const struct dirent *e) {
    return e->d_name[0] != '.' && (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN);
}

static int add(pk_problem_set *s, pk_problem *p) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        pk_problem **items = realloc(s->items, cap * sizeof *items);
        if (!items)
            return PK_ERR_NOMEM;
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = p;
    return PK_OK;
}

static int load_suite(pk_problem_set *s, const char *root, const char *suite,
                      const char *module_dir, pk_error *err) {
    char *suite_dir = pk_path_join(root, suite);
    DIR *d = suite_dir ? opendir(suite_dir) : NULL;
    int rc = PK_OK;
    struct dirent *e;
    while (d && rc == PK_OK && (e = readdir(d))) {
        if (!is_dir_entry(e))
            continue;
        char *dir = pk_path_join(suite_dir, e->d_name);
        char *meta = pk_path_join(dir, "meta.json");
        if (pk_path_exists(meta)) {
            pk_problem *p = NULL;
            rc = pk_problem_load_dir(dir, suite, e->d_name, module_dir, &p, err);
            if (rc == PK_OK && add(s, p)) {
                pk_problem_free(p);
                rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
            }
        }
        free(meta);
        free(dir);
    }
    if (d)
        closedir(d);
    free(suite_dir);
    return rc;
}

int pk_problem_set_load(const char *root_dir, const char *module_dir, pk_problem_set **out,
                        pk_error *err) {
    DIR *d = opendir(root_dir);
    if (!d)
        return pk_error_errno(err, PK_ERR_NOT_FOUND, "open problem root %s", root_dir);
    pk_problem_set *s = calloc(1, sizeof *s);
    int rc = s ? PK_OK : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    struct dirent *e;
    while (rc == PK_OK && (e = readdir(d)))
        if (is_dir_entry(e) && strcmp(e->d_name, "include") != 0 && strcmp(e->d_name, "src") != 0 &&
            strcmp(e->d_name, "runner") != 0)
            rc = load_suite(s, root_dir, e->d_name, module_dir, err);
    closedir(d);
    if (rc != PK_OK) {
        pk_problem_set_free(s);
        return rc;
    }
    qsort(s->items, s->n, sizeof *s->items, by_id);
    *out = s;
    return PK_OK;
}

void pk_problem_set_free(pk_problem_set *set) {
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++)
        pk_problem_free(set->items[i]);
    free(set->items);
    free(set);
}

size_t pk_problem_set_count(const pk_problem_set *set) {
    return set ? set->n : 0;
}

const pk_problem *pk_problem_set_at(const pk_problem_set *set, size_t i) {
    return set && i < set->n ? set->items[i] : NULL;
}

const pk_problem *pk_problem_set_find(const pk_problem_set *set, const char *id) {
    for (size_t i = 0; set && id && i < set->n; i++)
        if (strcmp(set->items[i]->id, id) == 0)
            return set->items[i];
    return NULL;
}

const char *pk_problem_id(const pk_problem *p) {
    return p->id;
}
const char *pk_problem_title(const pk_problem *p) {
    return p->title;
}
const char *pk_problem_category(const pk_problem *p) {
    return p->category;
}
const char *pk_problem_suite(const pk_problem *p) {
    return p->suite;
}
int pk_problem_world_size(const pk_problem *p) {
    return p->world_size;
}
int pk_problem_needs_gpu(const pk_problem *p) {
    return p->device_gpu;
}
size_t pk_problem_tag_count(const pk_problem *p) {
    return (size_t)p->tags.n;
}
const char *pk_problem_tag(const pk_problem *p, size_t i) {
    return i < (size_t)p->tags.n ? p->tags.items[i] : NULL;
}
int pk_problem_has_tag(const pk_problem *p, const char *tag) {
    for (int i = 0; i < p->tags.n; i++)
        if (strcmp(p->tags.items[i], tag) == 0)
            return 1;
    return 0;
}
const char *pk_problem_prompt(const pk_problem *p) {
    return p->prompt;
}
const char *pk_problem_meta_json(const pk_problem *p) {
    return p->meta_json;
}
const char *pk_problem_dir(const pk_problem *p) {
    return p->dir;
}
const char *pk_problem_entry(const pk_problem *p) {
    return p->entry;
}
