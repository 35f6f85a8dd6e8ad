/* html_report.c — the HTML report's page: head and stylesheet, the run's
 * header, then the trial, plan and training sections over the run and the
 * runs it contains (see html_report.h). */
#include "reports/html_report.h"
#include "reports/html_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reports/grow.h"
#include "reports/run_facts.h"
#include "vocab/tmpfile.h"
#include <unistd.h>

/* A doctor holds trial, plan and training runs; deeper nesting is not made
 * by memsplit, and the limit guards against a hand-edited cycle. */
#define MAX_DEPTH 4
#define MAX_RUNS 256

/* Colours are variables so the light, dark and print schemes only swap
 * values. Categories use the Okabe-Ito palette (made to stay apart under
 * the common colour-vision deficiencies), a shade lighter on dark. */
static const char *const STYLE =
    ":root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--muted:#5b6470;--grid:#e4e7eb;--frame:#8a939e;"
    "--card:#f6f8fa;--border:#d0d7de;--oom:#c62828;--good:#1a7f37;--cap:#1b1f24;--line:#0b61a4;"
    "--band:rgba(27,31,36,.05);--unreached:rgba(27,31,36,.06);"
    "--param:#0072b2;--master:#56b4e9;--grad:#009e73;--optim:#e69f00;--act:#cc79a7;--transient:#d55e00;"
    "--comm:#f0e442;--reserve:#999;--unattributed:#555;--total:#6b7785}\n"
    "@media (prefers-color-scheme:dark){:root{--bg:#15181c;--fg:#e6e8eb;--muted:#9aa4ae;--grid:#2b3137;"
    "--frame:#5d6670;--card:#1d2227;--border:#363d44;--oom:#ff6b6b;--good:#4ac776;--cap:#e6e8eb;--line:#6cb6ff;"
    "--band:rgba(230,232,235,.05);--unreached:rgba(230,232,235,.06);"
    "--param:#2f8fd6;--master:#7cc6f0;--grad:#1fb589;--optim:#f0aa1e;--act:#d98cb6;--transient:#ec6f20;"
    "--comm:#f0e442;--reserve:#a6a6a6;--unattributed:#8a8a8a;--total:#8d98a5}}\n"
    "@media print{:root{--bg:#fff;--fg:#000;--muted:#444;--grid:#ddd;--frame:#777;--card:#fff;--border:#bbb;"
    "--oom:#b00;--good:#060;--cap:#000;--line:#0b61a4;--band:rgba(0,0,0,.05);--unreached:rgba(0,0,0,.06);"
    "--param:#0072b2;--master:#56b4e9;--grad:#009e73;--optim:#e69f00;--act:#cc79a7;--transient:#d55e00;"
    "--comm:#f0e442;--reserve:#999;--unattributed:#555;--total:#6b7785}"
    "*{-webkit-print-color-adjust:exact;print-color-adjust:exact}nav{display:none}"
    "body{font-size:10pt}main{max-width:none;padding:0}figure,.oombox,.plan,tr{break-inside:avoid}"
    "h2{break-before:page}section:first-of-type h2{break-before:auto}h3,h4{break-after:avoid}"
    "table.t{font-size:8pt;display:table;overflow:visible}}\n"
    "html{background:var(--bg);color:var(--fg)}"
    "body{margin:0;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif;"
    "background:var(--bg);color:var(--fg)}"
    "main{max-width:1040px;margin:0 auto;padding:24px 28px 48px}"
    "h1{font-size:1.7em;margin:.2em 0}h2{font-size:1.35em;margin:1.8em 0 .6em;padding-bottom:.2em;"
    "border-bottom:2px solid var(--border)}h3{font-size:1.1em;margin:1.4em 0 .5em}h4{margin:1.4em 0 .4em}"
    "code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.92em}"
    "nav ul{list-style:none;padding:0;display:flex;gap:1.2em;flex-wrap:wrap}a{color:var(--line)}"
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:.6em 0}"
    "dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere}"
    "p.facts,p.note,p.empty,p.reason{margin:.5em 0}.note,.muted{color:var(--muted)}"
    "p.empty{padding:.8em 1em;border:1px dashed var(--border);border-radius:6px;color:var(--muted)}"
    ".good{color:var(--good);font-weight:600}.bad{color:var(--oom);font-weight:600}"
    ".oombox{border:1px solid var(--oom);border-left:6px solid var(--oom);border-radius:6px;padding:.4em 1em;"
    "margin:1em 0;background:var(--card);display:flex;flex-wrap:wrap;gap:0 2em;align-items:flex-start}"
    ".oombox>p{flex:1 1 24em}.oombox>table.kv{flex:0 0 auto;margin:.5em 0}"
    "section.answer{border:1px solid var(--border);border-left:6px solid var(--line);border-radius:6px;"
    "padding:.1em 1em .4em;margin:1.2em 0;background:var(--card)}section.answer h2{margin-top:.5em}"
    ".plan{border:1px solid var(--border);border-radius:6px;padding:.3em 1em;margin:1em 0;background:var(--card)}"
    "figure{margin:1.2em 0 .6em}figcaption{margin-bottom:.3em}"
    "svg.chart{width:100%;height:auto;display:block;overflow:visible}"
    "svg text{fill:var(--fg);font-size:12px;font-family:inherit}"
    "svg .tick{fill:var(--muted);font-size:11px}svg .atitle{fill:var(--muted);font-size:12px}"
    "svg .grid{stroke:var(--grid);stroke-width:1}svg .frame,svg .tickmark{stroke:var(--frame);stroke-width:1}"
    "svg .cap{stroke:var(--cap);stroke-width:1.6;stroke-dasharray:7 4}svg .cap-l{font-size:11px;font-weight:600}"
    "svg .oom-line{stroke:var(--oom);stroke-width:1.6;stroke-dasharray:4 3}"
    "svg .oom-l,svg .oom-t{fill:var(--oom);font-weight:700}svg .peak-l,svg .gap-l{font-size:11px;font-weight:600}"
    "svg .peak-m{fill:var(--bg);stroke:var(--fg);stroke-width:1.5}"
    "svg .bar.oom rect{stroke:var(--oom);stroke-width:1.2}"
    "svg .req{stroke:var(--oom);stroke-width:1.4}svg .hatch-bg{fill:var(--bg)}"
    "svg .hatch-fg{stroke:var(--oom);stroke-width:2.4}"
    "svg .unreached{fill:var(--unreached)}svg .note-t{fill:var(--muted);font-style:italic;font-size:11px}"
    "svg .band0{fill:var(--band)}svg .band1{fill:none}svg .band-l{fill:var(--muted);font-size:11px}"
    "svg .oom-l,svg .cap-l,svg .peak-l,svg .gap-l,svg .band-l,svg .note-t{paint-order:stroke;stroke:var(--bg);"
    "stroke-width:3px;stroke-linejoin:round}"
    "svg .dev-l{font-weight:600}svg .line{fill:none;stroke:var(--line);stroke-width:1.8}"
    "svg .dot{fill:var(--line)}svg .skip-m{fill:var(--bg);stroke:var(--oom);stroke-width:1.5}"
    ".c-param{fill:var(--param);background:var(--param)}.c-master{fill:var(--master);background:var(--master)}"
    ".c-grad{fill:var(--grad);background:var(--grad)}.c-optim{fill:var(--optim);background:var(--optim)}"
    ".c-act{fill:var(--act);background:var(--act)}.c-transient{fill:var(--transient);background:var(--transient)}"
    ".c-comm{fill:var(--comm);background:var(--comm)}.c-reserve{fill:var(--reserve);background:var(--reserve)}"
    ".c-unattributed{fill:var(--unattributed);background:var(--unattributed)}"
    ".c-total{fill:var(--total);background:var(--total)}"
    "ul.legend{list-style:none;padding:0;margin:.3em 0;display:flex;flex-wrap:wrap;gap:.3em 1.1em;font-size:.9em}"
    "i.sw{display:inline-block;width:.9em;height:.9em;border-radius:2px;margin-right:.35em;vertical-align:-.08em}"
    "i.sw.hatch{background:repeating-linear-gradient(45deg,var(--oom) 0 2px,var(--bg) 2px 5px);"
    "outline:1px solid var(--oom)}i.sw.oomsw{background:var(--oom);height:.2em;vertical-align:.25em}"
    "i.sw.linesw{background:var(--line);height:.2em;vertical-align:.25em}"
    "i.sw.skipsw{border:1.5px solid var(--oom);border-radius:50%;background:var(--bg)}"
    "table.t{border-collapse:collapse;margin:.5em 0 1.4em;font-size:13px;display:block;overflow-x:auto;"
    "max-width:100%}"
    "table.t caption{text-align:left;color:var(--muted);padding:.2em 0;caption-side:top}"
    "table.t th,table.t td{padding:.25em .5em;border-bottom:1px solid var(--border);text-align:left;"
    "vertical-align:top;white-space:nowrap}"
    "table.t thead th{font-weight:600;border-bottom:2px solid var(--border);white-space:normal;vertical-align:bottom}"
    "table.t td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "table.t td.wrap{white-space:normal;overflow-wrap:anywhere;min-width:14em}"
    "table.t td.n small{display:block;color:var(--muted);font-size:.8em}"
    "table.t tr.oom td,table.t tr.oom th{background:color-mix(in srgb,var(--oom) 12%,transparent)}"
    "table.t tr.total th,table.t tr.total td{font-weight:600}table.t th.sub{padding-left:1.6em;font-weight:400}"
    "table.t th.rowh{font-weight:500}table.kv{display:table}table.kv td.n small{display:inline;margin-left:.7em}"
    "details.more{margin:.5em 0 1em}details.more summary{cursor:pointer;color:var(--line)}"
    "footer{margin-top:3em;color:var(--muted);font-size:.85em}\n";

