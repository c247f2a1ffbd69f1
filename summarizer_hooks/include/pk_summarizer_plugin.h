/* The summarizer plugin ABI, version 1. A plugin is a shared object exporting
 *
 *     const pk_summarizer_plugin *pk_summarizer_plugin_v1(void);
 *
 * pkgym never loads a plugin into the server: a helper process (pk_summarizer_hook_host) dlopens
 * it inside pk_sandbox (no network, read-only file system but a private tmp, limits), calls one
 * hook on one request and prints the result, under a timeout. A plugin that crashes, hangs,
 * returns NULL or invalid UTF-8 costs one turn's hook: the built-in text is used. The operator
 * registers a plugin under a name (pkgym serve --hook NAME=plugin:/abs/x.so); clients choose
 * it by that name.
 *
 * Rules for plugins: return malloc'd UTF-8 text (the host frees it) or NULL to decline; keep no
 * state between calls (every call is a fresh process); write nothing to stdout. The request JSON
 * schemas are in docs/feedback.md. A later ABI gets a new symbol name; version 1 never changes.
 */
#ifndef PK_SUMMARIZER_PLUGIN_H
#define PK_SUMMARIZER_PLUGIN_H

#ifdef __cplusplus
extern "C" {
#endif

#define PK_SUMMARIZER_PLUGIN_ABI_VERSION 1
#define PK_SUMMARIZER_PLUGIN_SYMBOL "pk_summarizer_plugin_v1"

typedef struct pk_summarizer_plugin_request {
    int abi_version;          /* PK_SUMMARIZER_PLUGIN_ABI_VERSION */
    const char *hook;         /* "summarize", "feedback" or "history" */
    const char *request_json; /* the whole request, as a command hook gets it on stdin */
    const char *builtin;      /* what the built-in produces for this request */
} pk_summarizer_plugin_request;

typedef char *(*pk_summarizer_plugin_fn)(const pk_summarizer_plugin_request *req);

typedef struct pk_summarizer_plugin {
    int abi_version;                   /* must be PK_SUMMARIZER_PLUGIN_ABI_VERSION */
    const char *name;                  /* for messages */
    pk_summarizer_plugin_fn summarize; /* NULL: this plugin leaves it to the built-in */
    pk_summarizer_plugin_fn feedback;
    pk_summarizer_plugin_fn history;
} pk_summarizer_plugin;

typedef const pk_summarizer_plugin *(*pk_summarizer_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
