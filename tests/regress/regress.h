/*
 * regress.h - the C regress harness: an idem application in this process,
 * served one request at a time over a socketpair that carries real
 * FastCGI records (as kcgi's regress/ does), with PostgreSQL as the only
 * other thing needed.  Each tests/regress/r_*.c checks one behaviour and
 * prints TAP; tests/run runs them after migrating its database.
 *
 * Environment: IDEM_REGRESS_CONNINFO, the libpq conninfo of a database
 * migrated with idemctl migrate (unset: the program skips).
 */
#ifndef REGRESS_H
#define REGRESS_H

#include <stddef.h>

#include "private.h"

struct idem_test_resp;

struct rg_resp {
	int			 status;
	char			*body;		/* NUL-terminated */
	size_t			 bodylen;
	struct idem_test_resp	*resp;		/* its headers */
};

/*
 * Set up the application: routes() registers the test's routes; a fresh
 * API key is created (rg_secret()).  Exits 0 with a TAP skip when
 * IDEM_REGRESS_CONNINFO is unset, 1 on a setup failure.
 */
void		 rg_setup(const char *name, void (*routes)(idem_app *));
/* Config lines appended to the harness's own (set before rg_setup()). */
extern const char *rg_config;
idem_app	*rg_app(void);
const char	*rg_secret(void);
/* The API key's id (its tenant), as text. */
const char	*rg_tenant(void);
/* A key unique to this run ("name-pid-n"). */
const char	*rg_key(char *buf, size_t len, const char *tag);
/*
 * One request through the FastCGI socketpair: method, path, the
 * Idempotency-Key field value (NULL: none) and a JSON body (NULL: none).
 * 0, or -1 when the exchange itself failed.
 */
int		 rg_request(const char *method, const char *path,
		    const char *key, const char *body, struct rg_resp *out);
/* A response header's value (the first), or NULL. */
const char	*rg_header(const struct rg_resp *r, const char *name,
		    char *buf, size_t len);
void		 rg_resp_free(struct rg_resp *r);
/* A scalar of a query on the test's own connection, as text ("" if
 * none); for checks of what was stored. */
const char	*rg_scalar(const char *sql, const char *param, char *buf,
		    size_t len);
/*
 * The same, on a connection of the application's pool (the one its
 * requests used last, when the pool has one connected): what the server
 * holds for that session.  *nprepared (if not NULL) is the number of
 * statements the pool noted as prepared on it.
 */
const char	*rg_pool_scalar(const char *sql, char *buf, size_t len,
		    unsigned *nprepared);
/* How many rows of regress_things the test's tenant has (-1: none read). */
int		 rg_things(void);
void		 rg_teardown(void);

/*
 * The harness's application (pass rg_things_routes to rg_setup()):
 * POST /things, idempotent and atomic, inserts a row of regress_things
 * (its "note" member) and answers 201 {"id":N} with a Location header;
 * POST /phased does the same in a phase that commits "inserted", then
 * answers 201 {"resumed":BOOL}.  rg_in_handler, when set, is called at
 * the start of POST /things (a test can send a second request from
 * there); rg_fail_after_phase makes the next phased request fail once
 * right after its phase commit.
 */
void		 rg_things_routes(idem_app *app);
extern void	(*rg_in_handler)(const char *note);
extern int	 rg_fail_after_phase;

#endif
