/* html_text.c — escaping, number forms and table cells of the HTML report
 * (see html_internal.h). */
#include "reports/html_internal.h"
#include "reports/term_report.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

const char *h_cat_name(int c)
{
    if (c >= 0 && c < MS_CAT_N) return ms_cat_name((ms_cat)c);
    return "unattributed";
}

const char *h_precision_name(int p)
{
    static const char *const names[] = { "fp32", "bf16", "fp16" };
    return p >= 0 && p < 3 ? names[p] : "?";
}

void h_escn(FILE *f, const char *s, size_t max)
{
    if (!s) return;
    for (size_t i = 0; i < max && s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            /* Control characters have no business in a page; tabs and
             * newlines read as spaces. */
            if (ch < 0x20 || ch == 0x7f) fputc(' ', f);
            else fputc(ch, f);
        }
    }
}

void h_esc(FILE *f, const char *s) { h_escn(f, s, SIZE_MAX); }

char *h_bytes(uint64_t v, char *buf, size_t len) { return ms_term_bytes(v, buf, len); }

char *h_grouped(uint64_t v, char *buf, size_t len)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
    char out[40];
    int w = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) out[w++] = ',';
        out[w++] = digits[i];
    }
    out[w] = '\0';
    snprintf(buf, len, "%s", out);
    return buf;
}

char *h_ms(double ms, char *buf, size_t len)
{
    if (!isfinite(ms)) snprintf(buf, len, "?");
    else if (fabs(ms) >= 10000.0) snprintf(buf, len, "%.1f s", ms / 1000.0);
    else if (fabs(ms) >= 100.0) snprintf(buf, len, "%.0f ms", ms);
    else snprintf(buf, len, "%.2f ms", ms);
    return buf;
}

void h_td_bytes(FILE *f, const char *key, uint64_t v)
{
    char human[32], exact[40];
    if (v == 0) {
        fprintf(f, "<td class=\"n\" data-k=\"%s\" data-v=\"0\">&ndash;</td>", key);
        return;
    }
    fprintf(f, "<td class=\"n\" data-k=\"%s\" data-v=\"%" PRIu64 "\">%s<small>%s</small></td>", key, v,
            h_bytes(v, human, sizeof human), h_grouped(v, exact, sizeof exact));
}

void h_td_num(FILE *f, const char *key, double v, const char *shown_fmt)
{
    char shown[64];
    if (!isfinite(v)) {
        fprintf(f, "<td class=\"n\" data-k=\"%s\" data-v=\"%s\">%s</td>", key, isnan(v) ? "NaN" : "Inf",
                isnan(v) ? "NaN" : (v > 0 ? "+&infin;" : "&minus;&infin;"));
        return;
    }
    snprintf(shown, sizeof shown, shown_fmt, v);
    fprintf(f, "<td class=\"n\" data-k=\"%s\" data-v=\"%.17g\">%s</td>", key, v, shown);
}

void h_td_int(FILE *f, const char *key, long long v)
{
    fprintf(f, "<td class=\"n\" data-k=\"%s\" data-v=\"%lld\">%lld</td>", key, v, v);
}

void h_td_text(FILE *f, const char *key, const char *text)
{
    fprintf(f, "<td data-k=\"%s\">", key);
    h_esc(f, text);
    fputs("</td>", f);
}

void h_legend(FILE *f, unsigned mask, const char *extra_html)
{
    fputs("<ul class=\"legend\">", f);
    for (int c = 0; c < H_NCAT; c++)
        if (mask & (1u << c)) fprintf(f, "<li><i class=\"sw c-%s\"></i>%s</li>", h_cat_name(c), h_cat_name(c));
    if (extra_html) fputs(extra_html, f);
    fputs("</ul>\n", f);
}
