/* launcher.h — a launcher of MPI ranks (mpirun, srun) as memsplit doctor's
 * child: started, watched, stopped, and what its output says of the ranks'
 * end (run/doctor_ranks.h decides what to do about it).
 *
 * Contract: ms_launcher_run() runs argv with stdout into out_path (rank 0's
 * JSON) and stderr passed line by line to progress (NULL: not shown) and
 * read for the ranks' ends; returns when the launcher has ended and no rank
 * it started is left (0), or -1 with err when it could not start.
 *  - The launcher gets its own process group and /dev/null for stdin, so a
 *    terminal's Ctrl-C reaches doctor alone; it gets SIGTERM if doctor dies
 *    (PR_SET_PDEATHSIG). Doctor becomes the subreaper of its ranks.
 *  - A signal doctor receives while it runs (run/interrupt.h) is passed on
 *    once: SIGTERM to each rank that is the launcher's child here (so every
 *    rank stops after a step, checkpointed, in its own time: mpirun, told
 *    itself, kills its ranks a second later), else to the launcher; the
 *    launcher after a minute if the ranks have not ended; SIGKILL to its
 *    group after another. e->interrupted says which signal.
 *  - Ranks a dead launcher left (orphaned to doctor) get 10 s to stop, then
 *    are killed; e->orphans counts them.
 *  - e says: the exit status (128 + N when killed, e->signaled), the first
 *    failing rank and why (the launcher's "process rank R ... exited on
 *    signal S", MPI_Abort's "invoked on rank R", memsplit's own "rank R
 *    (...): what: why", in that order of evidence), and per rank whether it
 *    said anything, the signal it said it received, and the signal the
 *    launcher says ended it.
 * ms_launch_end_free() frees e's arrays. */
#ifndef MS_RUN_LAUNCHER_H
#define MS_RUN_LAUNCHER_H

#include <stddef.h>
#include <stdio.h>

typedef struct ms_launch_end {
    int status;       /* exit status, 128 + signal when killed */
    int signaled;     /* the launcher itself was killed by a signal (status - 128) */
    int interrupted;  /* doctor got this signal while the launcher ran, and passed it on */
    int rank;         /* the rank that failed first, -1: not said */
    char why[200];
    int rank_of[3];   /* by evidence: 0 killed by a signal (the launcher), 1 MPI_Abort, 2 memsplit's own line */
    char why_of[3][200];
    char ours[64][200]; /* memsplit's own line of each rank (the first 64), "" none */
    int n;            /* ranks launched */
    int *said;        /* [n]: the rank said something (a line of its own, or that a signal reached it) */
    int *got;         /* [n]: the signal the rank said it received (run/interrupt.h), 0 none */
    int *killed;      /* [n]: the signal the launcher says ended the rank, 0 none */
    int orphans;      /* ranks left running by a launcher that died, ended by doctor */
} ms_launch_end;

int ms_launcher_run(char **argv, const char *out_path, int n_ranks, FILE *progress, ms_launch_end *e, char *err,
                    size_t errlen);
void ms_launch_end_free(ms_launch_end *e);

#endif
