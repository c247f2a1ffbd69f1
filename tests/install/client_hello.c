/* Built against the installed C client (pkg-config pkgym-client): hello, then a reset and one
 * step of a format error, printing what the server said. */
#include <stdio.h>
#include <string.h>

#include <pk_client.h>

static json_t *call(pk_client *c, json_t *req) {
    json_t *reply = NULL;
    pk_error err;
    if (pk_client_call(c, req, 30000, &reply, &err) != PK_OK) {
        fprintf(stderr, "call failed: %s\n", err.message);
        reply = NULL;
    } else if (!json_is_true(json_object_get(reply, "ok"))) {
        fprintf(stderr, "error reply: %s\n", json_dumps(reply, JSON_COMPACT));
        json_decref(reply);
        reply = NULL;
    }
    json_decref(req);
    return reply;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: client_hello ENDPOINT\n");
        return 2;
    }
    pk_client *c;
    pk_error err;
    if (pk_client_connect(argv[1], &c, &err) != PK_OK) {
        fprintf(stderr, "connect: %s\n", err.message);
        return 1;
    }
    json_t *hello = call(c, json_pack("{s:s}", "op", "hello"));
    json_t *reset = call(c, json_pack("{s:s, s:s}", "op", "reset", "problem", "selftest/scale"));
    const char *ep = reset ? json_string_value(json_object_get(reset, "episode")) : NULL;
    json_t *step = ep ? call(c, json_pack("{s:s, s:s, s:s}", "op", "step", "episode", ep, "action",
                                          "no code at all"))
                      : NULL;
    int ok = hello && step;
    if (ok)
        printf("server %s, %lld problems, step status %s\n",
               json_string_value(json_object_get(json_object_get(hello, "server"), "version")),
               (long long)json_integer_value(json_object_get(hello, "problems")),
               json_string_value(json_object_get(json_object_get(step, "info"), "status")));
    json_decref(hello);
    json_decref(reset);
    json_decref(step);
    pk_client_close(c);
    return ok ? 0 : 1;
}
