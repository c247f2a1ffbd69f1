/* pk_eval_result <-> msgpack, every field at full precision (the JSON form rounds doubles to
 * 10 digits; a result that crossed the wire must score exactly as a local one). */
#include <stdio.h>
#include <string.h>

#include "pk_mp.h"
#include "pk_wire.h"

static int pack_timing(msgpack_packer *pk, const char *key, const pk_timing *t) {
    return pk_mp_key(pk, key) || msgpack_pack_map(pk, 6) ||
           pk_mp_kv_double(pk, "median_us", t->median_us) || pk_mp_kv_double(pk, "cv", t->cv) ||
           pk_mp_kv_double(pk, "min_us", t->min_us) || pk_mp_kv_double(pk, "mean_us", t->mean_us) ||
           pk_mp_kv_int(pk, "iters", t->iters) || pk_mp_kv_int(pk, "warmup_iters", t->warmup_iters);
}

static int pack_trial(msgpack_packer *pk, const pk_trial_verdict *t) {
    int n = t->n_mismatch < 0                   ? 0
            : t->n_mismatch > PK_EVAL_MAX_RANKS ? PK_EVAL_MAX_RANKS
                                                : t->n_mismatch;
    int bad = msgpack_pack_map(pk, 6) || pk_mp_kv_bool(pk, "passed", t->passed) ||
              pk_mp_kv_double(pk, "max_abs_err", t->max_abs_err) ||
              pk_mp_kv_double(pk, "max_rel_err", t->max_rel_err) ||
              pk_mp_kv_bool(pk, "inputs_modified", t->inputs_modified) ||
              pk_mp_kv_int(pk, "n_mismatch", t->n_mismatch) || pk_mp_key(pk, "mismatch") ||
              msgpack_pack_array(pk, (size_t)n);
    for (int i = 0; !bad && i < n; i++) {
        const pk_rank_mismatch *m = &t->mismatch[i];
        bad = msgpack_pack_map(pk, 5) || pk_mp_kv_int(pk, "rank", m->rank) ||
              pk_mp_kv_str(pk, "arg", m->arg) || pk_mp_kv_int(pk, "index", m->index) ||
              pk_mp_kv_double(pk, "expected", m->expected) || pk_mp_kv_double(pk, "got", m->got);
    }
    return bad;
}

static int pack_stages(msgpack_packer *pk, const pk_stage_times *s) {
    return pk_mp_key(pk, "stages") || msgpack_pack_map(pk, 16) ||
           pk_mp_kv_double(pk, "prepare_ms", s->prepare_ms) ||
           pk_mp_kv_double(pk, "compile_ms", s->compile_ms) ||
           pk_mp_kv_double(pk, "symbols_ms", s->symbols_ms) ||
           pk_mp_kv_double(pk, "run_ms", s->run_ms) ||
           pk_mp_kv_double(pk, "total_ms", s->total_ms) ||
           pk_mp_kv_double(pk, "run_setup_ms", s->run_setup_ms) ||
           pk_mp_kv_double(pk, "run_check_ms", s->run_check_ms) ||
           pk_mp_kv_double(pk, "run_timing_ms", s->run_timing_ms) ||
           pk_mp_kv_double(pk, "run_init_ms", s->run_init_ms) ||
           pk_mp_kv_double(pk, "run_arena_ms", s->run_arena_ms) ||
           pk_mp_kv_double(pk, "run_warm_ms", s->run_warm_ms) ||
           pk_mp_kv_double(pk, "run_verify_ms", s->run_verify_ms) ||
           pk_mp_kv_double(pk, "run_teardown_ms", s->run_teardown_ms) ||
           pk_mp_kv_double(pk, "run_lock_wait_ms", s->run_lock_wait_ms) ||
           pk_mp_kv_double(pk, "run_timing_expect_ms", s->run_timing_expect_ms) ||
           pk_mp_kv_double(pk, "run_timing_hold_ms", s->run_timing_hold_ms);
}

