/* launch.h — memsplit's side of the bridge: run the user's program with the
 * bridge in its environment and read the events its processes send.
 *
 * Contract:
 *  - msb_run_program() makes a private folder with a listening Unix socket,
 *    starts argv[0] (searched on PATH) with the caller's environment plus
 *    the bridge's variables (docs/bridge.md, "The process"; nothing is
 *    removed), and calls on_line for every line any of the program's
 *    processes writes, in each connection's order (reader.h: no connection,
 *    idle, stalled or flooding, holds up the others), until the program has
 *    exited and every connection is closed (or 2 s after its exit, for
 *    descendants that outlive it). The folder is removed at the end.
 *  - Stopping (docs/bridge.md, "Signals"): msb_stop_catch() makes memsplit
 *    catch SIGINT, SIGTERM and SIGHUP (an ignored SIGHUP stays ignored: nohup)
 *    for the rest of the process; a program's commands call it first, and
 *    msb_run_program does too. A stop signal reaches the program: Ctrl-C
 *    from the terminal reaches it directly when it shares memsplit's process
 *    group; otherwise (kill, a job scheduler, a program that left the group
 *    with setsid()) memsplit passes it on, to the program's own process
 *    group when it has one, and to every process still connected to the
 *    bridge. If they have not ended MSB_STOP_GRACE_MS later, or at a second
 *    signal, they are killed (SIGKILL). msb_run_program then returns 0 with
 *    ex->interrupted and ex->stop_signal set. msb_stop_signal() is the first
 *    stop signal memsplit got (0: none): the caller records `interrupted`,
 *    starts nothing more, and ends with 128 + that signal. No program is
 *    started once a stop was asked (-1, err says so).
 *  - Returns 0 when the program ran (its end in *ex), -1 when it could not
 *    be started (err says why: not found, not executable, no socket). */
#ifndef MS_BRIDGE_LAUNCH_H
#define MS_BRIDGE_LAUNCH_H

#include <stddef.h>

#include "bridge/host/reader.h"

#define MSB_STOP_GRACE_MS 10000

typedef struct msb_launch {
    char *const *argv;         /* the program and its arguments */
    const char *bridge_dir;    /* holds libmemsplit_bridge.so, libmemsplit_inject.so, python/ */
    const char *config_json;   /* MEMSPLIT_BRIDGE_CONFIG */
    const char *phase;         /* MEMSPLIT_PHASE ("trial", "train") */
    int inject;                /* set CUDA_INJECTION64_PATH (CUPTI in the program) */
    int stdout_to_stderr;      /* the program's stdout goes to memsplit's stderr (memsplit --json owns stdout) */
} msb_launch;

typedef struct msb_exit {
    int exited, status;        /* exit status when it exited */
    int signaled, signo;       /* the signal that ended it */
    int interrupted;           /* memsplit was asked to stop while it ran */
    int stop_signal;           /* the signal that asked it (SIGINT, SIGTERM, SIGHUP), 0 none */
    int connections;           /* processes that connected */
} msb_exit;

int msb_run_program(const msb_launch *l, msb_line_fn on_line, void *user, msb_exit *ex, char *err, size_t errlen);

void msb_stop_catch(void);
int msb_stop_signal(void);

/* "exit status 1", "killed by signal 9 (Killed)", "interrupted (exit status 130)" */
const char *msb_exit_text(const msb_exit *ex, char *buf, size_t len);

#endif
