/* program.h — the subcommands' side of the PyTorch bridge: finding the
 * bridge beside the memsplit binary, running one pass of a user's program,
 * and saying plainly why a pass gave no model. `memsplit profile -- ...` is
 * ms_cmd_profile_program (cli/profile_program.c). */
#ifndef MS_CLI_PROGRAM_H
#define MS_CLI_PROGRAM_H

#include <stddef.h>

#include <jansson.h>

#include <stdio.h>

#include "bridge/host/launch.h"
#include "planner/planner.h"
#include "bridge/trace.h"

/* $MEMSPLIT_BRIDGE_DIR, else <memsplit's folder>/bridge; checks that the
 * Python package and the library are there. 0 or -1 with err. */
int ms_program_bridge_dir(char *out, size_t len, char *err, size_t errlen);
/* Runs prog once with config (docs/bridge.md), collecting into t (which the
 * caller initialised); progress lines "profile: LABEL: step k/N done";
 * with json the program's stdout goes to stderr. */
int ms_program_pass(char *const *prog, const char *bridge_dir, json_t *config, const char *phase, int inject,
                    const char *label, int quiet, int json, msb_trace *t, msb_exit *ex, char *err, size_t errlen);
/* Why the pass gave no model (no handshake, no torch, a refusal, it ended
 * before training), or NULL when it gave one. */
const char *ms_program_failure(const msb_trace *t, const msb_exit *ex, char *buf, size_t len);
/* The program's name: the first argument ending in .py, else argv[0]. */
void ms_program_name(char *const *prog, char *out, size_t len);

int ms_cmd_profile_program(int argc, char **argv);

/* memsplit plan on a program's profile: the program's precision and batch
 * fixed, the schedule sequential, no recompute; -1 with err when an option
 * asks to change what is the program's own. No-op for the built-in model. */
int ms_program_plan_opts(const ms_profile *p, ms_plan_opts *o, char *err, size_t errlen);
/* "placement: segment1, transformers.0-12 → cuda:0; transformers.13-23, segment2 → cuda:1" */
void ms_program_placement(FILE *f, const ms_plan *pl);
/* Python that places the modules by hand, on the plan's devices. */
void ms_program_snippet(FILE *f, const ms_plan *pl);
extern const char ms_profile_program_usage[];

#endif
