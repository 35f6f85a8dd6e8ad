/* interrupt.c — a signal as a request to stop at the end of a step (interrupt.h). */
#include "run/interrupt.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t pending;
static char said[3][200];   /* the line for SIGINT, SIGTERM, SIGHUP */
static size_t said_len[3];
static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };

static int slot(int sig) { return sig == SIGINT ? 0 : sig == SIGTERM ? 1 : 2; }

static void on_signal(int sig)
{
    if (pending) { /* the second: at once, as if never armed */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    pending = sig;
    int k = slot(sig);
    if (said_len[k] && write(2, said[k], said_len[k]) < 0) { /* nothing to do about it here */ }
}

const char *ms_signal_name(int sig)
{
    static char other[24];
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    if (sig == SIGHUP) return "SIGHUP";
    snprintf(other, sizeof other, "signal %d", sig);
    return other;
}

void ms_interrupt_arm(const char *who)
{
    pending = 0;
    for (int i = 0; i < 3; i++) {
        int n = snprintf(said[i], sizeof said[i], "%s: %s received: stopping after the step in progress (again to stop "
                         "at once)\n", who ? who : "memsplit", ms_signal_name(sigs[i]));
        said_len[i] = n > 0 && (size_t)n < sizeof said[i] ? (size_t)n : 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) sigaddset(&sa.sa_mask, sigs[i]);
    sa.sa_flags = SA_RESTART; /* a step's own calls go on; the loops look between steps */
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, NULL);
}

void ms_interrupt_disarm(void)
{
    for (int i = 0; i < 3; i++) signal(sigs[i], SIG_DFL);
    pending = 0;
}

int ms_interrupt_signal(void) { return pending; }

int ms_interrupt_status(int sig) { return 128 + sig; }
