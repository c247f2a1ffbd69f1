/* The broker <-> worker messages (pk_wire.h). */
#include <stdlib.h>
#include <string.h>

#include "pk_client.h"
#include "pk_mp.h"
#include "pk_wire.h"
#include "pk_protocol.h" /* pk_msgpack_check: the frame pre-check the server uses */

static const char *const type_names[] = {"", "ready", "hb", "job", "result", "drain", "bye"};
static const char *const code_names[] = {"ok", "harness_error", "missing_problem", "bad_job",
                                         "refused"};

const char *pk_wire_type_name(int type) {
    return type > 0 && type < (int)(sizeof type_names / sizeof *type_names) ? type_names[type]
                                                                            : "unknown";
}

const char *pk_wire_code_name(int code) {
    return code >= 0 && code < PK_WIRE_CODE_COUNT ? code_names[code] : "unknown";
}

static int nomem(int bad) {
    return bad ? PK_ERR_NOMEM : PK_OK;
}

int pk_wire_pack_simple(msgpack_sbuffer *sb, int type) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    return nomem(msgpack_pack_map(&pk, 1) || pk_mp_kv_str(&pk, "t", pk_wire_type_name(type)));
}

int pk_wire_pack_heartbeat(msgpack_sbuffer *sb, const json_t *load) {
    if (!load)
        return pk_wire_pack_simple(sb, PK_WIRE_HEARTBEAT);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    return nomem(msgpack_pack_map(&pk, 2) || pk_mp_kv_str(&pk, "t", "hb") ||
                 pk_mp_key(&pk, "load") || pk_msgpack_pack_json(&pk, load));
}

static int pack_baseline(msgpack_packer *pk, const pk_wire_baseline *b) {
    return pk_mp_key(pk, "baseline") || msgpack_pack_map(pk, 5) ||
           pk_mp_kv_str(pk, "device", b->device) || pk_mp_kv_str(pk, "driver", b->driver) ||
           pk_mp_kv_str(pk, "nccl", b->nccl) || pk_mp_kv_int(pk, "world", b->world) ||
           pk_mp_kv_double(pk, "us", b->us);
}

static int unpack_baseline(const msgpack_object *msg, pk_wire_baseline *b) {
    const msgpack_object *o = pk_mp_get(msg, "baseline");
    memset(b, 0, sizeof *b);
    if (!o)
        return 0;
    return pk_mp_get_buf(o, "device", b->device, sizeof b->device) ||
           pk_mp_get_buf(o, "driver", b->driver, sizeof b->driver) ||
           pk_mp_get_buf(o, "nccl", b->nccl, sizeof b->nccl) ||
           pk_mp_get_int(o, "world", &b->world) || pk_mp_get_double(o, "us", &b->us);
}

int pk_wire_pack_job(msgpack_sbuffer *sb, const pk_wire_job *j) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    const pk_eval_opts *o = &j->opts;
    return nomem(msgpack_pack_map(&pk, 9) || pk_mp_kv_str(&pk, "t", "job") ||
                 pk_mp_kv_uint(&pk, "id", j->id) || pk_mp_kv_int(&pk, "attempt", j->attempt) ||
                 pk_mp_kv_str(&pk, "kind", j->kind == PK_JOB_NOOP ? "noop" : "eval") ||
                 pk_mp_kv_str(&pk, "problem", j->problem) ||
                 pk_mp_kv_str(&pk, "version", j->version) ||
                 pk_mp_kv_str(&pk, "source", j->source) || pk_mp_key(&pk, "opts") ||
                 msgpack_pack_map(&pk, 11) || pk_mp_kv_int(&pk, "trials", o->trials) ||
                 pk_mp_kv_uint(&pk, "seed", o->seed) ||
                 pk_mp_kv_int(&pk, "compile_timeout_ms", o->compile_timeout_ms) ||
                 pk_mp_kv_int(&pk, "run_timeout_ms", o->run_timeout_ms) ||
                 pk_mp_kv_bool(&pk, "skip_timing", o->skip_timing) ||
                 pk_mp_kv_bool(&pk, "reference_as_candidate", o->reference_as_candidate) ||
                 pk_mp_kv_int(&pk, "world_size", o->world_size) ||
                 pk_mp_kv_double(&pk, "baseline_us", o->baseline_us) ||
                 pk_mp_kv_double(&pk, "baseline_cv", o->baseline_cv) ||
                 pk_mp_kv_int(&pk, "baseline_iters", o->baseline_iters) ||
                 pk_mp_kv_double(&pk, "baseline_measured_at", o->baseline_measured_at) ||
                 pack_baseline(&pk, &j->baseline));
}

