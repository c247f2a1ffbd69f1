/* Retrieval for a prompt: "similar" ranks the archived problems by FTS5 BM25 against this
 * problem's title, category, tags and prompt; "random" draws problems from the episode's seed;
 * "alternate" takes similar for odd turns, random for even (DSL-Monkeys). Each example is the
 * best entry of a distinct problem, and scope other_problems never lets this problem's own in. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_internal.h"
#include "pk_splitmix.h"

#define MAX_QUERY_TERMS 64
#define RANDOM_STREAM 0x6172636869766531ull /* "archive1": this use of the episode's seed */

static const char *const mode_names[] = {"similar", "random", "alternate"};
static const char *const scope_names[] = {"other_problems", "any"};

const char *pk_examples_mode_name(pk_examples_mode m) {
    return (unsigned)m < 3 ? mode_names[m] : "?";
}

const char *pk_examples_scope_name(pk_examples_scope s) {
    return (unsigned)s < 2 ? scope_names[s] : "?";
}

int pk_examples_mode_parse(const char *name) {
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, mode_names[i]) == 0)
            return i;
    return -1;
}

int pk_examples_scope_parse(const char *name) {
    for (int i = 0; name && i < 2; i++)
        if (strcmp(name, scope_names[i]) == 0)
            return i;
    return -1;
}

pk_examples_mode pk_examples_mode_at(pk_examples_mode m, int turn) {
    if (m != PK_EXAMPLES_ALTERNATE)
        return m;
    return turn % 2 == 1 ? PK_EXAMPLES_SIMILAR : PK_EXAMPLES_RANDOM;
}

/* Appends the distinct lowercase words (letters and digits, 2+ long) of text as quoted FTS5
 * terms joined by OR; n counts the terms so far. */
static void add_terms(pk_strbuf *q, const char *text, int *n) {
    for (const char *s = text ? text : ""; *s && *n < MAX_QUERY_TERMS;) {
        while (*s && !isalnum((unsigned char)*s))
            s++;
        const char *b = s;
        while (isalnum((unsigned char)*s))
            s++;
        size_t len = (size_t)(s - b);
        if (len < 2 || len > 40)
            continue;
        char word[48];
        for (size_t i = 0; i < len; i++)
            word[i] = (char)tolower((unsigned char)b[i]);
        word[len] = '\0';
        char quoted[52];
        snprintf(quoted, sizeof quoted, "\"%s\"", word);
        if (q->data && strstr(q->data, quoted))
            continue;
        pk_strbuf_printf(q, "%s%s", *n ? " OR " : "", quoted);
        (*n)++;
    }
}

/* The best entry of problem_id (highest speedup, then oldest), appended to out. */
static int append_best(pk_archive *a, const char *problem_id, pk_archive_list *out, pk_error *err) {
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(a,
                                "SELECT " PK_ARCHIVE_ENTRY_COLUMNS " FROM entries"
                                " WHERE problem_id = ? ORDER BY speedup DESC, created_at, id"
                                " LIMIT 1",
                                &st, err);
    if (rc)
        return rc;
    pk_archive_bind_text(st, 1, problem_id);
    rc = pk_archive_list_collect(a, st, out, err);
    sqlite3_finalize(st);
    return rc;
}

static int eligible(const pk_archive_problem *p, const pk_examples_spec *spec,
                    const char *candidate) {
    return spec->scope == PK_EXAMPLES_ANY || !p->id || strcmp(candidate, p->id) != 0;
}

static int retrieve_similar(pk_archive *a, const pk_archive_problem *p,
                            const pk_examples_spec *spec, pk_archive_list *out, pk_error *err) {
    pk_strbuf q = {0};
    int n_terms = 0;
    add_terms(&q, p->title, &n_terms);
    add_terms(&q, p->category, &n_terms);
    add_terms(&q, p->tags, &n_terms);
    add_terms(&q, p->prompt, &n_terms);
    if (n_terms == 0) {
        pk_strbuf_free(&q);
        return PK_OK; /* nothing to compare: no similar problem */
    }
    sqlite3_stmt *st = NULL;
    /* Weights: id (unindexed), title, category, tags, prompt. Ties by id: reproducible. */
    int rc = pk_archive_prepare(a,
                                "SELECT id FROM problems_fts WHERE problems_fts MATCH ?"
                                " ORDER BY bm25(problems_fts, 0.0, 4.0, 2.0, 2.0, 1.0), id",
                                &st, err);
    if (!rc)
        pk_archive_bind_text(st, 1, q.data);
    pk_strbuf_free(&q);
    int step = SQLITE_DONE;
    while (!rc && out->n < spec->k && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        if (id && eligible(p, spec, id))
            rc = append_best(a, id, out, err);
    }
    if (!rc && step != SQLITE_ROW && step != SQLITE_DONE)
        rc = pk_archive_db_error(a, err, "similarity search");
    sqlite3_finalize(st);
    return rc;
}