/* ---- the runs of the report -------------------------------------------- */

typedef struct { int64_t id, parent; } run_link;
typedef struct { run_link *l; int n, cap, oom; } link_list;

static int collect_link(const ms_run_info *r, void *ctx)
{
    link_list *c = ctx;
    if (ms_grow((void **)&c->l, &c->cap, c->n, sizeof *c->l, 64)) { c->oom = 1; return 1; }
    c->l[c->n++] = (run_link){ r->id, r->parent };
    return 0;
}

/* The run and the runs it contains, breadth first (parents first), each
 * read in full. *out is malloc'd. Returns the count, or -1. */
static int gather_runs(ms_db *db, int64_t run, ms_run_info **out, char *err, size_t errlen)
{
    link_list links = { 0 };
    if (ms_db_list_runs(db, collect_link, &links) != 0 || links.oom) {
        snprintf(err, errlen, "%s", links.oom ? "out of memory" : ms_db_errmsg(db));
        free(links.l);
        return -1;
    }
    int64_t ids[MAX_RUNS];
    int depth[MAX_RUNS];
    int n = 0;
    ids[n] = run;
    depth[n++] = 0;
    for (int i = 0; i < n; i++) {
        if (depth[i] + 1 >= MAX_DEPTH) continue;
        for (int k = 0; k < links.n && n < MAX_RUNS; k++)
            if (links.l[k].parent == ids[i] && links.l[k].id != ids[i]) {
                ids[n] = links.l[k].id;
                depth[n++] = depth[i] + 1;
            }
    }
    free(links.l);
    ms_run_info *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < n; i++) {
        if (ms_db_get_run(db, ids[i], &runs[i]) != 0) {
            if (i == 0) snprintf(err, errlen, "no run %" PRId64 " in the database", run);
            else snprintf(err, errlen, "%s", ms_db_errmsg(db));
            free(runs);
            return -1;
        }
    }
    *out = runs;
    return n;
}

