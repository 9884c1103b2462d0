/*
 * completer.c - drives abandoned phased records to completion: a record in
 * progress past a recovery point whose lease lapsed (its owner died and no
 * client retried) is run again, from its stored point, with the request it
 * was created for (the canonical body the fingerprint covers), exactly as
 * a client's retry would be: through idem_idempotent_run(), which takes the
 * lapsed lease over under the key's lock and fences the old owner.  The
 * response is stored, so a late retry replays it.
 *
 * Each record has its own schedule (sql/009): the records that are due are
 * taken with FOR UPDATE SKIP LOCKED, so that several completers (processes
 * of a fleet) take different records without a fleet-wide lock, and a
 * record that fails again is due only after a backoff (lib/pure/backoff.c): it
 * yields to the others instead of coming back first every run.  A record
 * that cannot succeed (its tenant revoked, no phased route for it here,
 * [idempotency] completer_max_attempts or completer_max_age reached) is
 * set aside for an operator (idemctl key show|retry|abandon).  The lease,
 * taken over under the key's lock, is what keeps two completers, or a
 * completer and a retry, from running the same record at once.
 */
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "backoff.h"

/* Due abandoned records, taken for one attempt each (sql/009); fetched in
 * binary (the hash and the body as bytes), so the numbers as text. */
static const char sql_take[] =
	"SELECT id::text, request_method, request_path, key, secret_hash,"
	" request_body, CASE WHEN revoked THEN 't' ELSE 'f' END,"
	" attempts::text, age_ms::text"
	" FROM idem_completer_take($1::bigint, $2::bigint)";

/* Column numbers of sql_take. */
enum { C_ID, C_METHOD, C_PATH, C_KEY, C_SECRET, C_BODY, C_REVOKED,
	C_ATTEMPTS, C_AGE };

/* What one attempt at a record came to. */
enum attempt {
	ATTEMPT_DONE,		/* completed (by us, or found completed) */
	ATTEMPT_BUSY,		/* another owner holds it: not a failure */
	ATTEMPT_FAILED,		/* again after the backoff */
	ATTEMPT_HOPELESS	/* cannot succeed: set aside */
};

/* The request a record was created for, rebuilt into req: ATTEMPT_DONE
 * when it is ready to run, else what the attempt came to (err: why). */
static enum attempt
rebuild(idem_app *app, idem_req *req, const PGresult *r, int row, char *err,
    size_t errsz)
{
	char		 allow[64];
	const char	*body = PQgetvalue(r, row, C_BODY);
	size_t		 bodylen = (size_t)PQgetlength(r, row, C_BODY);

	if (PQgetvalue(r, row, C_REVOKED)[0] == 't') {
		snprintf(err, errsz, "the tenant's API key is revoked");
		return ATTEMPT_HOPELESS;
	}
	if (PQgetlength(r, row, C_METHOD) >= (int)sizeof(req->method) ||
	    PQgetlength(r, row, C_KEY) > IDEM_KEY_MAX ||
	    PQgetlength(r, row, C_SECRET) != 32)
		return ATTEMPT_HOPELESS;
	strcpy(req->method, PQgetvalue(r, row, C_METHOD));
	strcpy(req->key, PQgetvalue(r, row, C_KEY));
	req->has_key = 1;
	memcpy(req->secret_hash, PQgetvalue(r, row, C_SECRET), 32);
	/* Stored canonical: it is its own canonical form, as when it came. */
	if ((req->path = strdup(PQgetvalue(r, row, C_PATH))) == NULL ||
	    (req->body = malloc(bodylen + 1)) == NULL ||
	    idem_buf_add(&req->canon, body, bodylen) == -1 ||
	    idem_buf_addc(&req->canon, '\0') == -1) {
		snprintf(err, errsz, "out of memory");
		return ATTEMPT_FAILED;
	}
	memcpy(req->body, body, bodylen);
	req->body[bodylen] = '\0';
	req->bodylen = bodylen;
	req->canon.len = bodylen;
	if (idem_router_match(&app->router, req->method, req->path,
	    &req->route, &req->params, allow, sizeof(allow)) != IDEM_MATCH_OK ||
	    !(req->route->flags & IDEM_ROUTE_PHASED)) {
		snprintf(err, errsz, "no phased route %s %s", req->method,
		    req->path);
		return ATTEMPT_HOPELESS;
	}
	if ((req->json = yajl_tree_parse(req->canon.p, NULL, 0)) == NULL) {
		snprintf(err, errsz, "the stored request is not JSON");
		return ATTEMPT_HOPELESS;
	}
	return ATTEMPT_DONE;
}

/* What the re-run request's outcome means for the record. */
static enum attempt
outcome_attempt(const idem_req *req, char *err, size_t errsz)
{
	switch (req->outcome) {
	case IDEM_OUT_CREATED:
	case IDEM_OUT_REPLAYED:		/* a retry completed it meanwhile */
		return ATTEMPT_DONE;
	case IDEM_OUT_IN_FLIGHT:	/* a retry or a completer owns it */
		return ATTEMPT_BUSY;
	case IDEM_OUT_REJECTED:		/* 401 (revoked since), 422 */
		snprintf(err, errsz, "answered %d before the handler",
		    req->status);
		return req->status == 401 || req->status == 422 ?
		    ATTEMPT_HOPELESS : ATTEMPT_FAILED;
	default:
		snprintf(err, errsz, "answered %d (%s)", req->status,
		    idem_outcome_name(req->outcome) ?
		    idem_outcome_name(req->outcome) : "-");
		return ATTEMPT_FAILED;
	}
}

