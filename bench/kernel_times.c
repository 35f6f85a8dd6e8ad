/* kernel_times.c — sums an event file (profiler/kernel_times.h's format,
 * written by bench/torch_ref.py --kernel-times from torch.profiler's trace)
 * per kernel family, with the same classifier and summary as `memsplit
 * train --kernel-times`, so the benchmark compares memsplit and PyTorch
 * step breakdowns made by one piece of code.
 *
 *   kernel_times [--top N] EVENTS.json
 *
 * Prints the summary JSON on stdout, with the file's other top-level keys
 * (impl, precision, ...) copied beside it. Exit 0, 1 on a bad argument or
 * file (said on stderr). No GPU needed. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/kernel_times.h"

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "top", required_argument, 0, 't' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int top = 15, c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 't') top = atoi(optarg);
        else if (c == 'h') { puts("usage: kernel_times [--top N] EVENTS.json"); return 0; }
        else return 1;
    }
    if (optind != argc - 1 || top < 0) { fprintf(stderr, "usage: kernel_times [--top N] EVENTS.json\n"); return 1; }
    json_error_t je;
    json_t *f = json_load_file(argv[optind], 0, &je);
    if (!f) { fprintf(stderr, "kernel_times: %s: %s (line %d)\n", argv[optind], je.text, je.line); return 1; }
    ms_ktimes k;
    ms_ktimes_init(&k);
    int steps = 0;
    uint64_t wall = 0;
    char err[256];
    if (ms_ktimes_read_json(&k, f, &steps, &wall, err, sizeof err)) {
        fprintf(stderr, "kernel_times: %s: %s\n", argv[optind], err);
        return 1;
    }
    if (steps < 1) { fprintf(stderr, "kernel_times: %s: \"steps\" must be at least 1\n", argv[optind]); return 1; }
    json_t *s = ms_ktimes_summary(&k, steps, 0, 0, wall, top);
    if (!s) { fprintf(stderr, "kernel_times: out of memory\n"); return 1; }
    const char *key;
    json_t *v;
    json_object_foreach(f, key, v)
        if (strcmp(key, "names") && strcmp(key, "events") && !json_object_get(s, key)) json_object_set(s, key, v);
    json_object_set_new(s, "records", json_integer(k.n));
    char *text = json_dumps(s, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (text) puts(text);
    free(text);
    json_decref(s);
    json_decref(f);
    ms_ktimes_free(&k);
    return 0;
}
