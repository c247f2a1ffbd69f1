/* The operator's hook registry: names a client may choose, each bound to a plugin or command
 * that the operator picked. Clients never give paths (docs/security.md). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "summarizer_internal.h"

#define PK_HOOK_NAME_MAX 64

typedef struct pk_hook_entry {
    char *name;
    char *spec; /* "plugin:/abs/x.so" or "cmd:/abs/prog" */
} pk_hook_entry;

struct pk_hook_registry {
    pk_hook_entry *e;
    size_t n, cap;
};

pk_hook_registry *pk_hook_registry_new(void) {
    return calloc(1, sizeof(pk_hook_registry));
}

void pk_hook_registry_free(pk_hook_registry *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->e[i].name);
        free(r->e[i].spec);
    }
    free(r->e);
    free(r);
}

int pk_hook_name_valid(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > PK_HOOK_NAME_MAX || strcmp(name, "builtin") == 0)
        return 0;
    for (const char *c = name; *c; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '_' || *c == '-' || *c == '.';
        if (!ok)
            return 0;
    }
    return 1;
}

int pk_hook_spec_split(const char *spec, pk_hook_kind *kind, const char **path) {
    if (strncmp(spec, "plugin:", 7) == 0) {
        *kind = PK_HOOK_PLUGIN;
        *path = spec + 7;
        return 0;
    }
    if (strncmp(spec, "cmd:", 4) == 0) {
        *kind = PK_HOOK_COMMAND;
        *path = spec + 4;
        return 0;
    }
    return -1;
}

/* The file must be there now: a typo is the operator's to see at start-up, not a fallback at
 * every step. */
static int check_spec(const char *name, const char *spec, pk_error *err) {
    pk_hook_kind kind;
    const char *path;
    if (pk_hook_spec_split(spec, &kind, &path) != 0) {
        return pk_error_set(err, PK_ERR_INVALID,
                            "hook %s: \"%s\" is not \"plugin:/abs/path/x.so\" or "
                            "\"cmd:/abs/path/prog\"",
                            name, spec);
    }
    if (path[0] != '/')
        return pk_error_set(err, PK_ERR_INVALID, "hook %s: path must be absolute: %s", name, path);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return pk_error_set(err, PK_ERR_INVALID, "hook %s: %s is not a regular file", name, path);
    if (kind == PK_HOOK_COMMAND && access(path, X_OK) != 0)
        return pk_error_set(err, PK_ERR_INVALID, "hook %s: %s is not executable", name, path);
    return PK_OK;
}

int pk_hook_registry_add(pk_hook_registry *r, const char *name, const char *spec, pk_error *err) {
    if (!r || !name || !spec)
        return pk_error_set(err, PK_ERR_INVALID, "pk_hook_registry_add: NULL argument");
    if (!pk_hook_name_valid(name)) {
        return pk_error_set(err, PK_ERR_INVALID,
                            "hook name \"%.80s\": use 1 to %d of A-Z a-z 0-9 _ - . (and not "
                            "\"builtin\")",
                            name, PK_HOOK_NAME_MAX);
    }
    if (pk_hook_registry_spec(r, name))
        return pk_error_set(err, PK_ERR_INVALID, "hook %s is registered twice", name);
    int rc = check_spec(name, spec, err);
    if (rc != PK_OK)
        return rc;
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        pk_hook_entry *grown = realloc(r->e, cap * sizeof *grown);
        if (!grown)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        r->e = grown;
        r->cap = cap;
    }
    pk_hook_entry e = {strdup(name), strdup(spec)};
    if (!e.name || !e.spec) {
        free(e.name);
        free(e.spec);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    r->e[r->n++] = e;
    return PK_OK;
}

int pk_hook_registry_add_arg(pk_hook_registry *r, const char *name_eq_spec, pk_error *err) {
    const char *eq = strchr(name_eq_spec, '=');
    if (!eq) {
        return pk_error_set(err, PK_ERR_INVALID,
                            "--hook %s: expected NAME=plugin:/abs/x.so or NAME=cmd:/abs/prog",
                            name_eq_spec);
    }
    char name[PK_HOOK_NAME_MAX + 2];
    size_t n = (size_t)(eq - name_eq_spec);
    if (n >= sizeof name) {
        n = sizeof name - 1; /* too long: rejected by the name check */
    }
    memcpy(name, name_eq_spec, n);
    name[n] = '\0';
    return pk_hook_registry_add(r, name, eq + 1, err);
}

int pk_hook_registry_add_json(pk_hook_registry *r, const char *json_object_text, pk_error *err) {
    json_t *root = json_loads(json_object_text, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return pk_error_set(err, PK_ERR_INVALID,
                            "hook_registry: expected an object {\"NAME\": \"plugin:/abs/x.so\"}");
    }
    const char *key;
    json_t *val;
    int rc = PK_OK;
    json_object_foreach(root, key, val) {
        if (!json_is_string(val))
            rc = pk_error_set(err, PK_ERR_INVALID, "hook_registry.%s: expected a string", key);
        else
            rc = pk_hook_registry_add(r, key, json_string_value(val), err);
        if (rc != PK_OK)
            break;
    }
    json_decref(root);
    return rc;
}

const char *pk_hook_registry_spec(const pk_hook_registry *r, const char *name) {
    for (size_t i = 0; r && name && i < r->n; i++) {
        if (strcmp(r->e[i].name, name) == 0)
            return r->e[i].spec;
    }
    return NULL;
}

size_t pk_hook_registry_count(const pk_hook_registry *r) {
    return r ? r->n : 0;
}

const char *pk_hook_registry_name(const pk_hook_registry *r, size_t i) {
    return r && i < r->n ? r->e[i].name : NULL;
}
