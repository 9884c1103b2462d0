/*
 * completer.c - drives abandoned phased records to completion: a record in
 * progress past a recovery point whose lease lapsed (its owner died and no
 * client retried) is run again, from its stored point, with the request it
 * was created for (the canonical body the fingerprint covers), exactly as
 * a client's retry would be: through idem_idempotent_run(), which takes the
 * lapsed lease over under the key's lock and fences the old owner.  The
 * response is stored, so a late retry replays it.
 *
 * Which records a run looks at is decided by one process of the fleet at a
 * time (a transaction advisory lock around the selection); each record is
 * then owned through its lease, so two completers, or a completer and a
 * retry, never run the same record at once.
 */
#include <stdlib.h>
#include <string.h>

#include "private.h"

/* The fleet-wide lock of the completer's selection (any constant). */
#define COMPLETER_LOCK	"7236491088"

/* Abandoned: in progress, past a recovery point, lease lapsed. */
static const char sql_abandoned[] =
	"SELECT k.id::text, k.request_method, k.request_path, k.key,"
	" a.secret_hash, k.request_body"
	" FROM idempotency_keys k JOIN api_keys a ON a.id = k.api_key_id"
	" WHERE k.state = 'in_progress' AND k.recovery_point <> 'started'"
	" AND coalesce(k.lease_until <= now(), true)"
	" AND k.request_body IS NOT NULL"
	" ORDER BY k.lease_until NULLS FIRST LIMIT $1::bigint";

/* One record, re-run as a synthetic request; 1 completed, 0 not (busy,
 * failed again: left for the next run), -1 unusable. */
static int
complete_one(idem_app *app, const PGresult *r, int row)
{
	idem_req	 req;
	char		 allow[64];
	const char	*body;
	size_t		 bodylen;
	int		 rc = -1;

	memset(&req, 0, sizeof(req));
	req.app = app;
	if (idem_random_hex(req.request_id, 8) == -1)
		strcpy(req.request_id, "0");
	idem_log_bind(req.request_id);
	if (PQgetlength(r, row, 1) >= (int)sizeof(req.method) ||
	    PQgetlength(r, row, 3) > IDEM_KEY_MAX ||
	    PQgetlength(r, row, 4) != 32)
		goto out;
	strcpy(req.method, PQgetvalue(r, row, 1));
	strcpy(req.key, PQgetvalue(r, row, 3));
	req.has_key = 1;
	memcpy(req.secret_hash, PQgetvalue(r, row, 4), 32);
	if ((req.path = strdup(PQgetvalue(r, row, 2))) == NULL)
		goto out;
	body = PQgetvalue(r, row, 5);
	bodylen = (size_t)PQgetlength(r, row, 5);
	/* Stored canonical: it is its own canonical form, as when it came. */
	if ((req.body = malloc(bodylen + 1)) == NULL)
		goto out;
	memcpy(req.body, body, bodylen);
	req.body[bodylen] = '\0';
	req.bodylen = bodylen;
	if (idem_buf_add(&req.canon, body, bodylen) == -1 ||
	    idem_buf_addc(&req.canon, '\0') == -1)
		goto out;
	req.canon.len = bodylen;
	if (idem_router_match(&app->router, req.method, req.path, &req.route,
	    &req.params, allow, sizeof(allow)) != IDEM_MATCH_OK ||
	    !(req.route->flags & IDEM_ROUTE_PHASED)) {
		idem_log(IDEM_LOG_WARN, "completer: key record %s: no phased "
		    "route %s %s here; left for an operator",
		    PQgetvalue(r, row, 0), req.method, req.path);
		goto out;
	}
	if ((req.json = yajl_tree_parse(req.canon.p, NULL, 0)) == NULL)
		goto out;
	idem_idempotent_run(&req);
	idem_metrics_pool_waits(app, &req);
	rc = req.outcome == IDEM_OUT_CREATED ? 1 : 0;
	idem_log(rc == 1 ? IDEM_LOG_INFO : IDEM_LOG_WARN, "completer: key "
	    "record %s (%s %s) %s, status %d", PQgetvalue(r, row, 0),
	    req.method, req.path, rc == 1 ? "completed" : "not completed",
	    req.status);
out:
	idem_req_release(&req);
	idem_log_bind(NULL);
	return rc;
}

int
idem_complete_abandoned(idem_app *app, long max, long *completed,
    long *left)
{
	char		 lim[24];
	const char	*vals[1] = { lim };
	PGconn		*db;
	PGresult	*r;
	int		 i, n, rc = -1;

	*completed = *left = 0;
	if (max <= 0)
		max = 100;
	snprintf(lim, sizeof(lim), "%ld", max);
	if ((db = idem_pool_acquire(app->pool, app->cfg.acquire_timeout_ms,
	    NULL)) == NULL)
		return -1;
	r = PQexec(db, "BEGIN; SELECT pg_try_advisory_xact_lock("
	    COMPLETER_LOCK ")");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		idem_log(IDEM_LOG_ERROR, "completer: %s", PQerrorMessage(db));
		goto out;
	}
	if (PQgetvalue(r, 0, 0)[0] != 't') {
		rc = IDEM_RC_BUSY;	/* another process is selecting */
		goto out;
	}
	PQclear(r);
	r = PQexecParams(db, sql_abandoned, 1, NULL, vals, NULL, NULL, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		idem_log(IDEM_LOG_ERROR, "completer: %s", PQerrorMessage(db));
		goto out;
	}
	PQclear(PQexec(db, "COMMIT"));
	/* The selection is done: give the connection back for the runs. */
	idem_pool_release(app->pool, db);
	db = NULL;
	n = PQntuples(r);
	for (i = 0; i < n && !atomic_load(&app->stopping); i++) {
		if (complete_one(app, r, i) == 1)
			(*completed)++;
		else
			(*left)++;
	}
	*left += n - i;
	rc = 0;
out:
	PQclear(r);
	if (db != NULL)
		idem_pool_release(app->pool, db);
	return rc;
}