/* One record, re-run as a synthetic request; err gets why it failed. */
static enum attempt
complete_one(idem_app *app, const PGresult *r, int row, char *err,
    size_t errsz)
{
	idem_req	 req;
	enum attempt	 rc;

	memset(&req, 0, sizeof(req));
	req.app = app;
	if (idem_random_hex(req.request_id, 8) == -1)
		strcpy(req.request_id, "0");
	idem_trace_begin(&req);
	idem_log_bind(req.request_id, req.trace.trace_id);
	snprintf(err, errsz, "unusable record");
	if ((rc = rebuild(app, &req, r, row, err, errsz)) == ATTEMPT_DONE) {
		idem_idempotent_run(&req);
		idem_metrics_pool_waits(app, &req);
		rc = outcome_attempt(&req, err, errsz);
		idem_log(rc == ATTEMPT_DONE ? IDEM_LOG_INFO : IDEM_LOG_WARN,
		    "completer: key record %s (%s %s) %s, status %d",
		    PQgetvalue(r, row, C_ID), req.method, req.path,
		    rc == ATTEMPT_DONE ? "completed" : rc == ATTEMPT_BUSY ?
		    "owned by another request" : "not completed", req.status);
	}
	if (rc == ATTEMPT_HOPELESS)
		idem_log(IDEM_LOG_WARN, "completer: key record %s: %s",
		    PQgetvalue(r, row, C_ID), err);
	idem_req_release(&req);
	idem_log_bind(NULL, NULL);
	return rc;
}

/* A random 32-bit value for the jitter (0 if none can be had). */
static uint32_t
jitter_rnd(void)
{
	char	hex[9];

	if (idem_random_hex(hex, 4) == -1)
		return 0;
	return (uint32_t)strtoul(hex, NULL, 16);
}

/*
 * The attempt at row failed: the record's next attempt after its backoff,
 * or set aside when it cannot succeed or its limits are reached.  1 set
 * aside, 0 rescheduled (or no longer ours), -1 a database error.
 */
static int
record_failure(idem_app *app, const PGresult *r, int row, int hopeless,
    const char *err)
{
	const struct idem_cfg	*c = &app->cfg;
	enum idem_giveup	 g;
	char			 delay[24];
	const char		*vals[4];
	long			 attempts;
	long long		 age;
	PGconn			*db;
	PGresult		*u;
	int			 rc = -1;

	attempts = strtol(PQgetvalue(r, row, C_ATTEMPTS), NULL, 10);
	age = strtoll(PQgetvalue(r, row, C_AGE), NULL, 10);
	g = idem_giveup(hopeless, attempts, c->completer_max_attempts, age,
	    c->completer_max_age_ms);
	snprintf(delay, sizeof(delay), "%lld", idem_backoff_ms(attempts,
	    c->completer_backoff_ms, c->completer_backoff_max_ms,
	    jitter_rnd()));
	vals[0] = PQgetvalue(r, row, C_ID);
	vals[1] = err;
	vals[2] = delay;
	vals[3] = g == IDEM_GIVEUP_RETRY ? NULL : idem_giveup_name(g);
	if ((db = idem_pool_acquire(app->pool, c->acquire_timeout_ms,
	    NULL)) == NULL)
		return -1;
	u = PQexecParams(db, "SELECT idem_completer_failed($1::bigint, $2,"
	    " $3::bigint, $4)", 4, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(u) != PGRES_TUPLES_OK)
		idem_log(IDEM_LOG_ERROR, "completer: %s", PQerrorMessage(db));
	else {
		rc = PQntuples(u) == 1 && PQgetvalue(u, 0, 0)[0] == 't';
		if (rc == 1)
			idem_log(IDEM_LOG_WARN, "completer: key record %s "
			    "needs attention (%s after %ld attempts): %s",
			    vals[0], vals[3], attempts, err);
	}
	PQclear(u);
	idem_pool_release(app->pool, db);
	return rc;
}

int
idem_complete_abandoned(idem_app *app, long max, long *completed,
    long *left)
{
	char		 lim[24], hold[24], err[256];
	const char	*vals[2] = { lim, hold };
	PGconn		*db;
	PGresult	*r;
	enum attempt	 a;
	int		 i, n;

	*completed = *left = 0;
	if (max <= 0)
		max = 100;
	snprintf(lim, sizeof(lim), "%ld", max);
	/* Taken records are not due again for as long as a request may
	 * run: the others' completers leave them to this one meanwhile. */
	snprintf(hold, sizeof(hold), "%lld", app->cfg.request_timeout_ms +
	    app->cfg.completer_backoff_ms);
	if ((db = idem_pool_acquire(app->pool, app->cfg.acquire_timeout_ms,
	    NULL)) == NULL)
		return -1;
	r = PQexecParams(db, sql_take, 2, NULL, vals, NULL, NULL, 1);
	/* The selection is done: give the connection back for the runs. */
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		idem_log(IDEM_LOG_ERROR, "completer: %s", PQerrorMessage(db));
		PQclear(r);
		idem_pool_release(app->pool, db);
		return -1;
	}
	idem_pool_release(app->pool, db);
	n = PQntuples(r);
	for (i = 0; i < n && !atomic_load(&app->stopping); i++) {
		a = complete_one(app, r, i, err, sizeof(err));
		if (a == ATTEMPT_DONE)
			(*completed)++;
		else {
			(*left)++;
			if (a != ATTEMPT_BUSY)
				record_failure(app, r, i,
				    a == ATTEMPT_HOPELESS, err);
		}
	}
	*left += n - i;
	PQclear(r);
	return 0;
}
