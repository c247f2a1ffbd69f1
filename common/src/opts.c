#include "pk_opts.h"

#include <stdlib.h>
#include <string.h>

#include "pk_cli_args.h"

#define HELP_COLUMN 26 /* where help text starts: "  --name METAVAR" is padded to it */

/* The row named by `arg` ("--name" or "--name=value"); *inline_value points past '='. */
static int named(const char *name, const char *arg, size_t len) {
    return name && strlen(name) == len && strncmp(name, arg, len) == 0;
}

static const pk_opt *find(const pk_opt *table, int n, const char *arg, const char **inline_value) {
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    for (int i = 0; i < n; i++)
        if (table[i].type != PK_OPT_SECTION &&
            (named(table[i].name, arg, len) || named(table[i].alias, arg, len))) {
            *inline_value = eq ? eq + 1 : NULL;
            return &table[i];
        }
    return NULL;
}

static int set_int_list(const char *cmd, const pk_opt *o, const char *v) {
    *o->count = 0;
    if (strcmp(v, "none") == 0)
        return 0;
    char *copy = strdup(v);
    if (!copy) {
        fprintf(stderr, "pkgym %s: out of memory\n", cmd);
        return -1;
    }
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && !rc;
         tok = strtok_r(NULL, ",", &save)) {
        long x;
        if (*o->count >= o->max) {
            fprintf(stderr, "pkgym %s: %s takes at most %d values\n", cmd, o->name, o->max);
            rc = -1;
        } else if (pk_arg_long(cmd, o->name, tok, o->lo, o->hi, &x)) {
            rc = -1;
        } else {
            ((int *)o->dest)[(*o->count)++] = (int)x;
        }
    }
    free(copy);
    return rc;
}

static int set_value(const char *cmd, const pk_opt *o, const char *v) {
    long x = 0;
    switch (o->type) {
    case PK_OPT_STR:
        *(const char **)o->dest = v;
        return 0;
    case PK_OPT_STR_LIST:
        if (*o->count >= o->max) {
            fprintf(stderr, "pkgym %s: at most %d %s\n", cmd, o->max, o->name);
            return -1;
        }
        ((const char **)o->dest)[(*o->count)++] = v;
        return 0;
    case PK_OPT_INT:
        if (pk_arg_long(cmd, o->name, v, o->lo, o->hi, &x))
            return -1;
        *(int *)o->dest = (int)x;
        return 0;
    case PK_OPT_LONG:
        return pk_arg_long(cmd, o->name, v, o->lo, o->hi, (long *)o->dest);
    case PK_OPT_SIZE:
        if (pk_arg_long(cmd, o->name, v, o->lo < 0 ? 0 : o->lo, o->hi, &x))
            return -1;
        *(size_t *)o->dest = (size_t)x;
        return 0;
    case PK_OPT_SECONDS:
        if (pk_arg_long(cmd, o->name, v, o->lo, o->hi, &x))
            return -1;
        *(double *)o->dest = (double)x;
        return 0;
    case PK_OPT_POSITIVE:
        return pk_arg_positive(cmd, o->name, v, "number", (double *)o->dest);
    case PK_OPT_INT_LIST:
        return set_int_list(cmd, o, v);
    case PK_OPT_CUSTOM:
        return o->parse(cmd, o->name, v, o->dest);
    case PK_OPT_FLAG:
    case PK_OPT_SECTION:
        break;
    }
    return -1;
}