static int pack_baseline(msgpack_packer *pk, const pk_baseline_used *b) {
    return pk_mp_key(pk, "baseline") || msgpack_pack_map(pk, 5) ||
           pk_mp_kv_double(pk, "us", b->us) || pk_mp_kv_double(pk, "cv", b->cv) ||
           pk_mp_kv_int(pk, "iters", b->iters) ||
           pk_mp_kv_double(pk, "measured_at", b->measured_at) ||
           pk_mp_kv_bool(pk, "cached", b->cached);
}

static int unpack_baseline(const msgpack_object *o, pk_baseline_used *b) {
    if (!o)
        return 0;
    return pk_mp_get_double(o, "us", &b->us) || pk_mp_get_double(o, "cv", &b->cv) ||
           pk_mp_get_int(o, "iters", &b->iters) ||
           pk_mp_get_double(o, "measured_at", &b->measured_at) ||
           pk_mp_get_bool(o, "cached", &b->cached);
}

int pk_wire_pack_eval_result(msgpack_packer *pk, const pk_eval_result *r) {
    int n_checks = r->n_checks < 0                    ? 0
                   : r->n_checks > PK_EVAL_MAX_CHECKS ? PK_EVAL_MAX_CHECKS
                                                      : r->n_checks;
    int n_trials = r->n_trials < 0                    ? 0
                   : r->n_trials > PK_EVAL_MAX_TRIALS ? PK_EVAL_MAX_TRIALS
                                                      : r->n_trials;
    int n_hung = r->n_hung < 0 ? 0 : r->n_hung > PK_EVAL_MAX_RANKS ? PK_EVAL_MAX_RANKS : r->n_hung;
    int bad = msgpack_pack_map(pk, 23) || pk_mp_kv_str(pk, "status", pk_status_name(r->status)) ||
              pk_mp_kv_str(pk, "reason", r->reason) || pk_mp_kv_str(pk, "rule", r->rule) ||
              pk_mp_key(pk, "checks") || msgpack_pack_array(pk, (size_t)n_checks);
    for (int i = 0; !bad && i < n_checks; i++)
        bad = msgpack_pack_map(pk, 3) || pk_mp_kv_str(pk, "name", r->checks[i].name) ||
              pk_mp_kv_bool(pk, "passed", r->checks[i].passed) ||
              pk_mp_kv_str(pk, "detail", r->checks[i].detail);
    bad = bad || pk_mp_key(pk, "trials") || msgpack_pack_array(pk, (size_t)n_trials);
    for (int i = 0; !bad && i < n_trials; i++)
        bad = pack_trial(pk, &r->trials[i]);
    bad = bad || pk_mp_kv_bool(pk, "has_timing", r->has_timing) ||
          pack_timing(pk, "candidate", &r->candidate) ||
          pack_timing(pk, "reference", &r->reference) ||
          pk_mp_kv_double(pk, "speedup", r->speedup) ||
          pk_mp_kv_double(pk, "roofline_floor_us", r->roofline_floor_us) ||
          pk_mp_kv_double(pk, "roofline_no_overlap_us", r->roofline_no_overlap_us) ||
          pk_mp_kv_int(pk, "trials_planned", r->trials_planned) ||
          pack_baseline(pk, &r->baseline) || pk_mp_kv_int(pk, "world_size", r->world_size) ||
          pk_mp_key(pk, "hung_ranks") || msgpack_pack_array(pk, (size_t)n_hung);
    for (int i = 0; !bad && i < n_hung; i++)
        bad = msgpack_pack_int(pk, r->hung_ranks[i]);
    return bad || pk_mp_kv_int(pk, "exit_code", r->exit_code) ||
           pk_mp_kv_int(pk, "signal", r->signal) || pk_mp_kv_str(pk, "launcher", r->launcher) ||
           pk_mp_kv_str(pk, "gpu_name", r->gpu_name) || pack_stages(pk, &r->stages) ||
           pk_mp_kv_str(pk, "compile_log", r->compile_log) ||
           pk_mp_kv_str(pk, "stdout_tail", r->stdout_tail) ||
           pk_mp_kv_str(pk, "stderr_tail", r->stderr_tail);
}

