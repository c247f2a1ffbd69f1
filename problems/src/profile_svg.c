/* The timeline of one profiled call as SVG: one lane per rank (a sub-lane per stream),
 * computation blue, communication orange, copies grey; each box's title is its kernel. */
#include "pk_profile.h"

#include <stdlib.h>
#include <string.h>

#define WIDTH 900.0
#define LEFT 70.0
#define LANE 14.0
#define TOP 30.0

static void escaped(pk_strbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<':
            pk_strbuf_puts(b, "&lt;");
            break;
        case '>':
            pk_strbuf_puts(b, "&gt;");
            break;
        case '&':
            pk_strbuf_puts(b, "&amp;");
            break;
        case '"':
            pk_strbuf_puts(b, "&quot;");
            break;
        default:
            pk_strbuf_append(b, s, 1);
        }
    }
}

/* Streams of a rank in first-seen order: the sub-lane of stream s. */
static int lane_of(const pk_profile_data *d, int rank, int stream, int *n_lanes) {
    int seen[64], n = 0, at = -1;
    for (int i = 0; i < d->n_iv; i++) {
        if (d->iv[i].rank != rank)
            continue;
        int j = 0;
        while (j < n && seen[j] != d->iv[i].stream)
            j++;
        if (j == n && n < 64)
            seen[n++] = d->iv[i].stream;
        if (d->iv[i].stream == stream && at < 0)
            at = j;
    }
    if (n_lanes)
        *n_lanes = n ? n : 1;
    return at < 0 ? 0 : at;
}

/* Each rank's first start and its span. The ranks are separate processes: their clocks agree
 * on one host (CUPTI's timestamps follow the host's), and then the lanes share one time axis;
 * when their first starts lie further apart than 10 spans, they do not, and each lane starts at
 * its rank's first operation (the title says so). */
static int own_axes(const pk_profile_data *d, double *first) {
    double lo = 0, hi = 0, span = 0;
    int seen = 0;
    for (int r = 0; r < d->world && r < 64; r++) {
        double f = 0, l = 0;
        int any = 0;
        for (int i = 0; i < d->n_iv; i++)
            if (d->iv[i].rank == r) {
                f = !any || d->iv[i].start_ns < f ? d->iv[i].start_ns : f;
                l = !any || d->iv[i].end_ns > l ? d->iv[i].end_ns : l;
                any = 1;
            }
        first[r] = f;
        if (!any)
            continue;
        lo = !seen || f < lo ? f : lo;
        hi = !seen || f > hi ? f : hi;
        span = l - f > span ? l - f : span;
        seen = 1;
    }
    return seen && hi - lo > 10 * span;
}

char *pk_profile_svg(const pk_profile_data *d, const char *title) {
    double first[64];
    int own = own_axes(d, first);
    double t0 = 0, t1 = 0;
    for (int i = 0; i < d->n_iv; i++) {
        int r = d->iv[i].rank;
        double shift = own && r >= 0 && r < 64 ? first[r] : 0;
        if (i == 0 || d->iv[i].start_ns - shift < t0)
            t0 = d->iv[i].start_ns - shift;
        if (i == 0 || d->iv[i].end_ns - shift > t1)
            t1 = d->iv[i].end_ns - shift;
    }
    double scale = t1 > t0 ? (WIDTH - LEFT - 10) / (t1 - t0) : 0;
    double lane_y[65], y = TOP;
    int lanes[64];
    for (int r = 0; r < d->world && r < 64; r++) {
        lane_of(d, r, -1, &lanes[r]);
        lane_y[r] = y;
        y += lanes[r] * LANE + 8;
    }
    double height = y + 30;
    pk_strbuf b = {0};
    pk_strbuf_printf(&b,
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                     "font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"4\" y=\"16\">",
                     WIDTH, height);
    escaped(&b, title ? title : "profile");
    pk_strbuf_printf(&b, " (%.1f us; blue compute, orange communication, grey copies%s)</text>\n",
                     (t1 - t0) / 1e3, own ? "; each rank from its first operation" : "");
    for (int r = 0; r < d->world && r < 64; r++)
        pk_strbuf_printf(&b, "<text x=\"4\" y=\"%.1f\">rank %d</text>\n", lane_y[r] + LANE - 3, r);
    static const char *const fill[] = {"#4878d0", "#ee854a", "#999999"};
    for (int i = 0; i < d->n_iv; i++) {
        const pk_prof_interval *v = &d->iv[i];
        if (v->rank < 0 || v->rank >= d->world || v->rank >= 64)
            continue;
        double x = LEFT + (v->start_ns - (own ? first[v->rank] : 0) - t0) * scale;
        double w = (v->end_ns - v->start_ns) * scale;
        double ly = lane_y[v->rank] + lane_of(d, v->rank, v->stream, NULL) * LANE;
        pk_strbuf_printf(&b,
                         "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                         "<title>",
                         x, ly, w < 0.5 ? 0.5 : w, LANE - 2, fill[v->kind]);
        escaped(&b, v->name);
        pk_strbuf_printf(&b, " (stream %d, %.1f us)</title></rect>\n", v->stream,
                         (v->end_ns - v->start_ns) / 1e3);
    }
    pk_strbuf_printf(&b,
                     "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                     LEFT, y, WIDTH - 10, y);
    pk_strbuf_printf(&b,
                     "<text x=\"%.0f\" y=\"%.1f\">0</text><text x=\"%.0f\" y=\"%.1f\" "
                     "text-anchor=\"end\">%.1f us</text>\n</svg>\n",
                     LEFT, y + 14, WIDTH - 10, y + 14, (t1 - t0) / 1e3);
    return b.data ? b.data : strdup("");
}
