/*
 * idem_test_private.h - the two functions libidem exports (lib/idem.sym)
 * for libidem_test alone: no application's API, so in no installed header.
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

#endif /* IDEM_TEST_PRIVATE_H */
