/*
 * idem_test_private.h - the functions libidem exports (lib/idem.sym) for
 * libidem_test alone: no application's API, so in no installed header.
 */
#ifndef IDEM_TEST_PRIVATE_H
#define IDEM_TEST_PRIVATE_H

#include "idem.h"

/* app.c: everything idem_app_run() sets up before it serves (routes'
 * checks, the framework's routes, the pool, the metrics): 0, or the exit
 * status.  The C regress harness (tests/regress) serves from there too. */
int	idem_app_prepare(idem_app *app);

/* conns.c: one request read from a blocking fd and answered, as a worker
 * would: 0 when it was answered, -1 when not (closed, timed out, refused). */
int	idem_conns_serve_one(idem_app *app, int fd);

/* dispatcher.c: deliver what is due (at most max deliveries; 0: until
 * none is due) and evict a batch; fills the counts.  IDEM_RC_OK (0), or
 * IDEM_RC_FAIL (-1) when the database was not available.  The "deliver"
 * command, and idem_test_deliver(). */
struct idem_deliver_counts {
	long	delivered, failed, dead, evicted;
};
int	idem_deliver_run(idem_app *app, long max,
	    struct idem_deliver_counts *counts);

/* log.c: where log lines go from now on, process-wide: fn(arg, p, len)
 * with one or more whole lines (JSON objects, each ending in "\n"),
 * called under a lock, so never twice at once; fn NULL: stderr. */
typedef void (*idem_log_output_fn)(void *arg, const char *p, size_t len);
void	idem_log_output(idem_log_output_fn fn, void *arg);

#endif /* IDEM_TEST_PRIVATE_H */
