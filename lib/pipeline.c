/*
 * pipeline.c - send several statements to PostgreSQL in one round trip
 * (libpq pipeline mode) and collect their results.  Unnamed statements
 * only (PQsendQueryParams), so pgbouncer in transaction mode works.
 */
#include <stdlib.h>
#include <string.h>

#include "private.h"

/* Errors of the server or the connection rather than of the request. */
static int
transient(const PGresult *r)
{
	const char	*st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

	return st == NULL || strncmp(st, "08", 2) == 0 ||
	    strncmp(st, "57", 2) == 0 || strncmp(st, "53", 2) == 0 ||
	    strncmp(st, "40", 2) == 0;
}

/*
 * After a failed statement the rest of the flight comes back aborted: read
 * up to the sync, so that the connection leaves pipeline mode and its
 * transaction can be rolled back at once (it may hold a key's lock).
 */
static void
drain(PGconn *db)
{
	PGresult	*r;
	int		 guard;

	for (guard = 0; guard < 256 && PQstatus(db) == CONNECTION_OK;
	    guard++) {
		if ((r = PQgetResult(db)) == NULL)
			continue;
		if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			return;
		}
		PQclear(r);
	}
}

enum idem_rc
idem_pipeline(PGconn *db, struct idem_q *q, size_t n, unsigned *round_trips)
{
	size_t		 i;
	PGresult	*r;
	ExecStatusType	 st;
	enum idem_rc	 rc = IDEM_RC_OK;

	for (i = 0; i < n; i++)
		q[i].res = NULL;
	if (PQenterPipelineMode(db) == 0)
		return -1;
	for (i = 0; i < n; i++)
		if (PQsendQueryParams(db, q[i].sql, q[i].n, NULL, q[i].vals,
		    q[i].lens, q[i].fmts, q[i].binary) == 0) {
			rc = -1;
			break;
		}
	/* The sync ends the flight and flushes it to the server. */
	if (PQpipelineSync(db) == 0)
		rc = -1;
	if (round_trips != NULL)
		(*round_trips)++;
	if (rc == -1)
		goto out;
	for (i = 0; i < n; i++) {
		/* One result per statement (or PIPELINE_ABORTED), then NULL. */
		if ((r = PQgetResult(db)) == NULL) {
			rc = IDEM_RC_TRANSIENT;	/* the connection went away */
			goto out;
		}
		q[i].res = r;
		st = PQresultStatus(r);
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			idem_log(IDEM_LOG_ERROR, "db: %s",
			    PQresultErrorMessage(r));
			rc = transient(r) ? IDEM_RC_TRANSIENT : IDEM_RC_FAIL;
			goto out;
		}
		while ((r = PQgetResult(db)) != NULL)
			PQclear(r);
	}
	rc = IDEM_RC_OK;
	/* And the sync that closes the flight. */
	if ((r = PQgetResult(db)) != NULL)
		PQclear(r);
out:
	if (rc != 0)
		drain(db);
	/*
	 * Every statement's own result decides: a COMMIT that answered OK
	 * has committed even if the connection broke before the sync.  A
	 * connection left in pipeline mode is reset when it is released.
	 */
	if (PQexitPipelineMode(db) == 0)
		idem_log(IDEM_LOG_WARN, "db: cannot leave pipeline mode: %s",
		    PQerrorMessage(db));
	return rc;
}

void
idem_pipeline_clear(struct idem_q *q, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		PQclear(q[i].res);
		q[i].res = NULL;
	}
}
