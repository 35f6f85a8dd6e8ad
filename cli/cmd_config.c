/* cmd_config.c — `memsplit config`: a configuration as the INI file that
 * --config reads back, or the reference of every key (docs/config.md). */
#include "cli/common.h"
#include "trainer/config_doc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: memsplit config [--preset NAME | --config FILE] [--set KEY=VALUE ...]\n"
    "                       [options]\n"
    "       memsplit config --keys-md\n"
    "\n"
    "Prints the configuration the model options make, as an INI file with every\n"
    "key (what --config FILE reads back), after checking it as a run would. With\n"
    "--keys-md, prints the reference of every key, its type, range and meaning,\n"
    "and each preset's values, in Markdown: docs/config.md is this output.\n"
    "\n"
    "%s"
    "Options:\n"
    MS_CLI_RUN_HELP
    "  --keys-md            the reference of every key instead\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 printed; 1 usage or configuration error.\n";

int ms_cmd_config(int argc, char **argv)
{
    enum { O_MODEL = 1000, O_KEYS };
    static const struct option opts[] = {
        { "preset", required_argument, 0, O_MODEL }, { "config", required_argument, 0, O_MODEL },
        { "set", required_argument, 0, O_MODEL }, { "device", required_argument, 0, O_MODEL },
        { "precision", required_argument, 0, O_MODEL }, { "gpu-mem", required_argument, 0, O_MODEL },
        { "steps", required_argument, 0, O_MODEL }, { "batch", required_argument, 0, O_MODEL },
        { "data", required_argument, 0, O_MODEL }, { "keys-md", no_argument, 0, O_KEYS },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    ms_model_args ma;
    ms_model_args_init(&ma);
    char err[512];
    int keys = 0, idx = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        switch (c) {
        case O_MODEL:
            if (ms_cli_model_opt(&ma, opts[idx].name, optarg, err, sizeof err) < 0) {
                fprintf(stderr, "memsplit config: %s\n", err);
                return MS_EXIT_USAGE;
            }
            break;
        case O_KEYS: keys = 1; break;
        case 'h': printf(usage, ms_cli_model_help); return MS_EXIT_OK;
        default: fprintf(stderr, "memsplit config: see --help\n"); return MS_EXIT_USAGE;
        }
    }
    if (optind < argc) { fprintf(stderr, "memsplit config: unexpected argument '%s'\n", argv[optind]); return MS_EXIT_USAGE; }
    if (keys) {
        if (ma.preset || ma.config || ma.n_sets) {
            fprintf(stderr, "memsplit config: --keys-md takes no model options\n");
            return MS_EXIT_USAGE;
        }
        return ms_config_write_keys_md(stdout) ? MS_EXIT_RUNTIME : MS_EXIT_OK;
    }
    if (!ma.preset && !ma.config) ma.preset = "tiny";
    ms_config cfg;
    if (ms_model_args_config(&ma, &cfg, err, sizeof err)) {
        fprintf(stderr, "memsplit config: %s\n", err);
        return MS_EXIT_USAGE;
    }
    char *ini = ms_config_to_ini(&cfg);
    if (!ini) { fprintf(stderr, "memsplit config: out of memory\n"); return MS_EXIT_RUNTIME; }
    fputs(ini, stdout);
    free(ini);
    return MS_EXIT_OK;
}