void pk_wire_job_free(pk_wire_job *j) {
    free(j->problem);
    free(j->version);
    free(j->source);
    j->problem = j->version = j->source = NULL;
}

int pk_wire_unpack_job(const msgpack_object *msg, pk_wire_job *j, pk_error *err) {
    memset(j, 0, sizeof *j);
    const msgpack_object *kind = pk_mp_get(msg, "kind");
    const msgpack_object *o = pk_mp_get(msg, "opts");
    int bad = pk_mp_get_u64(msg, "id", &j->id) || pk_mp_get_int(msg, "attempt", &j->attempt) ||
              pk_mp_get_dup(msg, "problem", &j->problem) ||
              pk_mp_get_dup(msg, "version", &j->version) ||
              pk_mp_get_dup(msg, "source", &j->source) || unpack_baseline(msg, &j->baseline);
    if (!bad && o)
        bad = o->type != MSGPACK_OBJECT_MAP || pk_mp_get_int(o, "trials", &j->opts.trials) ||
              pk_mp_get_u64(o, "seed", &j->opts.seed) ||
              pk_mp_get_int(o, "compile_timeout_ms", &j->opts.compile_timeout_ms) ||
              pk_mp_get_int(o, "run_timeout_ms", &j->opts.run_timeout_ms) ||
              pk_mp_get_bool(o, "skip_timing", &j->opts.skip_timing) ||
              pk_mp_get_bool(o, "reference_as_candidate", &j->opts.reference_as_candidate) ||
              pk_mp_get_int(o, "world_size", &j->opts.world_size) ||
              pk_mp_get_double(o, "baseline_us", &j->opts.baseline_us) ||
              pk_mp_get_double(o, "baseline_cv", &j->opts.baseline_cv) ||
              pk_mp_get_int(o, "baseline_iters", &j->opts.baseline_iters) ||
              pk_mp_get_double(o, "baseline_measured_at", &j->opts.baseline_measured_at);
    if (!bad)
        j->kind = pk_mp_str_eq(kind, "noop") ? PK_JOB_NOOP : PK_JOB_EVAL;
    if (!bad && (!kind || (j->kind == PK_JOB_EVAL && !pk_mp_str_eq(kind, "eval"))))
        bad = 1;
    if (!bad && j->kind == PK_JOB_EVAL && (!j->problem || !j->version || !j->source))
        bad = 1;
    if (bad) {
        pk_wire_job_free(j);
        return pk_error_set(err, PK_ERR_INVALID,
                            "job: a field is missing or has the wrong type (needs id, kind, "
                            "problem, version, source)");
    }
    return PK_OK;
}

int pk_wire_pack_result(msgpack_sbuffer *sb, const pk_wire_result *r) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    int with_result = r->code == PK_WIRE_OK;
    return nomem(
        msgpack_pack_map(&pk, 7 + (with_result ? 1 : 0)) || pk_mp_kv_str(&pk, "t", "result") ||
        pk_mp_kv_uint(&pk, "id", r->id) || pk_mp_kv_int(&pk, "attempt", r->attempt) ||
        pk_mp_kv_str(&pk, "code", pk_wire_code_name(r->code)) ||
        pk_mp_kv_str(&pk, "message", r->message) ||
        pk_mp_kv_double(&pk, "worker_ms", r->worker_ms) || pack_baseline(&pk, &r->baseline) ||
        (with_result && (pk_mp_key(&pk, "result") || pk_wire_pack_eval_result(&pk, &r->result))));
}

void pk_wire_result_free(pk_wire_result *r) {
    pk_eval_result_free(&r->result);
}

