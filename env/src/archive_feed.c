/* Every turn judged correct enters the archive (pk_archive.h): its kernel, the model's plan and
 * the measurements, keyed by problem and kernel hash. The archive is the server's own record;
 * a failure to write it is logged and counted, never the step's failure. */
#include "archive_feed.h"

#include <stdio.h>
#include <stdlib.h>

void pk_server_archive_turn(pk_server *s, const pk_episode *e, const pk_eval_result *r) {
    const pk_turn *t = e->n_turns ? &e->turns[e->n_turns - 1] : NULL;
    if (!s->archive || !t || t->status != PK_STATUS_CORRECT || !t->code)
        return;
    char *tags = NULL, *dims = pk_archive_problem_dims(e->problem);
    pk_archive_problem p;
    char source[96];
    snprintf(source, sizeof source, "episode:%s/turn:%d", e->id, e->n_turns);
    int timed = r->has_timing && r->speedup > 0;
    pk_archive_entry entry = {
        .problem_id = pk_problem_id(e->problem),
        .world_size = r->world_size > 0        ? r->world_size
                      : e->eval.world_size > 0 ? e->eval.world_size
                                               : pk_problem_world_size(e->problem),
        .dims_json = dims,
        .code = t->code,
        .plan = t->summary,
        .speedup = timed ? r->speedup : 0,
        .roofline_share = timed && r->roofline_floor_us > 0 && r->candidate.median_us > 0
                              ? r->roofline_floor_us / r->candidate.median_us
                              : 0,
        .hardware = r->gpu_name[0]                     ? r->gpu_name
                    : pk_problem_needs_gpu(e->problem) ? NULL
                                                       : "host",
        .created_at = t->finished_at,
        .source = source,
    };
    pk_error err;
    pk_error_clear(&err);
    int added = 0;
    int rc = pk_archive_problem_of(e->problem, &p, &tags);
    if (!rc)
        rc = pk_archive_add(s->archive, &p, &entry, NULL, &added, &err);
    if (rc) {
        s->n.archive_errors++;
        fprintf(stderr, "pkgym serve: archive: turn %d of episode %s not archived: %s\n",
                e->n_turns, e->id, err.message[0] ? err.message : "out of memory");
    }
    s->n.archive_added += added;
    free(tags);
    free(dims);
}
