/* `pkgym archive`: list, show, export, import and seed the archive of verified kernels. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pk_archive.h"
#include "pk_opts.h"
#include "pk_problems.h"

#define DEFAULT_DATA_DIR "./pkgym-data"

typedef struct archive_args {
    const char *data_dir, *archive, *problem, *out, *problems_dir, *problems;
    int limit, json;
} archive_args;

enum { LIST = 1, SHOW = 2, EXPORT = 4, IMPORT = 8, SEED = 16, ALL = 31 };
static const char *const action_names[] = {"list", "show", "export", "import", "seed"};

#define N_ROWS 8

/* Every option, with the actions (mask) that take it. */
static void rows(archive_args *a, pk_opt t[N_ROWS], int mask[N_ROWS]) {
    const pk_opt r[N_ROWS] = {
        {PK_OPT_STR, "--data-dir", "DIR",
         "the server's data directory; the archive is DIR/" PK_ARCHIVE_FILE
         "\n(default " DEFAULT_DATA_DIR ")",
         &a->data_dir, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_STR, "--archive", "FILE", "the archive file itself (instead of --data-dir)",
         &a->archive, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_STR, "--problem", "ID", "only this problem's entries", &a->problem, 0, 0, NULL, 0,
         NULL, NULL},
        {PK_OPT_INT, "--limit", "N", "at most N entries", &a->limit, 1, 1000000000, NULL, 0, NULL,
         NULL},
        {PK_OPT_FLAG, "--json", NULL, "one JSON object per line (the export format)", &a->json, 0,
         0, NULL, 0, NULL, NULL},
        {PK_OPT_STR, "--out", "FILE", "write there instead of stdout", &a->out, 0, 0, NULL, 0, NULL,
         NULL},
        {PK_OPT_STR, "--problems-dir", "DIR", "the suite to seed from (default: the installed one)",
         &a->problems_dir, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_STR, "--problems", "SEL", "all | suite:SUITE | tag:TAG | ID[,ID...] (default all)",
         &a->problems, 0, 0, NULL, 0, NULL, NULL},
    };
    const int m[N_ROWS] = {ALL, ALL, LIST | EXPORT, LIST, LIST | SHOW, EXPORT, SEED, SEED};
    memcpy(t, r, sizeof r);
    memcpy(mask, m, sizeof m);
}

static int table_for(int action, archive_args *a, pk_opt out[N_ROWS]) {
    pk_opt all[N_ROWS];
    int mask[N_ROWS], n = 0;
    rows(a, all, mask);
    for (int i = 0; i < N_ROWS; i++)
        if (mask[i] & action)
            out[n++] = all[i];
    return n;
}

static void usage(FILE *f) {
    fprintf(
        f, "usage: pkgym archive list [--data-dir DIR] [--archive FILE] [--problem ID] [--limit N] "
           "[--json]\n"
           "       pkgym archive show [--data-dir DIR] [--archive FILE] [--json] ID\n"
           "       pkgym archive export [--data-dir DIR] [--archive FILE] [--problem ID] "
           "[--out FILE]\n"
           "       pkgym archive import [--data-dir DIR] [--archive FILE] FILE.jsonl\n"
           "       pkgym archive seed [--data-dir DIR] [--archive FILE] [--problems-dir DIR] "
           "[--problems SEL]\n\n"
           "The archive of verified kernels (docs/archive.md): every turn a server judges correct\n"
           "enters DIR/" PK_ARCHIVE_FILE " of its --data-dir, one entry per kernel and problem\n"
           "(the better measurement kept). Episodes see entries only as the in-context examples\n"
           "they ask for (reset's options.examples).\n\n"
           "  list    the entries, best first per problem\n"
           "  show    one entry: its measurements, plan and code\n"
           "  export  every entry as JSONL, each line with its problem's text\n"
           "  import  add the entries of a JSONL file (an export); `-` reads stdin\n"
           "  seed    add the suite's own examples (problems/*/*/solutions/correct.cu),\n"
           "          unmeasured (speedup 0)\n\n");
    for (int b = 0; b < 5; b++) {
        archive_args a;
        pk_opt t[N_ROWS];
        int n = table_for(1 << b, &a, t);
        fprintf(f, "%s:\n", action_names[b]);
        pk_opts_help(f, t, n);
    }
}

static char *archive_path(const archive_args *a) {
    if (a->archive)
        return strdup(a->archive);
    return pk_path_join(a->data_dir ? a->data_dir : DEFAULT_DATA_DIR, PK_ARCHIVE_FILE);
}

