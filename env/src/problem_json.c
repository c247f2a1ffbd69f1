/* Problems as the replies show them (problem_json.h). */
#include "problem_json.h"

json_t *pk_problem_summary_json(const pk_problem *p) {
    json_t *tags = json_array();
    for (size_t i = 0; tags && i < pk_problem_tag_count(p); i++)
        json_array_append_new(tags, json_string(pk_problem_tag(p, i)));
    int sizes[16];
    int n = pk_problem_world_sizes(p, sizes, 16);
    json_t *world_sizes = json_array();
    for (int i = 0; world_sizes && i < n && i < 16; i++)
        json_array_append_new(world_sizes, json_integer(sizes[i]));
    json_t *s = json_pack("{s:s, s:s, s:s, s:i, s:o, s:b, s:o}", "id", pk_problem_id(p), "title",
                          pk_problem_title(p), "category", pk_problem_category(p), "world_size",
                          pk_problem_world_size(p), "world_sizes", world_sizes, "needs_gpu",
                          pk_problem_needs_gpu(p), "tags", tags);
    /* PKB's number, for `suite:pkb` and PKB's table order (absent: not one of PKB's). */
    if (s && pk_problem_pkb_number(p) > 0)
        json_object_set_new(s, "pkb", json_integer(pk_problem_pkb_number(p)));
    return s;
}

json_t *pk_problem_detail_json(const pk_problem *p) {
    json_t *d = pk_problem_summary_json(p);
    json_t *meta = json_loads(pk_problem_meta_json(p), 0, NULL);
    json_object_set_new(d, "suite", json_string(pk_problem_suite(p)));
    json_object_set_new(d, "needs_gpu", json_boolean(pk_problem_needs_gpu(p)));
    json_object_set_new(d, "meta", meta ? meta : json_null());
    return d;
}
