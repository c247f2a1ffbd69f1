/* The runner's result file (msgpack), written by rank 0 into the job directory. */
#include "pk_runner.h"

#include <msgpack.h>
#include <stdio.h>
#include <string.h>

static void key(msgpack_packer *pk, const char *k) {
    msgpack_pack_str_with_body(pk, k, strlen(k));
}

static void kv_str(msgpack_packer *pk, const char *k, const char *v) {
    key(pk, k);
    msgpack_pack_str_with_body(pk, v, strlen(v));
}

static void kv_f(msgpack_packer *pk, const char *k, double v) {
    key(pk, k);
    msgpack_pack_double(pk, v);
}

static void kv_i(msgpack_packer *pk, const char *k, long long v) {
    key(pk, k);
    msgpack_pack_long_long(pk, v);
}

static void pack_timing(msgpack_packer *pk, const char *k, const pk_timing *t) {
    key(pk, k);
    msgpack_pack_map(pk, 6);
    kv_f(pk, "median_us", t->median_us);
    kv_f(pk, "cv", t->cv);
    kv_f(pk, "min_us", t->min_us);
    kv_f(pk, "mean_us", t->mean_us);
    kv_i(pk, "iters", t->iters);
    kv_i(pk, "warmup_iters", t->warmup_iters);
}

static void pack_trial(msgpack_packer *pk, const pk_trial_verdict *v) {
    msgpack_pack_map(pk, 5);
    kv_i(pk, "passed", v->passed);
    kv_f(pk, "max_abs_err", v->max_abs_err);
    kv_f(pk, "max_rel_err", v->max_rel_err);
    kv_i(pk, "inputs_modified", v->inputs_modified);
    key(pk, "mismatch");
    msgpack_pack_array(pk, (size_t)v->n_mismatch);
    for (int i = 0; i < v->n_mismatch; i++) {
        const pk_rank_mismatch *m = &v->mismatch[i];
        msgpack_pack_map(pk, 5);
        kv_i(pk, "rank", m->rank);
        kv_str(pk, "arg", m->arg);
        kv_i(pk, "index", m->index);
        kv_f(pk, "expected", m->expected);
        kv_f(pk, "got", m->got);
    }
}

int rn_report_write(const char *path, const rn_report *r) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 27);
    kv_i(&pk, "ok", r->ok);
    kv_str(&pk, "error", r->error);
    kv_i(&pk, "error_rank", r->error_rank);
    kv_str(&pk, "gpu_name", r->gpu_name);
    kv_str(&pk, "launcher", r->launcher);
    kv_f(&pk, "setup_ms", r->setup_ms);
    kv_f(&pk, "check_ms", r->check_ms);
    kv_f(&pk, "timing_ms", r->timing_ms);
    kv_f(&pk, "init_ms", r->init_ms);
    kv_f(&pk, "arena_ms", r->arena_ms);
    key(&pk, "trials");
    msgpack_pack_array(&pk, (size_t)r->n_trials);
    for (int i = 0; i < r->n_trials; i++)
        pack_trial(&pk, &r->trials[i]);
    kv_i(&pk, "timed", r->timed);
    pack_timing(&pk, "candidate", &r->candidate);
    pack_timing(&pk, "reference", &r->reference);
    kv_i(&pk, "unsynchronized", r->unsynchronized);
    kv_str(&pk, "unsync_detail", r->unsync_detail);
    kv_i(&pk, "guard_violation", r->guard_violation);
    kv_str(&pk, "guard_detail", r->guard_detail);
    kv_i(&pk, "timed_wrong", r->timed_wrong);
    kv_i(&pk, "timed_inputs_modified", r->timed_inputs_modified);
    kv_i(&pk, "verified_calls", r->verified_calls);
    kv_f(&pk, "verify_ms", r->verify_ms);
    kv_f(&pk, "timing_expect_ms", r->timing_expect_ms);
    kv_f(&pk, "timing_hold_ms", r->timing_hold_ms);
    kv_f(&pk, "teardown_ms", r->teardown_ms);
    kv_i(&pk, "trials_planned", r->trials_planned);
    kv_f(&pk, "lock_wait_ms", r->lock_wait_ms);
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(sb.data, 1, sb.size, f) == sb.size ? 0 : -1;
    if (f && fclose(f))
        rc = -1;
    msgpack_sbuffer_destroy(&sb);
    return rc;
}
