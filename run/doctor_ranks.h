/* doctor_ranks.h — memsplit doctor's training as MPI ranks (--launch):
 * OpenMPI ends every rank when one dies, so doctor stays outside the run and
 * starts the launcher (mpirun, srun) as its child.
 *
 * Contract: the plan is written to <ckdir>/run-<id>/plan.json and run as
 * `LAUNCH -n p*d memsplit-rank train --plan ... --checkpoint-dir
 * <ckdir>/run-<id> --db DB --db-run ID`, the child's stderr passed through
 * to the progress stream and read for the rank that failed (memsplit's own
 * "rank R (...)" line, else the launcher's "process rank R ... exited on
 * signal"). When a rank dies (killed, a device error, an out-of-memory the
 * run cannot recover in place), that rank's device is taken as lost: the
 * model is re-planned for the devices that remain (same precision and global
 * batch, so the checkpoint fits), a recovery is recorded, and the launcher
 * runs again with the new number of ranks, resuming from the newest
 * checkpoint (any layout resumes any other: trainer/ckpt_parts.h). Steps
 * after that checkpoint are redone and their rows replaced, so no
 * checkpointed step is lost and no step row is doubled. Each run's
 * checkpoints live in their own folder, so another run's are never resumed.
 *
 * Every rank that died is recorded (recovery_events and the run's notes):
 * the one the launcher names, and every rank that said nothing at all once
 * one was named (a rank the launcher stops says that a signal reached it).
 * A launcher killed outright is launched again once, with the same plan
 * (no rank died); its ranks are told to stop at its death (they set
 * PR_SET_PDEATHSIG) and doctor, their subreaper, ends what is left before
 * the next launch. The launcher has its own process group and no stdin; a
 * signal doctor receives (run/interrupt.h) is passed once to the ranks
 * (or to the launcher where they are not its children here), which stop
 * after a step, checkpointed: r->interrupted.
 *
 * Returns MS_OK (also when interrupted), MS_EOOM (nothing fits the devices
 * that remain after an out-of-memory; r->err says what would) or MS_EFAIL
 * (r->err: ranks died and no plan fits what remains, which is a failure,
 * never an out-of-memory); *plan may be replaced by the recovery's. r is
 * filled as ms_rerun fills it (losses from the database). */
#ifndef MS_RUN_DOCTOR_RANKS_H
#define MS_RUN_DOCTOR_RANKS_H

#include <stdio.h>

#include "run/model_args.h"
#include "run/rerun.h"

typedef struct ms_doctor_ranks_opts {
    const char *launch;              /* launcher words, split at spaces, e.g. "mpirun --oversubscribe" */
    const ms_model_args *ma;     /* the model options, passed on to every rank */
    const char *device;              /* --device for the ranks (cpu, cuda:K) or NULL: the ranks' default */
    const char *db_path;
    ms_db *db;
    int64_t run;                     /* the doctor's train run: steps, peaks, recoveries */
    const char *ckdir;               /* checkpoints go to <ckdir>/run-<run> */
    int ckevery;                     /* steps between checkpoints (0: only at the end) */
    const char *inject_kill;         /* testing aid, first launch only: "STEP:RANK" */
    const ms_profile *prof;          /* for re-planning */
    ms_plan_opts popts;              /* the options the plan was made with */
    int quiet;
    FILE *progress;
    int db_timeout_ms;               /* passed on to rank 0 as --db-timeout */
} ms_doctor_ranks_opts;

/* plan_id: the plan's id in the database (0: none), the first recovery's old plan. */
int ms_doctor_ranks(const ms_config *cfg, ms_plan *plan, const ms_doctor_ranks_opts *o, int64_t plan_id,
                    ms_rerun_result *r);

#endif
