/* pk_opts: one option table per subcommand, parsed alike and printed as its --help. A
 * subcommand describes each option once (name, value, range, help text); the parser checks
 * values the way pk_cli_args.h does ("pkgym <cmd>: <opt> wants ..., got '<value>'" on stderr)
 * and the help lines are generated from the same rows, so the two cannot drift apart. */
#ifndef PK_OPTS_H
#define PK_OPTS_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pk_opt_type {
    PK_OPT_SECTION,  /* no option: a heading in --help (help = the heading) */
    PK_OPT_FLAG,     /* int *dest = 1 */
    PK_OPT_STR,      /* const char **dest = the value (argv's own string) */
    PK_OPT_STR_LIST, /* repeatable: ((const char **)dest)[(*count)++], at most max */
    PK_OPT_INT,      /* int *dest: a whole number in [lo, hi] */
    PK_OPT_LONG,     /* long *dest: a whole number in [lo, hi] */
    PK_OPT_SIZE,     /* size_t *dest: a whole number in [lo, hi] (lo >= 0) */
    PK_OPT_SECONDS,  /* double *dest: a whole number in [lo, hi] */
    PK_OPT_POSITIVE, /* double *dest: a positive finite number, at most 1e12 */
    PK_OPT_INT_LIST, /* int *dest: comma-separated whole numbers in [lo, hi], at most max, their
                        number in *count; a repeat replaces the list; "none": the empty list
                        (GPU lists: `serve --gpus`, `sandbox --gpus`) */
    PK_OPT_CUSTOM,   /* parse(cmd, name, value, dest): 0, or -1 after its own message */
} pk_opt_type;

typedef struct pk_opt {
    pk_opt_type type;
    const char *name;    /* "--bind" */
    const char *metavar; /* "ENDPOINT"; NULL for a flag */
    const char *help;    /* may hold '\n' for further lines, each indented alike */
    void *dest;
    long lo, hi; /* PK_OPT_INT, LONG, SECONDS, INT_LIST */
    int *count;  /* PK_OPT_STR_LIST, INT_LIST */
    int max;     /* PK_OPT_STR_LIST, INT_LIST */
    int (*parse)(const char *cmd, const char *name, const char *value, void *dest);
    const char *alias; /* a short form ("-G"), or NULL */
} pk_opt;

enum { PK_OPTS_OK = 0, PK_OPTS_HELP = 1, PK_OPTS_ERROR = -1 };

/* Stop at the first argument that is not an option (it and the rest are positional); without
 * it such an argument is an error. "--" always ends the options and is skipped. */
#define PK_OPTS_POSITIONAL 1

/* Parses argv[first..argc) against table[0..n). Returns PK_OPTS_OK with *next at the first
 * unparsed argument (argc when all were options), PK_OPTS_HELP for --help or -h, or
 * PK_OPTS_ERROR after a message on stderr (an unknown option, a missing or bad value, too many
 * repeats). Options may be given as "--name value" or "--name=value". */
int pk_opts_parse(const char *cmd, const pk_opt *table, int n, int argc, char **argv, int first,
                  int flags, int *next);

/* Options and up to max_args other arguments, in any order ("--" makes the rest arguments):
 * the arguments in args[0..*n_args). Returns as pk_opts_parse; more arguments than max_args is
 * PK_OPTS_ERROR ("unexpected argument"). */
int pk_opts_parse_args(const char *cmd, const pk_opt *table, int n, int argc, char **argv,
                       int first, const char **args, int max_args, int *n_args);

/* The synopsis: `head` then every option as "[--name METAVAR]" ("..." after a repeatable one:
 * PK_OPT_STR_LIST, or a PK_OPT_CUSTOM with max > 0), then `tail`, wrapped under `head`. */
void pk_opts_synopsis(FILE *f, const char *head, const pk_opt *table, int n, const char *tail);

/* The options' lines of --help, with section headings, in table order. */
void pk_opts_help(FILE *f, const pk_opt *table, int n);

#ifdef __cplusplus
}
#endif
#endif