static int unpack_timing(const msgpack_object *o, pk_timing *t) {
    if (!o)
        return 0;
    return pk_mp_get_double(o, "median_us", &t->median_us) || pk_mp_get_double(o, "cv", &t->cv) ||
           pk_mp_get_double(o, "min_us", &t->min_us) ||
           pk_mp_get_double(o, "mean_us", &t->mean_us) || pk_mp_get_int(o, "iters", &t->iters) ||
           pk_mp_get_int(o, "warmup_iters", &t->warmup_iters);
}

static int unpack_trial(const msgpack_object *o, pk_trial_verdict *t) {
    if (o->type != MSGPACK_OBJECT_MAP)
        return -1;
    int bad = pk_mp_get_bool(o, "passed", &t->passed) ||
              pk_mp_get_double(o, "max_abs_err", &t->max_abs_err) ||
              pk_mp_get_double(o, "max_rel_err", &t->max_rel_err) ||
              pk_mp_get_bool(o, "inputs_modified", &t->inputs_modified) ||
              pk_mp_get_int(o, "n_mismatch", &t->n_mismatch);
    const msgpack_object *mm = pk_mp_get(o, "mismatch");
    if (bad || (mm && mm->type != MSGPACK_OBJECT_ARRAY))
        return -1;
    for (uint32_t i = 0; mm && i < mm->via.array.size && i < PK_EVAL_MAX_RANKS; i++) {
        const msgpack_object *m = &mm->via.array.ptr[i];
        pk_rank_mismatch *x = &t->mismatch[i];
        int64_t index = -1;
        if (m->type != MSGPACK_OBJECT_MAP || pk_mp_get_int(m, "rank", &x->rank) ||
            pk_mp_get_buf(m, "arg", x->arg, sizeof x->arg) || pk_mp_get_i64(m, "index", &index) ||
            pk_mp_get_double(m, "expected", &x->expected) || pk_mp_get_double(m, "got", &x->got))
            return -1;
        x->index = index;
    }
    if (t->n_mismatch < 0 || t->n_mismatch > PK_EVAL_MAX_RANKS)
        return -1;
    return 0;
}

static int unpack_stages(const msgpack_object *s, pk_stage_times *t) {
    if (!s)
        return 0;
    return pk_mp_get_double(s, "prepare_ms", &t->prepare_ms) ||
           pk_mp_get_double(s, "compile_ms", &t->compile_ms) ||
           pk_mp_get_double(s, "symbols_ms", &t->symbols_ms) ||
           pk_mp_get_double(s, "run_ms", &t->run_ms) ||
           pk_mp_get_double(s, "total_ms", &t->total_ms) ||
           pk_mp_get_double(s, "run_setup_ms", &t->run_setup_ms) ||
           pk_mp_get_double(s, "run_check_ms", &t->run_check_ms) ||
           pk_mp_get_double(s, "run_timing_ms", &t->run_timing_ms) ||
           pk_mp_get_double(s, "run_init_ms", &t->run_init_ms) ||
           pk_mp_get_double(s, "run_arena_ms", &t->run_arena_ms) ||
           pk_mp_get_double(s, "run_warm_ms", &t->run_warm_ms) ||
           pk_mp_get_double(s, "run_verify_ms", &t->run_verify_ms) ||
           pk_mp_get_double(s, "run_teardown_ms", &t->run_teardown_ms) ||
           pk_mp_get_double(s, "run_lock_wait_ms", &t->run_lock_wait_ms) ||
           pk_mp_get_double(s, "run_timing_expect_ms", &t->run_timing_expect_ms) ||
           pk_mp_get_double(s, "run_timing_hold_ms", &t->run_timing_hold_ms);
}

