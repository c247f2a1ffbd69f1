/* Ops that read server state: hello, list_problems, get_problem, stats. */
#include <stdlib.h>
#include <string.h>

#include "call_lookup.h"
#include "observation.h"
#include "ops.h"
#include "pk_client.h"
#include "problem_json.h"

static json_t *limits_json(const pk_server *s) {
    json_t *l = json_pack(
        "{s:I, s:I, s:I, s:i, s:f, s:i, s:i, s:i, s:i}", "max_action_bytes",
        (json_int_t)s->opts.max_action_bytes, "max_summary_bytes", (json_int_t)PK_MAX_SUMMARY_BYTES,
        "max_request_bytes", (json_int_t)s->max_request_bytes, "max_episodes", s->opts.max_episodes,
        "episode_idle_s", s->opts.episode_idle_s, "max_turns", s->opts.max_turns_limit,
        "queue_limit", s->opts.queue_limit, "max_client_episodes", s->opts.max_client_episodes,
        "max_client_steps", s->opts.max_client_steps);
    if (l && json_object_update_new(
                 l, json_pack("{s:f, s:I, s:I, s:I}", "episode_orphan_s", s->opts.episode_orphan_s,
                              "max_episode_bytes", (json_int_t)s->opts.max_episode_bytes,
                              "max_client_bytes", (json_int_t)s->opts.max_client_bytes,
                              "max_held_bytes", (json_int_t)s->opts.max_held_bytes)) != 0) {
        json_decref(l);
        l = NULL;
    }
    return l;
}

void pk_op_hello(pk_call *c) {
    pk_server *s = c->s;
    pk_call_ok(c,
               json_pack("{s:{s:s, s:s}, s:i, s:O, s:i, s:I, s:o}", "server", "name", "pkgym",
                         "version", PK_VERSION, "protocol", 1, "gpus", s->gpus, "gpu_slots",
                         s->sched_gpus, "problems", (json_int_t)pk_problem_set_count(s->problems),
                         "limits", limits_json(s)));
}

/* Reads the optional `tags` filter: an array of strings. */
static int read_tags(pk_call *c, json_t **tags) {
    *tags = NULL;
    const msgpack_object *o = pk_request_field(c->req, "tags");
    if (!o || o->type == MSGPACK_OBJECT_NIL)
        return 0;
    pk_error err;
    if (o->type != MSGPACK_OBJECT_ARRAY ||
        pk_json_from_msgpack(o, "tags", PK_MAX_NESTING, tags, &err) != PK_OK) {
        pk_call_error(c, PK_E_BAD_REQUEST, "field 'tags' must be an array of strings");
        return -1;
    }
    size_t i;
    json_t *t;
    json_array_foreach(*tags, i, t) {
        if (!json_is_string(t)) {
            json_decref(*tags);
            pk_call_error(c, PK_E_BAD_REQUEST, "field 'tags' must be an array of strings");
            return -1;
        }
    }
    return 0;
}

void pk_op_list_problems(pk_call *c) {
    json_t *tags;
    if (read_tags(c, &tags))
        return;
    json_t *list = json_array();
    for (size_t i = 0; list && i < pk_problem_set_count(c->s->problems); i++) {
        const pk_problem *p = pk_problem_set_at(c->s->problems, i);
        int match = 1;
        size_t k;
        json_t *t;
        json_array_foreach(tags, k, t) match = match && pk_problem_has_tag(p, json_string_value(t));
        if (match)
            json_array_append_new(list, pk_problem_summary_json(p));
    }
    json_decref(tags);
    pk_call_ok(c, json_pack("{s:o}", "problems", list));
}

void pk_op_get_problem(pk_call *c) {
    const pk_problem *p = pk_call_problem(c);
    if (!p)
        return;
    json_t *messages = pk_first_messages_json(c->s, p);
    if (!messages) {
        pk_call_error(c, PK_E_INTERNAL,
                      "cannot build the first chat messages (templates or memory)");
        return;
    }
    pk_call_ok(c, json_pack("{s:o, s:s, s:o}", "problem", pk_problem_detail_json(p), "prompt",
                            pk_problem_prompt(p), "messages", messages));
}