static void field(FILE *f, const char *label, const char *value)
{
    fprintf(f, "<dt>%s</dt><dd>", label);
    h_esc(f, value && *value ? value : "-");
    fputs("</dd>", f);
}

static void header(FILE *f, ms_db *db, const ms_run_info *runs, int n, int answered)
{
    const ms_run_info *r = &runs[0];
    fprintf(f, "<header>\n<h1>memsplit report: run %" PRId64 "</h1>\n<dl class=\"facts\" id=\"run-facts\">", r->id);
    field(f, "kind", r->kind);
    const char *state = ms_run_state(r);
    fprintf(f, "<dt>state</dt><dd class=\"%s\">", strcmp(state, "ok") == 0 ? "good"
                                                 : strcmp(state, "running") == 0 ? "" : "bad");
    h_esc(f, state);
    fputs("</dd>", f);
    field(f, "model", r->model);
    field(f, "started", r->started);
    if (r->finished[0]) {
        char line[96];
        snprintf(line, sizeof line, "%s (after %.1f s)", r->finished, r->finished_unix - r->started_unix);
        field(f, "finished", line);
    } else {
        field(f, "finished", "- (no end recorded)");
    }
    char devs[1024];
    if (rf_run_devices(db, r, devs, sizeof devs) == 0 || !devs[0]) snprintf(devs, sizeof devs, "- (none recorded)");
    field(f, "devices", devs);
    if (r->cmdline[0]) {
        fputs("<dt>command</dt><dd><code>", f);
        h_esc(f, r->cmdline);
        fputs("</code></dd>", f);
    }
    if (r->notes[0]) field(f, "notes", r->notes);
    if (n > 1) {
        fputs("<dt>contains</dt><dd>", f);
        for (int i = 1; i < n; i++) {
            fprintf(f, "%srun %" PRId64 " (", i > 1 ? ", " : "", runs[i].id);
            h_esc(f, runs[i].kind);
            fputs(", ", f);
            h_esc(f, ms_run_state(&runs[i]));
            fputs(")", f);
        }
        fputs("</dd>", f);
    }
    fprintf(f, "</dl>\n</header>\n<nav><ul>%s<li><a href=\"#trial\">1. The trial</a></li><li><a href=\"#plan\">2. The "
               "plan</a></li><li><a href=\"#training\">3. Training</a></li></ul></nav>\n",
            answered ? "<li><a href=\"#answer\">The answer</a></li>" : "");
}

