/* The broker <-> worker wire (docs/scale-out.md, "Wire"): one msgpack map per ZeroMQ frame,
 * its type in key "t". Workers are DEALERs, the broker a ROUTER. Jobs and results are packed
 * field by field (doubles at full precision); the worker's announcement (ready) is a JSON
 * value packed as msgpack, since the broker keeps it for `stats`. */
#ifndef PK_WIRE_H
#define PK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <msgpack.h>

#include "pk_harness.h"

#define PK_WIRE_PROTOCOL 1
#define PK_WIRE_MAX_FRAME (64u << 20) /* the largest frame either side accepts */

typedef enum pk_wire_type {
    PK_WIRE_NONE = 0,
    PK_WIRE_READY,     /* worker -> broker: who it is, its GPUs, capacity and problems */
    PK_WIRE_HEARTBEAT, /* both ways */
    PK_WIRE_JOB,       /* broker -> worker */
    PK_WIRE_RESULT,    /* worker -> broker */
    PK_WIRE_DRAIN,     /* worker -> broker: finishing its jobs, send no more */
    PK_WIRE_BYE,       /* both ways: this session is over (broker: "I do not know you") */
} pk_wire_type;

const char *pk_wire_type_name(int type);

typedef enum pk_job_kind {
    PK_JOB_EVAL = 0, /* compile, check, run: a real evaluation */
    PK_JOB_NOOP = 1, /* answered at once by the worker, never scored (bench only) */
} pk_job_kind;

typedef enum pk_wire_code {
    PK_WIRE_OK = 0,          /* result holds the verdict */
    PK_WIRE_HARNESS_ERROR,   /* the harness failed (not the candidate); message says why */
    PK_WIRE_MISSING_PROBLEM, /* the worker lacks the problem, its module or that version */
    PK_WIRE_BAD_JOB,         /* the job did not decode or asked for something impossible */
    PK_WIRE_REFUSED,         /* the worker could not take it now (queue full, stopping) */
    PK_WIRE_CODE_COUNT
} pk_wire_code;

const char *pk_wire_code_name(int code);

/* The hardware a reference time belongs to (the baseline cache key's device part). */
typedef struct pk_wire_baseline {
    char device[128]; /* GPU model, or the CPU model for host problems */
    char driver[64];  /* NVIDIA driver, or "host" */
    char nccl[32];
    int world;
    double us; /* > 0: the reference time */
} pk_wire_baseline;

typedef struct pk_wire_job {
    uint64_t id;
    int attempt;                      /* 1 on the first worker, 2 on the retry */
    int kind;                         /* pk_job_kind */
    char *problem, *version, *source; /* owned */
    pk_eval_opts opts;         /* trials, seed, timeouts, skip_timing, world_size, baseline_us,
                                  reference_as_candidate; its strings stay NULL */
    pk_wire_baseline baseline; /* us > 0: opts.baseline_us was cached for this hardware */
} pk_wire_job;

typedef struct pk_wire_result {
    uint64_t id;
    int attempt;
    int code; /* pk_wire_code */
    char message[512];
    pk_eval_result result;     /* owned strings; meaningful when code is PK_WIRE_OK */
    double worker_ms;          /* from the job's arrival to its result, on the worker */
    pk_wire_baseline baseline; /* us > 0: the reference time of this run's hardware */
} pk_wire_result;

/* Packing: PK_OK or PK_ERR_NOMEM. sb must be initialised; data is appended. */
int pk_wire_pack_simple(msgpack_sbuffer *sb, int type);
int pk_wire_pack_job(msgpack_sbuffer *sb, const pk_wire_job *j);
int pk_wire_pack_result(msgpack_sbuffer *sb, const pk_wire_result *r);
/* A heartbeat; load (a JSON object, optional): the worker's scheduler figures for `stats`. */
int pk_wire_pack_heartbeat(msgpack_sbuffer *sb, const json_t *load);
/* ready: info is a JSON object (pk_worker_info_json); "t" and "protocol" are added. */
int pk_wire_pack_ready(msgpack_sbuffer *sb, const json_t *info);

/* Unpacks one frame; *type is the message type. Free out with msgpack_unpacked_destroy. */
int pk_wire_decode(const void *data, size_t len, msgpack_unpacked *out, int *type, pk_error *err);
int pk_wire_unpack_job(const msgpack_object *msg, pk_wire_job *j, pk_error *err);
void pk_wire_job_free(pk_wire_job *j);
int pk_wire_unpack_result(const msgpack_object *msg, pk_wire_result *r, pk_error *err);
void pk_wire_result_free(pk_wire_result *r);
/* ready: the JSON object, checked for protocol and the fields the broker needs. */
int pk_wire_unpack_ready(const msgpack_object *msg, json_t **info, pk_error *err);

/* pk_eval_result <-> msgpack map (the keys of its JSON form, docs/problems.md). */
int pk_wire_pack_eval_result(msgpack_packer *pk, const pk_eval_result *r);
int pk_wire_unpack_eval_result(const msgpack_object *o, pk_eval_result *r, pk_error *err);

#endif