void pk_op_stats(pk_call *c) {
    pk_server *s = c->s;
    pk_scheduler_stats st;
    memset(&st, 0, sizeof st);
    pk_evaluator_stats(&s->ev, &st);
    double uptime_s = (pk_now_ms() - s->started_ms) / 1000.0;
    /* Held (a job resident: start-up, waits and exit included) and kernel-busy (trials and
     * timing) apart, each as a share of the GPUs' time since start. */
    double gpu_time_ms = st.gpus_total > 0 && uptime_s > 0 ? uptime_s * 1000.0 * st.gpus_total : 0;
    double occupancy = gpu_time_ms > 0 ? st.gpu_busy_ms / gpu_time_ms : 0.0;
    double kernel_busy = gpu_time_ms > 0 ? st.gpu_kernel_ms / gpu_time_ms : 0.0;
    const pk_server_counters *n = &s->n;
    json_t *jobs =
        json_pack("{s:i, s:i, s:i, s:i}", "queued_compile", st.queued_compile, "queued_run",
                  st.queued_run, "compiling", st.compiling, "running", st.running);
    json_t *gpu = json_pack("{s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:I}",
                            "total", st.gpus_total, "busy", st.gpus_busy, "busy_ms", st.gpu_busy_ms,
                            "occupancy", occupancy, "held_ms", st.gpu_busy_ms, "kernel_busy_ms",
                            st.gpu_kernel_ms, "kernel_busy", kernel_busy, "timing_ms",
                            st.gpu_timing_ms, "lock_wait_ms", st.gpu_lock_wait_ms, "resident_jobs",
                            st.resident_jobs, "peak_resident", st.peak_resident, "jobs_per_gpu",
                            st.jobs_per_gpu, "mem_mb", (json_int_t)st.gpu_mem_mb);
    json_t *cache = json_pack(
        "{s:I, s:I, s:I, s:I}", "compile_hits", (json_int_t)st.compile_cache_hits, "compile_misses",
        (json_int_t)st.compile_cache_misses, "baseline_hits", (json_int_t)st.baseline_cache_hits,
        "baseline_stale", (json_int_t)st.baseline_cache_stale);
    /* Failures of ours (infra_error): never a turn; GPUs that kept failing left the pool. */
    json_t *removed = json_array();
    for (int i = 0; removed && i < st.n_gpus_removed; i++)
        json_array_append_new(removed, json_integer(st.gpus_removed[i]));
    json_t *infra =
        json_pack("{s:I, s:I, s:I, s:I, s:o}", "errors", (json_int_t)st.infra_errors, "retries",
                  (json_int_t)st.infra_retries, "failed", (json_int_t)st.infra_failed,
                  "steps_answered", (json_int_t)n->steps_infra, "gpus_removed", removed);
    json_t *requests = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I}", "total", (json_int_t)n->requests, "bad",
        (json_int_t)n->bad_requests, "episodes_started", (json_int_t)n->episodes_started,
        "episodes_expired", (json_int_t)n->episodes_expired, "store_errors",
        (json_int_t)n->store_errors, "episodes_restored", (json_int_t)n->episodes_restored);
    if (requests)
        json_object_set_new(requests, "episodes_orphaned",
                            json_integer((json_int_t)n->episodes_orphaned));
    /* How long single events held the serving thread (what a waiting hello pays). */
    json_t *loop =
        json_pack("{s:f, s:f, s:f}", "request_ms_max", n->request_ms_max, "completion_ms_max",
                  n->completion_ms_max, "completion_ms_mean",
                  n->completions ? n->completion_ms_total / (double)n->completions : 0.0);
    /* Clients holding an episode or a step; the caller's own usage against its limits. */
    unsigned long admitted = 0, refused = 0;
    int clients_curve = s->curve && s->opts.curve_allow; /* it may serve only the workers */
    if (clients_curve)
        pk_curve_server_domain_counts(s->curve, PK_CURVE_DOMAIN_CLIENTS, &admitted, &refused);
    json_int_t active = (json_int_t)s->clients.count;
    pk_client_entry *me = pk_client_get(&s->clients, c->client_id);
    json_t *clients = json_pack("{s:I, s:s, s:i, s:i, s:b, s:I, s:I}", "active", active, "you",
                                c->client_id, "your_episodes", me ? me->episodes : 0, "your_steps",
                                me ? me->steps : 0, "curve", clients_curve, "curve_admitted",
                                (json_int_t)admitted, "curve_refused", (json_int_t)refused);
    if (clients) { /* memory held by open episodes: the caller's and everyone's (finding 4) */
        json_object_set_new(clients, "your_bytes", json_integer(me ? (json_int_t)me->bytes : 0));
        json_object_set_new(clients, "held_bytes", json_integer((json_int_t)s->clients.bytes));
    }
    pk_client_drop_if_unused(me);
    json_t *body =
        json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:f, s:o, s:o, s:o}", "episodes_open",
                  (json_int_t)s->episodes.count, "steps_in_flight", (json_int_t)n->steps_in_flight,
                  "steps_done", (json_int_t)n->steps_done, "queue_depth",
                  (json_int_t)(st.queued_compile + st.queued_run), "jobs", jobs, "gpu", gpu,
                  "cache", cache, "infra", infra, "uptime_s", uptime_s, "requests", requests,
                  "loop", loop, "clients", clients);
    /* Broker mode: the workers, their GPUs and state (docs/scale-out.md). */
    if (body) /* the archive of verified kernels: entries this run added, turns it could not take */
        json_object_set_new(body, "archive",
                            json_pack("{s:I, s:I}", "added", (json_int_t)n->archive_added, "errors",
                                      (json_int_t)n->archive_errors));
    json_t *remote = pk_evaluator_stats_json(&s->ev);
    if (body && remote)
        json_object_update(body, remote);
    json_decref(remote);
    pk_call_ok(c, body);
}
