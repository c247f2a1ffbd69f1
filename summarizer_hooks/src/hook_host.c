/* pk_summarizer_hook_host <plugin.so> <hook>: runs one plugin hook outside the server.
 *
 * Reads the request JSON on stdin, dlopens the plugin, checks its ABI version, calls the hook
 * and prints {"text": "..."} (exit 0). A plugin that does not provide the hook or returns NULL:
 * exit 3 (the built-in is used, no failure). Load or ABI errors: {"error": "..."}, exit 2. A
 * crash or hang of the plugin is this process's, and the server only sees it end. */
#include <dlfcn.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_summarizer_plugin.h"

#define PK_EXIT_LOAD_ERROR 2
#define PK_EXIT_DECLINED 3

static int host_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int host_fail(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *o = json_pack("{s:s}", "error", msg);
    if (o) {
        json_dumpf(o, stdout, JSON_COMPACT);
        json_decref(o);
    }
    return PK_EXIT_LOAD_ERROR;
}

static char *host_read_stdin(void) {
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, stdin);
        len += n;
        if (n == 0) {
            buf[len] = '\0';
            return buf;
        }
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    return NULL;
}

static pk_summarizer_plugin_fn host_pick(const pk_summarizer_plugin *p, const char *hook) {
    if (strcmp(hook, "summarize") == 0)
        return p->summarize;
    if (strcmp(hook, "feedback") == 0)
        return p->feedback;
    return strcmp(hook, "history") == 0 ? p->history : NULL;
}

/* Loads the plugin and calls the hook; returns the exit code, *text on success. */
static int host_call(const char *path, const char *hook, const char *request, const char *builtin,
                     void **so, char **text) {
    *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*so)
        return host_fail("dlopen: %s", dlerror());
    pk_summarizer_plugin_entry_fn entry;
    *(void **)&entry = dlsym(*so, PK_SUMMARIZER_PLUGIN_SYMBOL);
    const pk_summarizer_plugin *plugin = entry ? entry() : NULL;
    if (!plugin)
        return host_fail("no " PK_SUMMARIZER_PLUGIN_SYMBOL "() in %s, or it returned NULL", path);
    if (plugin->abi_version != PK_SUMMARIZER_PLUGIN_ABI_VERSION) {
        return host_fail("plugin ABI version %d, the host speaks version %d", plugin->abi_version,
                         PK_SUMMARIZER_PLUGIN_ABI_VERSION);
    }
    pk_summarizer_plugin_fn fn = host_pick(plugin, hook);
    pk_summarizer_plugin_request pr = {PK_SUMMARIZER_PLUGIN_ABI_VERSION, hook, request, builtin};
    *text = fn ? fn(&pr) : NULL;
    return *text ? 0 : PK_EXIT_DECLINED;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return host_fail("usage: pk_summarizer_hook_host <plugin.so> <hook>");
    char *request = host_read_stdin();
    json_t *req = request ? json_loads(request, 0, NULL) : NULL;
    if (!req) {
        free(request);
        return host_fail("could not read the request JSON");
    }
    /* A crashing plugin must die of its signal, which the server reports as a crash, even when
     * a sanitizer runtime installed handlers that would turn it into an exit code. */
    static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        signal(crash_signals[i], SIG_DFL);
    json_t *builtin = json_object_get(req, "builtin");
    void *so = NULL;
    char *text = NULL;
    int rc = host_call(argv[1], argv[2], request,
                       json_is_string(builtin) ? json_string_value(builtin) : "", &so, &text);
    if (rc == 0) {
        json_t *answer = json_pack("{s:s}", "text", text);
        if (answer) {
            json_dumpf(answer, stdout, JSON_COMPACT);
            json_decref(answer);
            rc = fflush(stdout) == 0 ? 0 : 1;
        } else {
            rc = host_fail("the plugin returned text that is not valid UTF-8");
        }
    }
    free(text);
    json_decref(req);
    free(request);
    if (so)
        dlclose(so);
    return rc;
}
