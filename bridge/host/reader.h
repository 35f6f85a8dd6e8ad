/* reader.h — the program's connections to memsplit's bridge socket, read
 * into lines: the event loop's core (launch.h runs it; the fuzz harness
 * tests/fuzz/fuzz_bridge_events.c drives it with forged connections).
 *
 * The program is untrusted input: it may open any number of connections,
 * leave them idle, stall in the middle of a line, send lines of any length
 * or close at any time. Contract:
 *  - msb_reader_new() takes a listening socket (made non-blocking here; the
 *    caller keeps it and closes it after msb_reader_free).
 *  - msb_reader_step() waits up to timeout_ms for something to happen, then
 *    accepts every pending connection (non-blocking, close-on-exec) and
 *    reads from each connection that was ready when it waited, at most
 *    MSB_READ_BUDGET bytes each, so that no connection, idle or busy,
 *    holds up the others or the caller. It never blocks past timeout_ms
 *    plus the time on_line takes.
 *  - Every line a connection writes ('\n'-terminated) goes to on_line in
 *    that connection's order, with the connection's id (0, 1, ... in the
 *    order they were accepted; never reused). A line longer than
 *    MSB_MAX_LINE bytes is dropped and reported as on_line(NULL, 0, id). At
 *    a connection's end its unterminated last line, if any, is passed on.
 *  - Connections past MSB_MAX_OPEN open at once, or past the process's
 *    descriptor limit, are refused (accepted and closed, or left in the
 *    backlog until one closes) without spinning.
 *  - Returns 0, or -1 with err when on_line returned non-zero (the reading
 *    stops there) or memory ran out. A signal that interrupts the wait is
 *    not an error.
 *  - msb_reader_free() closes every connection still open. */
#ifndef MS_BRIDGE_READER_H
#define MS_BRIDGE_READER_H

#include <stddef.h>

#define MSB_MAX_LINE (1 << 20)
#define MSB_READ_BUDGET (256 * 1024)
#define MSB_MAX_OPEN 1024

typedef int (*msb_line_fn)(const char *line, size_t len, int conn, void *user);

typedef struct msb_reader msb_reader;

msb_reader *msb_reader_new(int listen_fd, msb_line_fn on_line, void *user);
int msb_reader_step(msb_reader *r, int timeout_ms, char *err, size_t errlen);
int msb_reader_open(const msb_reader *r);        /* connections open now */
int msb_reader_accepted(const msb_reader *r);    /* connections accepted so far */
/* The processes at the other end of the open connections (as they
 * connected): up to max pids into pids, the count. */
int msb_reader_peers(const msb_reader *r, int *pids, int max);
void msb_reader_free(msb_reader *r);

#endif
