/* launch.h — memsplit's side of the bridge: run the user's program with the
 * bridge in its environment and read the events its processes send.
 *
 * Contract:
 *  - msb_run_program() makes a private folder with a listening Unix socket,
 *    starts argv[0] (searched on PATH) with the caller's environment plus
 *    the bridge's variables (docs/bridge.md, "The process"; nothing is
 *    removed), and calls on_line for every line any of the program's
 *    processes writes, in each connection's order, until the program has
 *    exited and every connection is closed (or 2 s after its exit, for
 *    descendants that outlive it). The folder is removed at the end.
 *  - Ctrl-C reaches the program directly (it shares memsplit's process
 *    group); a SIGINT or SIGTERM sent to memsplit alone is forwarded. Either
 *    way memsplit waits for the program and reports `interrupted`.
 *  - Returns 0 when the program ran (its end in *ex), -1 when it could not
 *    be started (err says why: not found, not executable, no socket). */
#ifndef MS_BRIDGE_LAUNCH_H
#define MS_BRIDGE_LAUNCH_H

#include <stddef.h>

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
    int interrupted;           /* memsplit saw SIGINT/SIGTERM while it ran */
    int connections;           /* processes that connected */
} msb_exit;

typedef int (*msb_line_fn)(const char *line, size_t len, int conn, void *user);

int msb_run_program(const msb_launch *l, msb_line_fn on_line, void *user, msb_exit *ex, char *err, size_t errlen);

/* "exit status 1", "killed by signal 9 (Killed)", "interrupted (exit status 130)" */
const char *msb_exit_text(const msb_exit *ex, char *buf, size_t len);

#endif
