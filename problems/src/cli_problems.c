/* `pkgym problems [list|show ID] [--tag T] [--json]`. */
#include "pk_cli_load.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_opts.h"

enum { N_OPTS = 3 };

static void options_table(pk_opt *t, const char **tag, const char **suite, int *json) {
    const pk_opt rows[N_OPTS] = {
        {.type = PK_OPT_STR,
         .name = "--tag",
         .metavar = "T",
         .help = "list only the problems with this tag",
         .dest = tag},
        {.type = PK_OPT_STR,
         .name = "--suite",
         .metavar = "S",
         .help = "list only suite S (pkb: all of ParallelKernelBench's, collectives included)",
         .dest = suite},
        {.type = PK_OPT_FLAG,
         .name = "--json",
         .help = "as JSON (the list, or the problem's meta.json)",
         .dest = json},
    };
    memcpy(t, rows, sizeof rows);
}

static void usage(FILE *f, const pk_opt *t) {
    fprintf(f, "usage: pkgym problems [list] [--tag T] [--suite S] [--json]\n"
               "       pkgym problems show ID [--json]\n\n"
               "Lists the problem suite, or shows one problem (its prompt, or its meta.json).\n\n");
    pk_opts_help(f, t, N_OPTS);
}

static void list(const pk_problem_set *set, const char *tag, const char *suite, int json) {
    json_t *arr = json ? json_array() : NULL;
    for (size_t i = 0; i < pk_problem_set_count(set); i++) {
        const pk_problem *p = pk_problem_set_at(set, i);
        if ((tag && !pk_problem_has_tag(p, tag)) || (suite && !pk_problem_in_suite(p, suite)))
            continue;
        if (json) {
            json_t *tags = json_array();
            for (size_t t = 0; t < pk_problem_tag_count(p); t++)
                json_array_append_new(tags, json_string(pk_problem_tag(p, t)));
            json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:s,s:o}", "id", pk_problem_id(p), "title",
                                  pk_problem_title(p), "category", pk_problem_category(p),
                                  "world_size", pk_problem_world_size(p), "device",
                                  pk_problem_needs_gpu(p) ? "gpu" : "host", "tags", tags);
            if (o && pk_problem_pkb_number(p) > 0)
                json_object_set_new(o, "pkb", json_integer(pk_problem_pkb_number(p)));
            json_array_append_new(arr, o);
        } else {
            printf("%-28s %-5s w=%d  %-22s %s\n", pk_problem_id(p),
                   pk_problem_needs_gpu(p) ? "gpu" : "host", pk_problem_world_size(p),
                   pk_problem_category(p), pk_problem_title(p));
        }
    }
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(2));
        printf("%s\n", s ? s : "[]");
        free(s);
        json_decref(arr);
    }
}

int pk_cmd_problems(int argc, char **argv) {
    const char *tag = NULL, *suite = NULL, *show = NULL, *args[2];
    int json = 0, n_args = 0;
    pk_opt t[N_OPTS];
    options_table(t, &tag, &suite, &json);
    int prc = pk_opts_parse_args("problems", t, N_OPTS, argc, argv, 1, args, 2, &n_args);
    if (prc == PK_OPTS_HELP) {
        usage(stdout, t);
        return 0;
    }
    if (prc != PK_OPTS_OK)
        return 2;
    /* list (the default) or show ID */
    if (n_args >= 1 && strcmp(args[0], "show") == 0 && n_args == 2) {
        show = args[1];
    } else if (n_args > 1 || (n_args == 1 && strcmp(args[0], "list") != 0)) {
        fprintf(stderr, "pkgym problems: want list or show ID (see --help)\n");
        return 2;
    }
    pk_problem_set *set;
    if (pk_cli_load_problems(&set))
        return 1;
    int rc = 0;
    if (show) {
        const pk_problem *p = pk_problem_set_find(set, show);
        if (!p) {
            fprintf(stderr, "pkgym problems: no problem %s\n", show);
            rc = 1;
        } else {
            printf("%s", json ? pk_problem_meta_json(p) : pk_problem_prompt(p));
        }
    } else {
        list(set, tag, suite, json);
    }
    pk_problem_set_free(set);
    return rc;
}
