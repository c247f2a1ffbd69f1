/* Drives a running server through the C client (pk_client): a call, 50 pipelined requests
 * matched by id, an episode (reset, a step without code, trajectory, close) and error replies.
 * Usage: c_client_check ENDPOINT PROBLEM. Exit 0 when every check holds. */
#include <stdio.h>
#include <string.h>

#include "pk_client.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static json_t *call(pk_client *c, json_t *req) {
    json_t *rep = NULL;
    pk_error err;
    int rc = pk_client_call(c, req, 60000, &rep, &err);
    CHECK(rc == PK_OK, "call failed: %s", err.message);
    json_decref(req);
    return rep;
}

static const char *error_code(json_t *rep) {
    return json_string_value(json_object_get(json_object_get(rep, "error"), "code"));
}

static void pipelined(pk_client *c) {
    enum { N = 50 };
    int seen[N + 1] = {0};
    uint64_t first = 0;
    pk_error err;
    for (int i = 0; i < N; i++) {
        json_t *req = json_pack("{s:s}", "op", i % 2 ? "hello" : "nope");
        uint64_t id;
        CHECK(pk_client_send(c, req, &id, &err) == PK_OK, "send: %s", err.message);
        if (i == 0)
            first = id;
        json_decref(req);
    }
    for (int i = 0; i < N; i++) {
        json_t *rep;
        if (pk_client_recv(c, 10000, &rep, &err) != PK_OK) {
            CHECK(0, "recv: %s", err.message);
            return;
        }
        long long k = (long long)json_integer_value(json_object_get(rep, "id")) - (long long)first;
        CHECK(k >= 0 && k < N && !seen[k], "unexpected reply id %lld", k);
        if (k >= 0 && k < N) {
            seen[k] = 1;
            if (k % 2)
                CHECK(json_integer_value(json_object_get(rep, "protocol")) == 1, "hello reply");
            else
                CHECK(error_code(rep) && strcmp(error_code(rep), "unknown_op") == 0,
                      "unknown_op reply");
        }
        json_decref(rep);
    }
}

static void episode(pk_client *c, const char *problem) {
    json_t *rep =
        call(c, json_pack("{s:s, s:s, s:i}", "op", "reset", "problem", problem, "max_turns", 1));
    const char *ep = json_string_value(json_object_get(rep, "episode"));
    CHECK(ep && strlen(ep) == 32, "reset gave no episode");
    if (!ep) {
        json_decref(rep);
        return;
    }
    char id[33];
    snprintf(id, sizeof id, "%s", ep);
    json_decref(rep);
    rep = call(c, json_pack("{s:s, s:s, s:s}", "op", "step", "episode", id, "action",
                            "no code in this answer"));
    json_t *info = json_object_get(rep, "info");
    CHECK(strcmp(json_string_value(json_object_get(info, "status")), "format_error") == 0,
          "status");
    CHECK(json_is_true(json_object_get(rep, "truncated")), "one turn: truncated");
    CHECK(json_array_size(json_object_get(info, "returns")) == 1, "returns at the end");
    json_decref(rep);
    rep = call(c, json_pack("{s:s, s:s, s:s}", "op", "step", "episode", id, "action", "x"));
    CHECK(error_code(rep) && strcmp(error_code(rep), "episode_done") == 0, "episode_done");
    json_decref(rep);
    rep = call(c, json_pack("{s:s, s:s}", "op", "trajectory", "episode", id));
    CHECK(json_array_size(json_object_get(rep, "turns")) == 1, "trajectory turns");
    json_decref(rep);
    rep = call(c, json_pack("{s:s, s:s}", "op", "close", "episode", id));
    CHECK(json_is_true(json_object_get(rep, "ok")), "close");
    json_decref(rep);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: c_client_check ENDPOINT PROBLEM\n");
        return 2;
    }
    pk_client *c;
    pk_error err;
    if (pk_client_connect(argv[1], &c, &err) != PK_OK) {
        fprintf(stderr, "connect: %s\n", err.message);
        return 1;
    }
    json_t *rep = call(c, json_pack("{s:s}", "op", "hello"));
    CHECK(json_integer_value(json_object_get(rep, "protocol")) == 1, "hello");
    json_decref(rep);
    pipelined(c);
    episode(c, argv[2]);
    rep = call(c, json_pack("{s:s, s:i}", "op", "get_problem", "problem", 3));
    CHECK(error_code(rep) && strcmp(error_code(rep), "bad_request") == 0, "bad_request");
    json_decref(rep);
    pk_client_close(c);
    if (failures == 0)
        printf("c client: ok\n");
    return failures ? 1 : 0;
}
