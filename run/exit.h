/* exit.h — how a run ends, as the process's exit status: what every run/
 * function that runs a command returns and every front end passes on. */
#ifndef MS_RUN_EXIT_H
#define MS_RUN_EXIT_H

enum {
    MS_EXIT_OK = 0,       /* success (for profile: the model fits) */
    MS_EXIT_USAGE = 1,    /* bad flags, bad config, bad input file */
    MS_EXIT_RUNTIME = 2,  /* I/O, CUDA or checkpoint failure */
    MS_EXIT_OOM = 3,      /* ran out of memory / no plan fits */
};

/* Stopped by a signal (SIGINT, SIGTERM, SIGHUP) and recorded `interrupted`:
 * 128 + the signal, as a shell reports a process the signal ended (130 for
 * SIGINT, 143 for SIGTERM). */
#define MS_EXIT_STOPPED(sig) (128 + ((sig) > 0 ? (sig) : 2))

#endif