int pk_opts_parse(const char *cmd, const pk_opt *table, int n, int argc, char **argv, int first,
                  int flags, int *next) {
    int i = first;
    while (i < argc) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return PK_OPTS_HELP;
        if (a[0] != '-' || a[1] == '\0') {
            if (flags & PK_OPTS_POSITIONAL)
                break;
            fprintf(stderr, "pkgym %s: unexpected argument '%s' (see --help)\n", cmd, a);
            return PK_OPTS_ERROR;
        }
        const char *v = NULL;
        const pk_opt *o = find(table, n, a, &v);
        if (!o) {
            fprintf(stderr, "pkgym %s: unknown option %s (see --help)\n", cmd, a);
            return PK_OPTS_ERROR;
        }
        i++;
        if (o->type == PK_OPT_FLAG) {
            if (v) {
                fprintf(stderr, "pkgym %s: %s takes no value\n", cmd, o->name);
                return PK_OPTS_ERROR;
            }
            *(int *)o->dest = 1;
            continue;
        }
        if (!v) {
            if (i >= argc) {
                fprintf(stderr, "pkgym %s: %s needs a value (%s)\n", cmd, o->name,
                        o->metavar ? o->metavar : "see --help");
                return PK_OPTS_ERROR;
            }
            v = argv[i++];
        }
        if (set_value(cmd, o, v))
            return PK_OPTS_ERROR;
    }
    if (next)
        *next = i;
    return PK_OPTS_OK;
}

int pk_opts_parse_args(const char *cmd, const pk_opt *table, int n, int argc, char **argv,
                       int first, const char **args, int max_args, int *n_args) {
    *n_args = 0;
    for (int i = first; i < argc;) {
        int next = argc;
        int rc = pk_opts_parse(cmd, table, n, argc, argv, i, PK_OPTS_POSITIONAL, &next);
        if (rc != PK_OPTS_OK)
            return rc;
        /* "--" ends the options: whatever follows is an argument, even "-x". */
        int rest = next > i && strcmp(argv[next - 1], "--") == 0;
        for (i = next; i < argc && (rest || i == next); i++) {
            if (*n_args >= max_args) {
                fprintf(stderr, "pkgym %s: unexpected argument '%s' (see --help)\n", cmd, argv[i]);
                return PK_OPTS_ERROR;
            }
            args[(*n_args)++] = argv[i];
        }
    }
    return PK_OPTS_OK;
}

/* Prints text's lines, the first after `used` columns (on a line of its own when less than one
 * space would be left), the rest at the help column. */
static void help_lines(FILE *f, const char *text, int used) {
    int first = 1;
    while (text) {
        const char *nl = strchr(text, '\n');
        int len = nl ? (int)(nl - text) : (int)strlen(text);
        if (first && used + 1 > HELP_COLUMN) {
            fputc('\n', f);
            used = 0;
        }
        fprintf(f, "%*s%.*s\n", (first ? HELP_COLUMN - used : HELP_COLUMN), "", len, text);
        first = 0;
        text = nl ? nl + 1 : NULL;
    }
}

#define SYNOPSIS_WIDTH 92

void pk_opts_synopsis(FILE *f, const char *head, const pk_opt *table, int n, const char *tail) {
    int indent = (int)strlen(head) + 1, col = indent - 1;
    fputs(head, f);
    for (int i = 0; i <= n; i++) {
        char item[160];
        if (i == n)
            snprintf(item, sizeof item, "%s", tail ? tail : "");
        else if (table[i].type == PK_OPT_SECTION)
            continue;
        else
            snprintf(item, sizeof item, "[%s%s%s]%s", table[i].name, table[i].metavar ? " " : "",
                     table[i].metavar ? table[i].metavar : "",
                     table[i].type == PK_OPT_STR_LIST ||
                             (table[i].type == PK_OPT_CUSTOM && table[i].max > 0)
                         ? "..."
                         : "");
        int len = (int)strlen(item);
        if (!len)
            continue;
        if (col + 1 + len > SYNOPSIS_WIDTH && col > indent) {
            fprintf(f, "\n%*s", indent - 1, "");
            col = indent - 1;
        }
        fprintf(f, " %s", item);
        col += 1 + len;
    }
    fputc('\n', f);
}

void pk_opts_help(FILE *f, const pk_opt *table, int n) {
    for (int i = 0; i < n; i++) {
        const pk_opt *o = &table[i];
        if (o->type == PK_OPT_SECTION) {
            fprintf(f, "\n%s\n", o->help ? o->help : "");
            continue;
        }
        int used = fprintf(f, "  %s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "",
                           o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        help_lines(f, o->help ? o->help : "", used < 0 ? 0 : used);
    }
}
