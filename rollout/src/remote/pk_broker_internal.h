/* Private to the broker: its jobs and workers (broker.c: API and thread; broker_workers.c:
 * sessions, heartbeats, expiry; broker_jobs.c: queue, placement, results). Everything below
 * `mu` in pk_broker is touched only by the broker's thread, under mu, so that stats can read
 * it from the server's thread. */
#ifndef PK_BROKER_INTERNAL_H
#define PK_BROKER_INTERNAL_H

#include <pthread.h>

#include "pk_broker.h"
#include "pk_handshake_watch.h"
#include "pk_problem_version.h"
#include "pk_wire.h"
#include "pk_zmtp_front.h"

#define PK_BROKER_MAX_ATTEMPTS 2
#define PK_BROKER_DEPARTED_KEPT 16

typedef struct pk_bworker pk_bworker;

typedef struct pk_bjob {
    uint64_t ticket;
    void *user;
    int kind; /* pk_job_kind */
    const pk_problem *problem;
    char version[PK_PROBLEM_VERSION_LEN + 1];
    char *source;
    pk_eval_opts opts; /* strings dropped */
    int world, needs_gpu;
    char gpu_model[128];                       /* preferred model (the episode's), "" for any */
    int attempt;                               /* dispatches so far */
    char lost_on[PK_BROKER_MAX_ATTEMPTS][256]; /* why each earlier attempt was lost */
    double t_submit_ms, t_dispatch_ms;
    double t_unplaceable_ms; /* since when no connected worker can run it; 0: one can */
    pk_bworker *worker;      /* holding it, when dispatched */
    struct pk_bjob *prev, *next;
} pk_bjob;

typedef struct pk_bjob_list {
    pk_bjob *head, *tail;
    int n;
} pk_bjob_list;

struct pk_bworker {
    uint64_t uid;
    char identity[256];
    size_t id_len;
    char name[160];
    char curve_key[PK_CURVE_KEY_LEN + 1]; /* the CURVE key of its session; "" without CURVE */
    json_t *info;                         /* its announcement */
    json_t *problems;                     /* object: problem id -> version */
    json_t *load;                         /* its last heartbeat's figures, or NULL */
    int max_jobs, max_world, gpu_slots, host_slots;
    char gpu_model[128], driver[64], nccl[32], cpu_model[128];
    pk_bjob_list jobs;
    double joined_ms, last_recv_ms, last_send_ms;
    double refused_until_ms; /* refused a job: no new ones until then */
    int draining;
    uint64_t done, lost_jobs;
    pk_bworker *next;
};

struct pk_broker {
    pk_broker_opts opts;
    char *done_endpoint, *cache_dir, *baseline_dir;
    char *binds[PK_BROKER_MAX_BINDS];
    void *zctx;
    char submit_ep[64];
    void *submit_push; /* guarded by mu */
    void *submit_pull, *router, *done_push;
    /* Plain worker endpoints (tcp://, ipc://): peers named by the broker, not by themselves
     * (issue 27, finding 1); router serves CURVE and inproc:// ones. Broker thread only. */
    pk_zmtp_front *front;
    pk_handshake_watch handshakes; /* of the router; read by the broker's thread only */
    double handshake_logged_ms[PK_HANDSHAKE_FAILED + 1];
    unsigned long handshake_unlogged[PK_HANDSHAKE_FAILED + 1];
    pthread_t thread;
    int thread_started;

    pthread_mutex_t mu;
    int accepting;
    int in_flight; /* accepted, not completed */
    uint64_t next_ticket;
    pk_broker_stats stats;
    pk_bjob_list queue; /* waiting for a worker, in order (requeued jobs first) */
    pk_bworker *workers;
    uint64_t next_uid;
    json_t *departed; /* array: recent lost or departed workers */
    int stopping;
    double stop_deadline_ms;
    double t_start_ms;
};

void pk_bjob_list_push_back(pk_bjob_list *l, pk_bjob *j);
void pk_bjob_list_push_front(pk_bjob_list *l, pk_bjob *j);
void pk_bjob_list_remove(pk_bjob_list *l, pk_bjob *j);

/* broker_jobs.c */
void pk_broker_dispatch(pk_broker *b);
void pk_broker_on_result(pk_broker *b, pk_bworker *w, const msgpack_object *msg);
/* Completes j (removed from every list) with an error and no verdict. */
void pk_broker_fail_job(pk_broker *b, pk_bjob *j, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The worker lost j (already in no list): back to the queue, or failed on its last attempt. */
void pk_broker_job_lost(pk_broker *b, pk_bjob *j, const char *why);
void pk_broker_expire_unplaceable(pk_broker *b, double now);
void pk_broker_cancel_all(pk_broker *b, const char *why);

/* broker_workers.c */
pk_bworker *pk_broker_find_worker(pk_broker *b, const void *id, size_t id_len);
/* key: the sender's CURVE public key (ZeroMQ's User-Id), NULL or "" without CURVE. */
void pk_broker_on_message(pk_broker *b, const void *id, size_t id_len, const char *key,
                          const void *data, size_t len);
void pk_broker_heartbeat(pk_broker *b, double now);
/* Removes w: its jobs are lost (requeued or failed); state is "lost" or "left". */
void pk_broker_remove_worker(pk_broker *b, pk_bworker *w, const char *state, const char *why);
int pk_broker_send(pk_broker *b, pk_bworker *w, const msgpack_sbuffer *sb);
int pk_broker_worker_can_run(const pk_bworker *w, const pk_bjob *j);
json_t *pk_broker_worker_json(const pk_broker *b, const pk_bworker *w, double now);

#endif
