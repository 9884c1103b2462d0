/*
 * pipeline.c - send several statements to PostgreSQL in one round trip
 * (libpq pipeline mode) and collect their results.  A statement with
 * parameters is prepared on the connection the first time it is sent (the
 * Parse travels in the same flight) and executed by name after that, so
 * the server plans it once per connection; where the connection's
 * statements are disabled (a pooler between us and the server, or
 * [database] prepared_statements = off) everything is sent unnamed.
 */
#include <stdlib.h>
#include <string.h>

#include "private.h"

/* Errors of the server or the connection rather than of the request. */
static int
transient(const PGresult *r)
{
	const char	*st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

	return st == NULL || idem_sqlstate_transient(st);
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

/*
 * The server's statements are not what this connection noted: one it
 * prepared is gone (26000: a DISCARD ALL), or one it did not is there
 * (42P05).  Both mean a session that changed under us, as a pooler in
 * transaction mode does.
 */
static int
statements_differ(const PGresult *r)
{
	const char	*st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

	return st != NULL &&
	    (strcmp(st, "26000") == 0 || strcmp(st, "42P05") == 0);
}

static int
send_one(PGconn *db, struct idem_stmts *stmts, const struct idem_q *q,
    enum idem_stmt_use *use)
{
	char	name[IDEM_STMT_NAME_LEN];

	*use = stmts != NULL && q->n > 0 ?
	    idem_stmts_use(stmts, q->sql, name) : IDEM_STMT_UNNAMED;
	if (*use == IDEM_STMT_UNNAMED)
		return PQsendQueryParams(db, q->sql, q->n, NULL, q->vals,
		    q->lens, q->fmts, q->binary);
	if (*use == IDEM_STMT_PREPARE &&
	    PQsendPrepare(db, name, q->sql, q->n, NULL) == 0)
		return 0;
	return PQsendQueryPrepared(db, name, q->n, q->vals, q->lens, q->fmts,
	    q->binary);
}

/* One statement's result; NULL when the connection went away. */
static PGresult *
next_result(PGconn *db)
{
	PGresult	*r, *extra;

	if ((r = PQgetResult(db)) != NULL)
		while ((extra = PQgetResult(db)) != NULL)
			PQclear(extra);
	return r;
}

/* How reading a flight's results ended. */
enum read_end {
	READ_OK,		/* every statement succeeded */
	READ_GONE,		/* the connection went away */
	READ_FAILED		/* a statement failed (its result kept) */
};

/* Each statement's result into q[i].res; *bad: the one that failed. */
static enum read_end
read_all(PGconn *db, struct idem_stmts *stmts, struct idem_q *q, size_t n,
    const enum idem_stmt_use *use, size_t *bad)
{
	PGresult		*r;
	ExecStatusType		 st;
	size_t			 i;

	for (i = 0; i < n; i++) {
		*bad = i;
		/* The Parse's own result first, where one was sent. */
		if (use[i] == IDEM_STMT_PREPARE) {
			if ((r = next_result(db)) == NULL)
				return READ_GONE;
			if (PQresultStatus(r) == PGRES_COMMAND_OK)
				(void)idem_stmts_add(stmts, q[i].sql);
			q[i].res = r;
			if (PQresultStatus(r) != PGRES_COMMAND_OK)
				return READ_FAILED;
			PQclear(r);
			q[i].res = NULL;
		}
		/* One result per statement (or PIPELINE_ABORTED), then NULL. */
		if ((r = next_result(db)) == NULL)
			return READ_GONE;
		q[i].res = r;
		st = PQresultStatus(r);
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			return READ_FAILED;
	}
	/* And the sync that closes the flight. */
	if ((r = PQgetResult(db)) != NULL)
		PQclear(r);
	return READ_OK;
}

/* What a failed statement's result r means for the caller. */
static enum idem_rc
statement_failed(struct idem_stmts *stmts, const PGresult *r,
    enum idem_stmt_use use)
{
	idem_log(IDEM_LOG_ERROR, "db: %s", PQresultErrorMessage(r));
	if (stmts == NULL || use == IDEM_STMT_UNNAMED || !statements_differ(r))
		return transient(r) ? IDEM_RC_TRANSIENT : IDEM_RC_FAIL;
	/* Nothing was done; the client may retry at once. */
	idem_log(IDEM_LOG_WARN, "db: the server's prepared statements "
	    "changed under this connection; %s", stmts->always ?
	    "preparing them again" : "sending them unnamed from now on");
	idem_stmts_forget(stmts);
	if (!stmts->always)
		stmts->enabled = 0;
	return IDEM_RC_TRANSIENT;
}

enum idem_rc
idem_pipeline(PGconn *db, struct idem_stmts *stmts, struct idem_q *q,
    size_t n, unsigned *round_trips)
{
	enum idem_stmt_use	 use[IDEM_PIPELINE_MAX];
	size_t			 i, bad = 0;
	enum idem_rc		 rc = IDEM_RC_OK;

	for (i = 0; i < n; i++)
		q[i].res = NULL;
	if (n > IDEM_PIPELINE_MAX || PQenterPipelineMode(db) == 0)
		return IDEM_RC_FAIL;
	for (i = 0; i < n; i++)
		if (send_one(db, stmts, &q[i], &use[i]) == 0) {
			rc = IDEM_RC_FAIL;
			break;
		}
	/* The sync ends the flight and flushes it to the server. */
	if (PQpipelineSync(db) == 0)
		rc = IDEM_RC_FAIL;
	if (round_trips != NULL)
		(*round_trips)++;
	if (rc == IDEM_RC_OK)
		switch (read_all(db, stmts, q, n, use, &bad)) {
		case READ_OK:
			break;
		case READ_GONE:
			rc = IDEM_RC_TRANSIENT;
			break;
		case READ_FAILED:
			rc = statement_failed(stmts, q[bad].res, use[bad]);
			break;
		}
	if (rc != IDEM_RC_OK)
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
