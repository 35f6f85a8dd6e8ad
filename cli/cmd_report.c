/* cmd_report.c — `memsplit report --db F [--run ID] [--list] [--json] [--html FILE]`
 * (see cmd_report.h). */
#include "cli/cmd_report.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/db.h"
#include "reports/html_report.h"
#include "reports/report_json.h"
#include "reports/term_report.h"

enum { EXIT_OK = 0, EXIT_USAGE = 1, EXIT_DB = 2 };

static void usage(FILE *f)
{
    fputs("usage: memsplit report --db FILE [--run ID] [--list] [--json | --brief]\n"
          "                       [--width N]\n"
          "       memsplit report --db FILE [--run ID] --html PAGE\n"
          "\n"
          "Prints a run stored in a memsplit run database: its header (id, kind,\n"
          "state, times, model, devices, command), then what was recorded under it:\n"
          "the per-layer profile table and, if the trial ran out of memory, the\n"
          "diagnosis; plans; per-device peaks; training steps; OOM recoveries; and\n"
          "the same for the runs it contains (a doctor's trial, plan and training).\n"
          "A run whose process died before it recorded its end shows as 'incomplete'.\n"
          "\n"
          "  --db FILE    the run database (required; never created by this command)\n"
          "  --run ID     the run to print (default: the newest top-level run)\n"
          "  --list       list every run, one line each, instead\n"
          "  --json       print one JSON object on stdout instead of text\n"
          "               (with --list: an array of runs)\n"
          "  --brief      one screen: a line per run, the diagnosis's first sentence\n"
          "               instead of the per-layer tables, plans, peaks, steps\n"
          "  --width N    wrap text to N columns (default 80)\n"
          "  --html PAGE  write the run as one self-contained HTML page instead (charts:\n"
          "               memory per layer, live memory over time, the plan per device,\n"
          "               training loss and tokens/s; each with a table of exact numbers)\n"
          "  -h, --help   this help\n"
          "\n"
          "Exit status: 0 printed (or the page written); 1 usage error; 2 the database\n"
          "cannot be opened or read, or holds no such run (or no run at all), or the\n"
          "page cannot be written.\n",
          f);
}

static int parse_int64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v <= 0) return -1;
    *out = v;
    return 0;
}

typedef struct { FILE *f; int width; int n; json_t *arr; } list_ctx;

static int list_one(const ms_run_info *r, void *ctx)
{
    list_ctx *l = ctx;
    l->n++;
    if (l->arr) {
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(r->id));
        json_object_set_new(o, "kind", json_string(r->kind));
        json_object_set_new(o, "status", json_string(r->status));
        json_object_set_new(o, "state", json_string(ms_run_state(r)));
        json_object_set_new(o, "started", json_string(r->started));
        json_object_set_new(o, "finished", r->finished[0] ? json_string(r->finished) : json_null());
        json_object_set_new(o, "model", json_string(r->model));
        json_object_set_new(o, "parent", r->parent ? json_integer(r->parent) : json_null());
        json_object_set_new(o, "has_profile", json_boolean(r->has_profile));
        json_array_append_new(l->arr, o);
    } else {
        ms_term_report_run_line(l->f, r, l->width);
    }
    return 0;
}