static int unpack_lists(const msgpack_object *o, pk_eval_result *r) {
    const msgpack_object *checks = pk_mp_get(o, "checks");
    const msgpack_object *trials = pk_mp_get(o, "trials");
    const msgpack_object *hung = pk_mp_get(o, "hung_ranks");
    if ((checks && checks->type != MSGPACK_OBJECT_ARRAY) ||
        (trials && trials->type != MSGPACK_OBJECT_ARRAY) ||
        (hung && hung->type != MSGPACK_OBJECT_ARRAY))
        return -1;
    for (uint32_t i = 0; checks && i < checks->via.array.size && i < PK_EVAL_MAX_CHECKS; i++) {
        const msgpack_object *c = &checks->via.array.ptr[i];
        pk_check_result *x = &r->checks[r->n_checks];
        if (c->type != MSGPACK_OBJECT_MAP || pk_mp_get_buf(c, "name", x->name, sizeof x->name) ||
            pk_mp_get_bool(c, "passed", &x->passed) ||
            pk_mp_get_buf(c, "detail", x->detail, sizeof x->detail))
            return -1;
        r->n_checks++;
    }
    for (uint32_t i = 0; trials && i < trials->via.array.size && i < PK_EVAL_MAX_TRIALS; i++) {
        if (unpack_trial(&trials->via.array.ptr[i], &r->trials[i]))
            return -1;
        r->n_trials++;
    }
    for (uint32_t i = 0; hung && i < hung->via.array.size && i < PK_EVAL_MAX_RANKS; i++) {
        const msgpack_object *h = &hung->via.array.ptr[i];
        if (h->type != MSGPACK_OBJECT_POSITIVE_INTEGER || h->via.u64 > 1u << 20)
            return -1;
        r->hung_ranks[r->n_hung++] = (int)h->via.u64;
    }
    return 0;
}

int pk_wire_unpack_eval_result(const msgpack_object *o, pk_eval_result *r, pk_error *err) {
    pk_eval_result_init(r);
    char name[32] = "";
    int status = -1;
    if (o && o->type == MSGPACK_OBJECT_MAP && pk_mp_get_buf(o, "status", name, sizeof name) == 0)
        status = pk_status_from_name(name);
    if (status < 0 || status >= PK_STATUS_COUNT)
        return pk_error_set(err, PK_ERR_INVALID, "result: missing or unknown status");
    r->status = (pk_status)status;
    int bad = pk_mp_get_buf(o, "reason", r->reason, sizeof r->reason) ||
              pk_mp_get_buf(o, "rule", r->rule, sizeof r->rule) || unpack_lists(o, r) ||
              pk_mp_get_bool(o, "has_timing", &r->has_timing) ||
              unpack_timing(pk_mp_get(o, "candidate"), &r->candidate) ||
              unpack_timing(pk_mp_get(o, "reference"), &r->reference) ||
              pk_mp_get_double(o, "speedup", &r->speedup) ||
              pk_mp_get_double(o, "roofline_floor_us", &r->roofline_floor_us) ||
              pk_mp_get_double(o, "roofline_no_overlap_us", &r->roofline_no_overlap_us) ||
              pk_mp_get_int(o, "trials_planned", &r->trials_planned) ||
              unpack_baseline(pk_mp_get(o, "baseline"), &r->baseline) ||
              pk_mp_get_int(o, "world_size", &r->world_size) ||
              pk_mp_get_int(o, "exit_code", &r->exit_code) ||
              pk_mp_get_int(o, "signal", &r->signal) ||
              pk_mp_get_buf(o, "launcher", r->launcher, sizeof r->launcher) ||
              pk_mp_get_buf(o, "gpu_name", r->gpu_name, sizeof r->gpu_name) ||
              unpack_stages(pk_mp_get(o, "stages"), &r->stages) ||
              pk_mp_get_dup(o, "compile_log", &r->compile_log) ||
              pk_mp_get_dup(o, "stdout_tail", &r->stdout_tail) ||
              pk_mp_get_dup(o, "stderr_tail", &r->stderr_tail);
    if (bad) {
        pk_eval_result_free(r);
        return pk_error_set(err, PK_ERR_INVALID, "result: a field has the wrong type");
    }
    return PK_OK;
}