static int open_archive(const archive_args *a, int write, pk_archive **out) {
    char *path = archive_path(a);
    pk_error err;
    pk_error_clear(&err);
    int tightened = 0;
    /* A data directory holds model-written code: for its user only, as the server makes it. */
    int rc = write && !a->archive
                 ? pk_mkdir_private(a->data_dir ? a->data_dir : DEFAULT_DATA_DIR, &tightened, &err)
                 : PK_OK;
    rc = rc      ? rc
         : !path ? pk_error_set(&err, PK_ERR_NOMEM, "out of memory")
         : write ? pk_archive_open(path, out, &err)
                 : pk_archive_open_readonly(path, out, &err);
    if (rc == PK_ERR_NOT_FOUND)
        fprintf(stderr,
                "pkgym archive: no archive at %s (a server makes it in its --data-dir; so do "
                "`pkgym archive seed` and `import`)\n",
                path);
    else if (rc)
        fprintf(stderr, "pkgym archive: %s\n", err.message);
    free(path);
    return rc ? -1 : 0;
}

static void print_time(FILE *f, double t) {
    char when[32];
    time_t s = (time_t)t;
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&s, &tm));
    fputs(when, f);
}

static void print_row(FILE *f, const pk_archive_entry *e) {
    fprintf(f, "%6lld  %-40s %5d  %8.3f  %5.2f  %-24s ", e->id, e->problem_id, e->world_size,
            e->speedup, e->roofline_share, e->hardware ? e->hardware : "-");
    print_time(f, e->created_at);
    fprintf(f, "  %.12s  %s\n", e->kernel_hash, e->source ? e->source : "-");
}

/* Writes e as JSON (with its problem's text when the archive has it); 0 or -1. */
static int print_json(FILE *f, pk_archive *ar, const pk_archive_entry *e) {
    pk_archive_problem p;
    pk_error err;
    int have = pk_archive_problem_get(ar, e->problem_id, &p, &err) == PK_OK;
    char *line = pk_archive_entry_to_json(e, have ? &p : NULL);
    if (have)
        pk_archive_problem_free(&p);
    int ok = line && fprintf(f, "%s\n", line) >= 0;
    free(line);
    return ok ? 0 : -1;
}

static int cmd_list(const archive_args *a, FILE *out) {
    pk_archive *ar;
    if (open_archive(a, 0, &ar))
        return 2;
    pk_archive_list l;
    pk_error err;
    int rc = pk_archive_query(ar, a->problem, a->limit, &l, &err);
    if (rc)
        fprintf(stderr, "pkgym archive: %s\n", err.message);
    if (!rc && !a->json)
        fprintf(out, "%6s  %-40s %5s  %8s  %5s  %-24s %-20s  %-12s  %s\n", "id", "problem", "world",
                "speedup", "roof", "hardware", "created", "kernel", "source");
    for (int i = 0; !rc && i < l.n; i++)
        rc = a->json ? print_json(out, ar, &l.items[i]) : (print_row(out, &l.items[i]), 0);
    if (!rc && !a->json)
        fprintf(stderr, "pkgym archive: %d of %lld entries\n", l.n, pk_archive_count(ar));
    pk_archive_list_free(&l);
    pk_archive_close(ar);
    return rc ? 2 : 0;
}

static int cmd_show(const archive_args *a, const char *id_text, FILE *out) {
    char *end;
    errno = 0;
    long long id = strtoll(id_text, &end, 10);
    if (errno || *end || id < 1) {
        fprintf(stderr, "pkgym archive show: ID wants an entry id (a positive integer), got '%s'\n",
                id_text);
        return 2;
    }
    pk_archive *ar;
    if (open_archive(a, 0, &ar))
        return 2;
    pk_archive_list l;
    pk_error err;
    int rc = pk_archive_get(ar, id, &l, &err);
    if (rc)
        fprintf(stderr, "pkgym archive: %s\n", err.message);
    else if (l.n == 0)
        fprintf(stderr, "pkgym archive show: no entry %lld\n", id);
    else if (a->json)
        rc = print_json(out, ar, &l.items[0]);
    else {
        const pk_archive_entry *e = &l.items[0];
        fprintf(out,
                "entry %lld: %s, world size %d\ndims: %s\nspeedup: %.3f\nroofline share: %.3f\n"
                "hardware: %s\ncreated: ",
                e->id, e->problem_id, e->world_size, e->dims_json ? e->dims_json : "-", e->speedup,
                e->roofline_share, e->hardware ? e->hardware : "-");
        print_time(out, e->created_at);
        fprintf(out, "\nsource: %s\nkernel sha256: %s\n\nplan:\n%s\n\ncode:\n%s\n",
                e->source ? e->source : "-", e->kernel_hash, e->plan ? e->plan : "(none)", e->code);
    }
    int found = l.n > 0;
    pk_archive_list_free(&l);
    pk_archive_close(ar);
    return rc || !found ? 2 : 0;
}