static int do_list(ms_db *db, int json, int width)
{
    list_ctx l = { stdout, width, 0, json ? json_array() : NULL };
    if (!json) printf("%5s  %-7s  %-10s  %-20s  %s\n", "run", "kind", "state", "started (UTC)", "model");
    if (ms_db_list_runs(db, list_one, &l) != 0) {
        fprintf(stderr, "memsplit report: %s\n", ms_db_errmsg(db));
        json_decref(l.arr);
        return EXIT_DB;
    }
    if (json) {
        json_dumpf(l.arr, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(l.arr);
    } else if (l.n == 0) {
        printf("(no runs recorded)\n");
    }
    return EXIT_OK;
}

typedef struct report_args {
    const char *path, *html;
    int64_t run, width;
    int json, list, brief;
} report_args;

/* 0 parsed, 1 help printed, -1 usage error (printed). */
static int parse_args(int argc, char **argv, report_args *a)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' },
        { "run", required_argument, NULL, 'r' },
        { "list", no_argument, NULL, 'l' },
        { "json", no_argument, NULL, 'j' },
        { "width", required_argument, NULL, 'w' },
        { "html", required_argument, NULL, 'H' },
        { "brief", no_argument, NULL, 'b' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *a = (report_args){ .width = 80 };
    int c;
    optind = 0;   /* glibc: full re-initialisation, other subcommands may have parsed */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': a->path = optarg; break;
        case 'r':
            if (parse_int64(optarg, &a->run) != 0) {
                fprintf(stderr, "memsplit report: --run wants a positive run id, not '%s'\n", optarg);
                return -1;
            }
            break;
        case 'l': a->list = 1; break;
        case 'b': a->brief = 1; break;
        case 'j': a->json = 1; break;
        case 'w':
            if (parse_int64(optarg, &a->width) != 0 || a->width < 40 || a->width > 1000) {
                fprintf(stderr, "memsplit report: --width wants 40..1000 columns, not '%s'\n", optarg);
                return -1;
            }
            break;
        case 'H': a->html = optarg; break;
        case 'h': usage(stdout); return 1;
        case ':':
            fprintf(stderr, "memsplit report: option '%s' needs a value (see memsplit report --help)\n",
                    argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "memsplit report: unknown option '%s' (see memsplit report --help)\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "memsplit report: unexpected argument '%s' (see memsplit report --help)\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* What the options cannot have together: 0, or -1 (printed). */
static int check_args(const report_args *a)
{
    const char *why = !a->path                          ? "--db FILE is required (see memsplit report --help)"
                      : a->list && a->run               ? "--list and --run go separately"
                      : a->html && (a->list || a->json || a->brief) ? "--html goes without --list, --json and --brief"
                      : a->brief && (a->list || a->json) ? "--brief goes without --list and --json"
                      : a->html && !*a->html            ? "--html wants a file name"
                                                        : NULL;
    if (why) fprintf(stderr, "memsplit report: %s\n", why);
    return why ? -1 : 0;
}

/* One run: the page, the JSON or the text. The exit status. */
static int report_run(ms_db *db, const report_args *a)
{
    char err[512];
    int64_t run = a->run ? a->run : ms_db_latest_top_run(db);
    if (run <= 0) {
        fprintf(stderr, "memsplit report: %s\n", run == 0 ? "the database holds no runs" : ms_db_errmsg(db));
        return EXIT_DB;
    }
    int status = EXIT_OK;
    if (a->html) {
        if (ms_html_report_write(a->html, db, run, err, sizeof err) != 0) {
            fprintf(stderr, "memsplit report: %s\n", err);
            return EXIT_DB;
        }
        fprintf(stderr, "memsplit report: wrote %s (run %lld)\n", a->html, (long long)run);
    } else if (a->json) {
        json_t *j = ms_report_run_json(db, run);
        if (j) {
            json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            fputc('\n', stdout);
            json_decref(j);
        } else {
            status = EXIT_DB;
        }
    } else if ((a->brief ? ms_term_report_run_brief : ms_term_report_run)(stdout, db, run, (int)a->width) != 0) {
        status = EXIT_DB;
    }
    if (status != EXIT_OK) fprintf(stderr, "memsplit report: %s\n", ms_db_errmsg(db));
    return status;
}

int ms_cmd_report(int argc, char **argv)
{
    report_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc > 0 ? EXIT_OK : EXIT_USAGE;
    if (check_args(&a)) return EXIT_USAGE;
    char err[512];
    ms_db *db = ms_db_open_readonly(a.path, err, sizeof err);
    if (!db) {
        fprintf(stderr, "memsplit report: %s\n", err);
        return EXIT_DB;
    }
    int status = a.list ? do_list(db, a.json, (int)a.width) : report_run(db, &a);
    ms_db_close(db);
    return status;
}
