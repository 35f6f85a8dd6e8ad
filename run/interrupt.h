/* interrupt.h — SIGINT, SIGTERM and SIGHUP as a request to stop cleanly.
 *
 * Killed at once, a run lost the steps since its last checkpoint and stayed
 * "running" in the database. Armed, a signal is recorded and said at once
 * (one line on stderr, written from the handler); the run stops at the end
 * of the step in progress, writes a checkpoint of that step where it has a
 * checkpoint folder, records its end as "interrupted" and exits 128 + the
 * signal, as a shell reports a process a signal ended: 130 SIGINT, 143
 * SIGTERM, 129 SIGHUP. A second signal ends the process at once.
 *
 * Contract: ms_interrupt_arm(who) installs the handlers (who: the line's
 * prefix, e.g. "memsplit train" or "memsplit train: rank 1"; the line says
 * "WHO: SIGTERM received: stopping after the step in progress (again to stop
 * at once)"). ms_interrupt_signal(): the first signal received since
 * arming, 0 none. ms_interrupt_status(sig): 128 + sig.
 * ms_interrupt_disarm(): the default actions back, and nothing pending.
 * ms_signal_name(sig): "SIGTERM", "SIGINT", "SIGHUP", or "signal N" (a
 * static string). Handlers run only async-signal-safe calls. */
#ifndef MS_RUN_INTERRUPT_H
#define MS_RUN_INTERRUPT_H

void ms_interrupt_arm(const char *who);
void ms_interrupt_disarm(void);
int ms_interrupt_signal(void);
int ms_interrupt_status(int sig);
const char *ms_signal_name(int sig);

#endif