static int retrieve_random(pk_archive *a, const pk_archive_problem *p, const pk_examples_spec *spec,
                           int turn, unsigned long long seed, pk_archive_list *out, pk_error *err) {
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(a, "SELECT DISTINCT problem_id FROM entries ORDER BY problem_id",
                                &st, err);
    char **ids = NULL;
    int n = 0, cap = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        if (!id || !eligible(p, spec, id))
            continue;
        if (n == cap) {
            char **grown = realloc(ids, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *grown);
            if (!grown) {
                rc = pk_error_set(err, PK_ERR_NOMEM, "archive: out of memory");
                break;
            }
            ids = grown;
        }
        if (!(ids[n] = strdup(id)))
            rc = pk_error_set(err, PK_ERR_NOMEM, "archive: out of memory");
        else
            n++;
    }
    sqlite3_finalize(st);
    /* A partial Fisher-Yates shuffle of the sorted ids, counter-based on (seed, turn). */
    uint64_t key = pk_splitmix64(seed ^ RANDOM_STREAM) ^ pk_splitmix64((uint64_t)turn);
    for (int i = 0; !rc && i < n && out->n < spec->k; i++) {
        int j = i + (int)(pk_splitmix64(key + (uint64_t)i) % (uint64_t)(n - i));
        char *t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
        rc = append_best(a, ids[i], out, err);
    }
    for (int i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return rc;
}

int pk_archive_retrieve(pk_archive *a, const pk_archive_problem *p, const pk_examples_spec *spec,
                        int turn, unsigned long long seed, pk_archive_list *out, pk_error *err) {
    memset(out, 0, sizeof *out);
    if (!a || !p || !spec || spec->k < 1 || spec->k > PK_ARCHIVE_MAX_K || turn < 1)
        return pk_error_set(err, PK_ERR_INVALID, "archive: bad retrieval arguments");
    int rc = pk_examples_mode_at(spec->mode, turn) == PK_EXAMPLES_SIMILAR
                 ? retrieve_similar(a, p, spec, out, err)
                 : retrieve_random(a, p, spec, turn, seed, out, err);
    if (rc)
        pk_archive_list_free(out);
    return rc;
}

int pk_archive_record_uses(pk_archive *a, const char *episode_id, int turn, const char *mode,
                           const long long *ids, int n, pk_error *err) {
    if (!a || a->readonly || !episode_id || turn < 1 || n < 0 || (n && !ids))
        return pk_error_set(err, PK_ERR_INVALID, "archive: bad record_uses arguments");
    int rc = pk_archive_exec(a, "BEGIN IMMEDIATE", err);
    sqlite3_stmt *st = NULL;
    if (!rc && !(rc = pk_archive_prepare(a, "DELETE FROM uses WHERE episode_id = ? AND turn = ?",
                                         &st, err))) {
        pk_archive_bind_text(st, 1, episode_id);
        sqlite3_bind_int(st, 2, turn);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = pk_archive_db_error(a, err, "record uses");
        sqlite3_finalize(st);
        st = NULL;
    }
    if (!rc)
        rc = pk_archive_prepare(a, "INSERT INTO uses VALUES(?, ?, ?, ?, ?, ?)", &st, err);
    for (int i = 0; !rc && i < n; i++) {
        pk_archive_bind_text(st, 1, episode_id);
        sqlite3_bind_int(st, 2, turn);
        sqlite3_bind_int(st, 3, i + 1);
        sqlite3_bind_int64(st, 4, ids[i]);
        pk_archive_bind_text(st, 5, mode);
        sqlite3_bind_double(st, 6, pk_wall_time_s());
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = pk_archive_db_error(a, err, "record uses");
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (!rc)
        rc = pk_archive_exec(a, "COMMIT", err);
    if (rc)
        pk_archive_exec(a, "ROLLBACK", NULL);
    return rc;
}
