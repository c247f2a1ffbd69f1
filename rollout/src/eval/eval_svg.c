/* The turn-scaling chart: best speedup so far against the turn, one thin line per problem and
 * a thick line for the mean, as a self-contained SVG document. */
#include <stdlib.h>
#include <string.h>

#include "pk_eval_internal.h"

#define W 720
#define H 420
#define L 70  /* plot area: left, right, top, bottom margins */
#define R 200 /* room for the legend */
#define TOP 40
#define B 50

static void xml_escaped(pk_strbuf *sb, const char *s) {
    for (; *s; s++) {
        if (*s == '<')
            pk_strbuf_puts(sb, "&lt;");
        else if (*s == '>')
            pk_strbuf_puts(sb, "&gt;");
        else if (*s == '&')
            pk_strbuf_puts(sb, "&amp;");
        else if (*s == '"')
            pk_strbuf_puts(sb, "&quot;");
        else
            pk_strbuf_append(sb, s, 1);
    }
}

static double px(int turn, int n_turns) {
    double span = W - L - R;
    return n_turns > 1 ? L + span * (turn - 1) / (n_turns - 1) : L + span / 2;
}

static double py(double v, double ymax) {
    return H - B - (H - TOP - B) * (v / ymax);
}

char *pk_eval_svg_turn_scaling(const char *title, const char *const *names, const double *series,
                               int n_series, int n_turns) {
    static const char *colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
    double ymax = 1.0;
    for (int i = 0; i < n_series * n_turns; i++)
        if (series[i] > ymax)
            ymax = series[i];
    ymax *= 1.1;
    pk_strbuf sb = {0};
    pk_strbuf_printf(&sb,
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                     "font-family=\"sans-serif\" font-size=\"12\">\n"
                     "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                     "<text x=\"%d\" y=\"22\" font-size=\"15\">",
                     W, H, L);
    xml_escaped(&sb, title);
    pk_strbuf_puts(&sb, "</text>\n");
    /* Axes, y grid at 5 steps, x ticks at every turn (at most 16 labels). */
    pk_strbuf_printf(&sb,
                     "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
                     "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
                     L, H - B, W - R, H - B, L, TOP, L, H - B);
    for (int i = 0; i <= 5; i++) {
        double v = ymax * i / 5;
        pk_strbuf_printf(&sb,
                         "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                         "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2fx</text>\n",
                         L, py(v, ymax), W - R, py(v, ymax), L - 6, py(v, ymax) + 4, v);
    }
    int step = n_turns > 16 ? (n_turns + 15) / 16 : 1;
    for (int t = 1; t <= n_turns; t += step)
        pk_strbuf_printf(&sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                         px(t, n_turns), H - B + 18, t);
    pk_strbuf_printf(&sb,
                     "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">turn</text>\n"
                     "<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" "
                     "text-anchor=\"middle\">best speedup so far</text>\n",
                     (L + W - R) / 2, H - 12, (TOP + H - B) / 2, (TOP + H - B) / 2);
    for (int s = 0; s < n_series; s++) {
        int mean = s == n_series - 1;
        const char *color = mean ? "black" : colors[s % 10];
        pk_strbuf_printf(&sb, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"",
                         color, mean ? "3" : "1.5");
        for (int t = 0; t < n_turns; t++)
            pk_strbuf_printf(&sb, "%.1f,%.1f ", px(t + 1, n_turns),
                             py(series[(size_t)s * (size_t)n_turns + (size_t)t], ymax));
        pk_strbuf_puts(&sb, "\"/>\n");
        int ly = TOP + 14 * s;
        if (ly < H - B) {
            pk_strbuf_printf(&sb,
                             "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                             "stroke-width=\"%s\"/><text x=\"%d\" y=\"%d\">",
                             W - R + 12, ly, W - R + 32, ly, color, mean ? "3" : "1.5", W - R + 38,
                             ly + 4);
            xml_escaped(&sb, names[s]);
            pk_strbuf_puts(&sb, "</text>\n");
        }
    }
    pk_strbuf_puts(&sb, "</svg>\n");
    return pk_strbuf_take(&sb);
}