static int cmd_export(const archive_args *a) {
    FILE *out = a->out ? fopen(a->out, "w") : stdout;
    if (!out) {
        fprintf(stderr, "pkgym archive export: cannot write %s: %s\n", a->out, strerror(errno));
        return 2;
    }
    archive_args b = *a;
    b.json = 1;
    b.limit = 0;
    int rc = cmd_list(&b, out);
    if (fflush(out) != 0 && !rc) {
        fprintf(stderr, "pkgym archive export: write failed: %s\n", strerror(errno));
        rc = 2;
    }
    if (a->out && fclose(out) != 0 && !rc)
        rc = 2;
    return rc;
}

static int cmd_import(const archive_args *a, const char *file) {
    FILE *in = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
    if (!in) {
        fprintf(stderr, "pkgym archive import: cannot read %s: %s\n", file, strerror(errno));
        return 2;
    }
    pk_archive *ar;
    if (open_archive(a, 1, &ar)) {
        if (in != stdin)
            fclose(in);
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, added = 0, merged = 0;
    int rc = 0;
    while (!rc && getline(&line, &cap, in) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        pk_error err;
        pk_error_clear(&err);
        int new_row = 0;
        if (pk_archive_import_json(ar, line, NULL, &new_row, &err)) {
            fprintf(stderr,
                    "pkgym archive import: %s:%ld: %s (the %ld line(s) before it were imported)\n",
                    file, lineno, err.message, added + merged);
            rc = 2;
        }
        added += !rc && new_row;
        merged += !rc && !new_row;
    }
    free(line);
    if (in != stdin)
        fclose(in);
    if (!rc)
        fprintf(stderr, "pkgym archive import: %ld new entr%s, %ld already archived\n", added,
                added == 1 ? "y" : "ies", merged);
    pk_archive_close(ar);
    return rc;
}

/* "all", "suite:S", "tag:T" or a comma-separated list of ids. */
static int selected(const pk_problem *p, const char *sel) {
    if (!sel || strcmp(sel, "all") == 0)
        return 1;
    if (strncmp(sel, "suite:", 6) == 0)
        return pk_problem_in_suite(p, sel + 6);
    if (strncmp(sel, "tag:", 4) == 0)
        return pk_problem_has_tag(p, sel + 4);
    size_t n = strlen(pk_problem_id(p));
    for (const char *s = sel; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        if (strncmp(s, pk_problem_id(p), n) == 0 && (s[n] == ',' || s[n] == '\0'))
            return 1;
    return 0;
}

/* The leading comment of a solution file, as its plan. */
static char *leading_comment(const char *code) {
    pk_strbuf sb = {0};
    for (const char *s = code; strncmp(s, "//", 2) == 0;) {
        const char *nl = strchr(s, '\n'), *text = s + 2;
        while (*text == ' ')
            text++;
        size_t n = nl ? (size_t)(nl - text) : strlen(text);
        pk_strbuf_printf(&sb, "%s%.*s", sb.len ? " " : "", (int)n, text);
        if (!nl)
            break;
        s = nl + 1;
    }
    return sb.len ? pk_strbuf_take(&sb) : NULL;
}

static int seed_one(pk_archive *ar, const pk_problem *p, int *added, pk_error *err) {
    char *path = pk_path_join(pk_problem_dir(p), "solutions/correct.cu");
    char *code = NULL, *tags = NULL, *dims = pk_archive_problem_dims(p);
    size_t len;
    int rc = path ? pk_read_file(path, &code, &len, err) : PK_ERR_NOMEM;
    pk_archive_problem text;
    if (!rc)
        rc = pk_archive_problem_of(p, &text, &tags);
    char source[300];
    snprintf(source, sizeof source, "seed:%s/solutions/correct.cu", pk_problem_id(p));
    char *plan = code ? leading_comment(code) : NULL;
    pk_archive_entry e = {.problem_id = pk_problem_id(p),
                          .world_size = pk_problem_world_size(p),
                          .dims_json = dims,
                          .code = code,
                          .plan = plan,
                          .created_at = pk_wall_time_s(),
                          .source = source};
    if (!rc)
        rc = pk_archive_add(ar, &text, &e, NULL, added, err);
    free(plan);
    free(tags);
    free(dims);
    free(code);
    free(path);
    return rc;
}

static int cmd_seed(const archive_args *a) {
    pk_problem_set *set = NULL;
    pk_error err;
    pk_error_clear(&err);
    if (pk_problem_set_load(a->problems_dir ? a->problems_dir : pk_problems_default_dir(),
                            pk_problems_default_modules_dir(), &set, &err)) {
        fprintf(stderr, "pkgym archive seed: %s\n", err.message);
        return 2;
    }
    pk_archive *ar;
    if (open_archive(a, 1, &ar)) {
        pk_problem_set_free(set);
        return 2;
    }
    int rc = 0, chosen = 0, with_solution = 0, added = 0;
    for (size_t i = 0; !rc && i < pk_problem_set_count(set); i++) {
        const pk_problem *p = pk_problem_set_at(set, i);
        if (!selected(p, a->problems))
            continue;
        chosen++;
        char *path = pk_path_join(pk_problem_dir(p), "solutions/correct.cu");
        FILE *f = path ? fopen(path, "r") : NULL;
        free(path);
        if (!f)
            continue; /* a problem without an example of its own */
        fclose(f);
        with_solution++;
        int new_row = 0;
        if (seed_one(ar, p, &new_row, &err)) {
            fprintf(stderr, "pkgym archive seed: %s: %s\n", pk_problem_id(p), err.message);
            rc = 2;
        }
        added += new_row;
    }
    if (!rc && chosen == 0) {
        fprintf(stderr, "pkgym archive seed: no problem matches '%s'\n", a->problems);
        rc = 2;
    }
    if (!rc)
        fprintf(stderr,
                "pkgym archive seed: %d problem(s), %d with solutions/correct.cu: %d new entr%s\n",
                chosen, with_solution, added, added == 1 ? "y" : "ies");
    pk_archive_close(ar);
    pk_problem_set_free(set);
    return rc;
}

/* Options before and after the one positional argument (show ID, import FILE). */
static int parse(int action, archive_args *a, int argc, char **argv, const char **positional) {
    pk_opt t[N_ROWS];
    int n = table_for(action, a, t), next = argc;
    char cmd[32];
    snprintf(cmd, sizeof cmd, "archive %s", argv[0]);
    int want = action == SHOW || action == IMPORT;
    *positional = NULL;
    for (int first = 1; first < argc; first = next + 1) {
        int rc = pk_opts_parse(cmd, t, n, argc, argv, first, PK_OPTS_POSITIONAL, &next);
        if (rc != PK_OPTS_OK)
            return rc;
        if (next >= argc)
            break;
        if (!want || *positional) {
            fprintf(stderr, "pkgym %s: unexpected argument '%s'\n", cmd, argv[next]);
            return PK_OPTS_ERROR;
        }
        *positional = argv[next];
    }
    if (want && !*positional) {
        fprintf(stderr, "pkgym %s: %s is required\n", cmd, action == SHOW ? "ID" : "FILE.jsonl");
        return PK_OPTS_ERROR;
    }
    if (a->archive && a->data_dir) {
        fprintf(stderr, "pkgym %s: give --data-dir or --archive, not both\n", cmd);
        return PK_OPTS_ERROR;
    }
    return PK_OPTS_OK;
}

int pk_cmd_archive(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int action = 0;
    for (int b = 0; b < 5; b++)
        if (strcmp(argv[1], action_names[b]) == 0)
            action = 1 << b;
    if (!action) {
        fprintf(stderr, "pkgym archive: unknown action '%s' (list, show, export, import, seed)\n",
                argv[1]);
        return 2;
    }
    archive_args a;
    memset(&a, 0, sizeof a);
    const char *positional;
    int rc = parse(action, &a, argc - 1, argv + 1, &positional);
    if (rc == PK_OPTS_HELP) {
        usage(stdout);
        return 0;
    }
    if (rc != PK_OPTS_OK) {
        fprintf(stderr, "(pkgym archive --help: the options)\n");
        return 2;
    }
    switch (action) {
    case LIST:
        return cmd_list(&a, stdout);
    case SHOW:
        return cmd_show(&a, positional, stdout);
    case EXPORT:
        return cmd_export(&a);
    case IMPORT:
        return cmd_import(&a, positional);
    default:
        return cmd_seed(&a);
    }
}
