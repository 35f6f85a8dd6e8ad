/* cmd_plan.h — `memsplit plan`: the fastest split of a profiled model over
 * the given GPUs (planner/), printed as a table and a paragraph, or as the
 * plan JSON with --json; stored in the run database when read from one.
 *
 * Contract: argv[0] is the subcommand's name ("plan"); options are parsed
 * with getopt_long from argv[1]. Returns the process exit status: 0 a plan
 * was found; 1 usage error or an unreadable / invalid profile; 2 the
 * database cannot be opened, read or written, or the plan file cannot be
 * written; 3 no plan fits (the message
 * says what would). ms_cmd_plan_ex() also takes a function that detects
 * the machine's GPUs and their capacities, called only when the flags leave
 * the count or the capacities open (so a plan given both never starts
 * CUDA); ms_cmd_plan() is ms_cmd_plan_ex() with none. */
#ifndef MS_CMD_PLAN_H
#define MS_CMD_PLAN_H

#include <stdint.h>

int ms_cmd_plan(int argc, char **argv);
int ms_cmd_plan_ex(int argc, char **argv, int (*detect)(uint64_t *caps, int max));

#endif
