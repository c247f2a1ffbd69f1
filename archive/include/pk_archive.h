/* pk_archive: the archive of verified kernels (docs/archive.md). Every turn judged correct
 * enters it with its problem, world size, dims, kernel, plan and measurements; an episode may
 * ask for some of them as in-context examples (reset's options.examples). SQLite (WAL) in the
 * server's data directory, beside the trajectory store; one row per kernel and problem.
 */
#ifndef PK_ARCHIVE_H
#define PK_ARCHIVE_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_ARCHIVE_FILE "archive.sqlite" /* its name in a data directory */
#define PK_ARCHIVE_MAX_K 16              /* examples one prompt may ask for */

typedef struct pk_archive pk_archive;

/* Opens (creating the file and schema when needed) for writing. */
int pk_archive_open(const char *path, pk_archive **out, pk_error *err);
/* Opens an existing archive read-only (`pkgym archive list`, `show`, `export`). */
int pk_archive_open_readonly(const char *path, pk_archive **out, pk_error *err);
void pk_archive_close(pk_archive *a);

/* A problem as similarity sees it: the text that "similar" retrieval ranks by. */
typedef struct pk_archive_problem {
    const char *id, *title, *category;
    const char *tags; /* space-separated */
    const char *prompt;
} pk_archive_problem;

typedef struct pk_archive_entry {
    long long id; /* assigned by the archive */
    const char *problem_id;
    int world_size;
    const char *dims_json; /* the dims it was verified at, a JSON object; NULL: unknown */
    const char *code;
    const char *plan;      /* the model's summary written after the kernel; NULL: none */
    double speedup;        /* over the reference; 0: not timed */
    double roofline_share; /* the roofline floor over its time (1: at the floor); 0: unknown */
    const char *hardware;  /* the GPU model, or "host" */
    double created_at;     /* seconds since the epoch */
    const char *source;    /* where it came from: "episode:<id>/turn:<n>", "seed:<problem>", ... */
    char kernel_hash[65];  /* SHA-256 of the code, hex; filled by pk_archive_add */
} pk_archive_entry;

/* The SHA-256 (hex) of a kernel, surrounding whitespace ignored. */
void pk_archive_kernel_hash(const char *code, char out[65]);

/* Adds e for problem p (whose text is stored, or updated, for similarity). A kernel already
 * archived for that problem stays one row: its measurements become the better (higher speedup)
 * of the two. *id: the row's id; *added: 1 when a new row was made. Either may be NULL. */
int pk_archive_add(pk_archive *a, const pk_archive_problem *p, const pk_archive_entry *e,
                   long long *id, int *added, pk_error *err);

/* A list of entries read back; their strings are owned by the list. */
typedef struct pk_archive_list {
    pk_archive_entry *items;
    int n;
} pk_archive_list;
void pk_archive_list_free(pk_archive_list *l);

/* Entries of one problem (NULL: all), best first per problem (problems by id), at most limit
 * (<= 0: all). */
int pk_archive_query(pk_archive *a, const char *problem_id, int limit, pk_archive_list *out,
                     pk_error *err);
/* One entry; out->n is 0 when there is no such id. */
int pk_archive_get(pk_archive *a, long long id, pk_archive_list *out, pk_error *err);
/* The stored text of a problem (its strings malloc'd into *out's fields); PK_ERR_NOT_FOUND
 * when the archive has none. Free with pk_archive_problem_free. */
int pk_archive_problem_get(pk_archive *a, const char *problem_id, pk_archive_problem *out,
                           pk_error *err);
void pk_archive_problem_free(pk_archive_problem *p);
long long pk_archive_count(pk_archive *a);

/* Retrieval (reset's options.examples, docs/protocol.md). */
typedef enum pk_examples_mode {
    PK_EXAMPLES_SIMILAR,   /* FTS5 BM25 of the problems' title, category, tags and prompt */
    PK_EXAMPLES_RANDOM,    /* uniform over the eligible problems, from the episode's seed */
    PK_EXAMPLES_ALTERNATE, /* similar for odd turns' prompts, random for even (DSL-Monkeys) */
} pk_examples_mode;
typedef enum pk_examples_scope {
    PK_EXAMPLES_OTHER_PROBLEMS, /* never the episode's own problem (the default) */
    PK_EXAMPLES_ANY,            /* its own problem's kernels too */
} pk_examples_scope;

typedef struct pk_examples_spec {
    int k; /* 1..PK_ARCHIVE_MAX_K */
    pk_examples_mode mode;
    pk_examples_scope scope;
} pk_examples_spec;

const char *pk_examples_mode_name(pk_examples_mode m);
const char *pk_examples_scope_name(pk_examples_scope s);
/* -1 for an unknown name. */
int pk_examples_mode_parse(const char *name);
int pk_examples_scope_parse(const char *name);
/* The mode a prompt of this turn (1-based: 1 is reset's prompt) uses: similar or random. */
pk_examples_mode pk_examples_mode_at(pk_examples_mode m, int turn);

/* Up to spec->k entries for the prompt of turn (1-based) of an episode of p seeded seed: the
 * best entry (highest speedup, then oldest) of each of k distinct problems, chosen by the
 * turn's mode. Random choices depend only on seed, turn and the archive's contents. */
int pk_archive_retrieve(pk_archive *a, const pk_archive_problem *p, const pk_examples_spec *spec,
                        int turn, unsigned long long seed, pk_archive_list *out, pk_error *err);

/* Records that the prompt of turn (1-based) of episode used ids[0..n) (replacing an earlier
 * record of that prompt). */
int pk_archive_record_uses(pk_archive *a, const char *episode_id, int turn, const char *mode,
                           const long long *ids, int n, pk_error *err);

/* An entry as one JSON object (a line of `pkgym archive export`), with its problem's text when
 * p is given; malloc'd, NULL when out of memory. */
char *pk_archive_entry_to_json(const pk_archive_entry *e, const pk_archive_problem *p);
/* Adds the entry of one such line (its problem text comes with it or must be archived already). */
int pk_archive_import_json(pk_archive *a, const char *line, long long *id, int *added,
                           pk_error *err);

/* The examples block of a prompt: a header that says where the kernels come from and the scope
 * rule, then entries e[0..n), each with its problem, plan and code. malloc'd; NULL: no memory. */
char *pk_archive_examples_text(const pk_archive_entry *e, int n, pk_examples_scope scope);

/* A loaded problem's text (*tags: its tags space-separated, malloc'd, to free) and its default
 * dims as compact JSON (malloc'd; NULL when it has none). */
struct pk_problem;
int pk_archive_problem_of(const struct pk_problem *p, pk_archive_problem *out, char **tags);
char *pk_archive_problem_dims(const struct pk_problem *p);

/* `pkgym archive`. */
int pk_cmd_archive(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
