/* What the archive keeps of a loaded problem: the text similarity ranks by, and its dims. */
#include <jansson.h>
#include <string.h>

#include "pk_archive.h"
#include "pk_problems.h"

int pk_archive_problem_of(const pk_problem *p, pk_archive_problem *out, char **tags) {
    pk_strbuf sb = {0};
    for (size_t i = 0; i < pk_problem_tag_count(p); i++)
        pk_strbuf_printf(&sb, "%s%s", i ? " " : "", pk_problem_tag(p, i));
    *tags = pk_strbuf_take(&sb);
    *out = (pk_archive_problem){.id = pk_problem_id(p),
                                .title = pk_problem_title(p),
                                .category = pk_problem_category(p),
                                .tags = *tags,
                                .prompt = pk_problem_prompt(p)};
    return *tags ? PK_OK : PK_ERR_NOMEM;
}

char *pk_archive_problem_dims(const pk_problem *p) {
    json_t *meta = json_loads(pk_problem_meta_json(p), 0, NULL);
    json_t *dims = json_object_get(meta, "dims");
    char *text = json_is_object(dims) ? json_dumps(dims, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(meta);
    return text;
}