int pk_wire_unpack_result(const msgpack_object *msg, pk_wire_result *r, pk_error *err) {
    memset(r, 0, sizeof *r);
    pk_eval_result_init(&r->result);
    char code[32] = "";
    int bad = pk_mp_get_u64(msg, "id", &r->id) || pk_mp_get_int(msg, "attempt", &r->attempt) ||
              pk_mp_get_buf(msg, "code", code, sizeof code) ||
              pk_mp_get_buf(msg, "message", r->message, sizeof r->message) ||
              pk_mp_get_double(msg, "worker_ms", &r->worker_ms) ||
              unpack_baseline(msg, &r->baseline) || !pk_mp_get(msg, "id");
    r->code = -1;
    for (int i = 0; !bad && i < PK_WIRE_CODE_COUNT; i++)
        if (strcmp(code, code_names[i]) == 0)
            r->code = i;
    if (bad || r->code < 0)
        return pk_error_set(err, PK_ERR_INVALID,
                            "result: a field is missing or has the wrong type (code '%s')", code);
    if (r->code == PK_WIRE_OK)
        return pk_wire_unpack_eval_result(pk_mp_get(msg, "result"), &r->result, err);
    return PK_OK;
}

static int reserved_key(const char *key) {
    return strcmp(key, "t") == 0 || strcmp(key, "protocol") == 0;
}

int pk_wire_pack_ready(msgpack_sbuffer *sb, const json_t *info) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    size_t n = 0;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)info, key, val) n += !reserved_key(key);
    int bad = msgpack_pack_map(&pk, n + 2) || pk_mp_kv_str(&pk, "t", "ready") ||
              pk_mp_kv_int(&pk, "protocol", PK_WIRE_PROTOCOL);
    json_object_foreach((json_t *)info, key, val) {
        if (!bad && !reserved_key(key))
            bad = pk_mp_key(&pk, key) || pk_msgpack_pack_json(&pk, val);
    }
    return nomem(bad);
}

int pk_wire_unpack_ready(const msgpack_object *msg, json_t **info, pk_error *err) {
    *info = NULL;
    int protocol = 0;
    if (pk_mp_get_int(msg, "protocol", &protocol) || protocol != PK_WIRE_PROTOCOL)
        return pk_error_set(err, PK_ERR_UNSUPPORTED,
                            "ready: worker speaks protocol %d, this broker %d (same pkgym "
                            "version on every node)",
                            protocol, PK_WIRE_PROTOCOL);
    json_t *j = NULL;
    int rc = pk_json_from_msgpack(msg, "ready", 16, &j, err);
    if (rc)
        return rc;
    json_t *cap = json_object_get(j, "capacity");
    if (!json_is_string(json_object_get(j, "name")) || !json_is_array(json_object_get(j, "gpus")) ||
        !json_is_array(json_object_get(j, "problems")) || !json_is_object(cap) ||
        !json_is_integer(json_object_get(cap, "max_jobs")) ||
        !json_is_array(json_object_get(j, "nvlink_domains")) ||
        !json_is_object(json_object_get(j, "host_info"))) {
        json_decref(j);
        return pk_error_set(err, PK_ERR_INVALID,
                            "ready: needs name, gpus, nvlink_domains, host_info, problems and "
                            "capacity.max_jobs");
    }
    json_object_del(j, "t");
    *info = j;
    return PK_OK;
}

int pk_wire_decode(const void *data, size_t len, msgpack_unpacked *out, int *type, pk_error *err) {
    msgpack_unpacked_init(out);
    *type = PK_WIRE_NONE;
    size_t off = 0;
    if (len > PK_WIRE_MAX_FRAME)
        return pk_error_set(err, PK_ERR_INVALID, "frame of %zu bytes is over the limit", len);
    /* Declared lengths must fit in the frame (a 5-byte array32 header must not make msgpack-c
     * allocate gigabytes) and nesting is bounded, before msgpack-c unpacks anything. */
    if (pk_msgpack_check(data, len, 16, err) != PK_OK)
        return PK_ERR_INVALID;
    if (msgpack_unpack_next(out, data, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len ||
        out->data.type != MSGPACK_OBJECT_MAP)
        return pk_error_set(err, PK_ERR_INVALID, "frame is not one msgpack map");
    const msgpack_object *t = pk_mp_get(&out->data, "t");
    for (int i = 1; i < (int)(sizeof type_names / sizeof *type_names); i++)
        if (pk_mp_str_eq(t, type_names[i]))
            *type = i;
    if (*type == PK_WIRE_NONE)
        return pk_error_set(err, PK_ERR_INVALID, "frame has no known message type 't'");
    return PK_OK;
}
