/* Reads the runner's msgpack result file (written by problems/runner/report.c). */
#include "pk_harness_internal.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

static const msgpack_object *get(const msgpack_object *map, const char *key) {
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
            memcmp(kv->key.via.str.ptr, key, kv->key.via.str.size) == 0)
            return &kv->val;
    }
    return NULL;
}

static double num(const msgpack_object *map, const char *key) {
    const msgpack_object *o = get(map, key);
    if (!o)
        return 0;
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return o->via.f64;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return (double)o->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return (double)o->via.i64;
    default:
        return 0;
    }
}

static void str(const msgpack_object *map, const char *key, char *dst, size_t cap) {
    const msgpack_object *o = get(map, key);
    dst[0] = 0;
    if (o && o->type == MSGPACK_OBJECT_STR) {
        size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
        memcpy(dst, o->via.str.ptr, n);
        dst[n] = 0;
    }
}

static void timing(const msgpack_object *o, pk_timing *t) {
    t->median_us = num(o, "median_us");
    t->cv = num(o, "cv");
    t->min_us = num(o, "min_us");
    t->mean_us = num(o, "mean_us");
    t->iters = (int)num(o, "iters");
    t->warmup_iters = (int)num(o, "warmup_iters");
}

static void trial(const msgpack_object *o, pk_trial_verdict *v) {
    memset(v, 0, sizeof *v);
    v->passed = num(o, "passed") != 0;
    v->max_abs_err = num(o, "max_abs_err");
    v->max_rel_err = num(o, "max_rel_err");
    v->inputs_modified = num(o, "inputs_modified") != 0;
    const msgpack_object *mm = get(o, "mismatch");
    if (!mm || mm->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t i = 0; i < mm->via.array.size && i < PK_EVAL_MAX_RANKS; i++) {
        const msgpack_object *m = &mm->via.array.ptr[i];
        pk_rank_mismatch *x = &v->mismatch[v->n_mismatch++];
        x->rank = (int)num(m, "rank");
        str(m, "arg", x->arg, sizeof x->arg);
        x->index = (long long)num(m, "index");
        x->expected = num(m, "expected");
        x->got = num(m, "got");
    }
}

int pk_run_result_read(const char *path, pk_eval_result *res, pk_run_report *rep, pk_error *err) {
    char *data = NULL;
    size_t len = 0;
    int rc = pk_read_file_untrusted(path, 64u << 20, &data, &len, err); /* in the work dir */
    if (rc)
        return rc;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (msgpack_unpack_next(&up, data, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&up);
        free(data);
        return pk_error_set(err, PK_ERR_INVALID, "%s: not a runner result", path);
    }
    const msgpack_object *m = &up.data;
    memset(rep, 0, sizeof *rep);
    rep->ok = num(m, "ok") != 0;
    rep->error_rank = (int)num(m, "error_rank");
    rep->timed = num(m, "timed") != 0;
    rep->unsynchronized = num(m, "unsynchronized") != 0;
    str(m, "error", rep->error, sizeof rep->error);
    str(m, "unsync_detail", rep->unsync_detail, sizeof rep->unsync_detail);
    rep->guard_violation = num(m, "guard_violation") != 0;
    str(m, "guard_detail", rep->guard_detail, sizeof rep->guard_detail);
    rep->timed_wrong = num(m, "timed_wrong") != 0;
    rep->timed_inputs_modified = num(m, "timed_inputs_modified") != 0;
    rep->verified_calls = (int)num(m, "verified_calls");
    rep->verify_ms = num(m, "verify_ms");
    rep->timing_expect_ms = num(m, "timing_expect_ms");
    rep->timing_hold_ms = num(m, "timing_hold_ms");
    rep->teardown_ms = num(m, "teardown_ms");
    rep->lock_wait_ms = num(m, "lock_wait_ms");
    rep->trials_planned = (int)num(m, "trials_planned");
    str(m, "gpu_name", rep->gpu_name, sizeof rep->gpu_name);
    rep->setup_ms = num(m, "setup_ms");
    rep->check_ms = num(m, "check_ms");
    rep->timing_ms = num(m, "timing_ms");
    rep->init_ms = num(m, "init_ms");
    rep->arena_ms = num(m, "arena_ms");
    const msgpack_object *tr = get(m, "trials");
    res->n_trials = 0;
    for (uint32_t i = 0;
         tr && tr->type == MSGPACK_OBJECT_ARRAY && i < tr->via.array.size && i < PK_EVAL_MAX_TRIALS;
         i++)
        trial(&tr->via.array.ptr[i], &res->trials[res->n_trials++]);
    timing(get(m, "candidate"), &res->candidate);
    timing(get(m, "reference"), &res->reference);
    msgpack_unpacked_destroy(&up);
    free(data);
    return PK_OK;
}