int ms_html_report_run(FILE *f, ms_db *db, int64_t run, char *err, size_t errlen)
{
    if (!f || !db) { snprintf(err, errlen, "no output or no database"); return -1; }
    ms_run_info *runs = NULL;
    int n = gather_runs(db, run, &runs, err, errlen);
    if (n < 0) return -1;

    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"color-scheme\" content=\"light dark\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
          "<meta name=\"generator\" content=\"memsplit report\">\n<title>memsplit report: run ", f);
    fprintf(f, "%" PRId64, runs[0].id);
    if (runs[0].model[0]) { fputs(" (", f); h_escn(f, runs[0].model, sizeof runs[0].model); fputs(")", f); }
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", STYLE);
    /* A program's doctor run leads with its answer; the sections show how. */
    ms_answer a;
    int answered = ms_answer_load(db, runs[0].id, &a);
    int ret = answered < 0 ? -1 : 0;
    if (ret != 0) snprintf(err, errlen, "%s", ms_db_errmsg(db));
    header(f, db, runs, n, answered == 1);
    if (answered == 1) {
        h_answer(f, &a);
        ms_answer_free(&a);
    }
    if (ret == 0) ret = h_section_trial(f, db, runs, n, err, errlen);
    if (ret == 0) ret = h_section_plan(f, db, runs, n, err, errlen);
    if (ret == 0) ret = h_section_train(f, db, runs, n, err, errlen);
    fputs("<footer>Written by <code>memsplit report --html</code>. Sizes: KiB = 1024 bytes, MiB = 1024 KiB, "
          "GiB = 1024 MiB; every table also gives exact bytes. Hover a bar for its numbers.</footer>\n"
          "</main>\n</body>\n</html>\n", f);
    free(runs);
    if (ret == 0 && ferror(f)) {
        snprintf(err, errlen, "cannot write the page: %s", strerror(errno ? errno : EIO));
        ret = -1;
    }
    return ret;
}

int ms_html_report_write(const char *path, ms_db *db, int64_t run, char *err, size_t errlen)
{
    if (!path || !*path) { snprintf(err, errlen, "no output file named"); return -1; }
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (!tmp) { snprintf(err, errlen, "out of memory"); return -1; }
    /* a new file under a random name beside the page, never one planted
     * there ahead (vocab/tmpfile.h), then renamed into place */
    int fd = ms_tmp_create(path, tmp, len);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return -1;
    }
    int ret = ms_html_report_run(f, db, run, err, errlen);
    if (fclose(f) != 0 && ret == 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        ret = -1;
    }
    if (ret == 0 && rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        ret = -1;
    }
    if (ret != 0) unlink(tmp);
    free(tmp);
    return ret;
}
