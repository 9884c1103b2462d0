/*
 * idempotency.c - the exactly-once middleware: the whole transaction logic
 * of a request to an idempotent route is in this file.
 *
 * Atomic mode, two round trips for a new key:
 *   flight 1: BEGIN; resolve the tenant, look the key up and, when this
 *             request may execute, take the per-(tenant, key) advisory
 *             lock (idem_claim()).  Nothing is written yet.
 *   handler:  runs on the same connection, inside the same transaction.
 *   flight 2: deferred effects; the record, written once, completed with
 *             the response (idem_complete()); COMMIT.
 * A replay, a 409 or a 422 is decided after flight 1; its ROLLBACK is sent
 * without waiting and drained when the connection is released.
 *
 * Phased mode (IDEM_ROUTE_PHASED) commits the new record at once, in
 * progress, leased by locked_at; each phase commits on its own and moves
 * the recovery point.  A retry within lock_timeout is 409; after it, the
 * lease is taken over (under the advisory lock) and the handler resumes
 * at the stored recovery point.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "private.h"

/*
 * Flight 1's statement: idem_claim() (sql/004_idem_claim.sql) resolves the
 * tenant, looks the key up, tries the per-key advisory lock only when this
 * request may write the record, and, on phased routes, inserts it in
 * progress.  A function, so that its plan is kept per connection; called
 * unnamed.  $1 secret hash, $2 key, $3 method, $4 path, $5 fingerprint,
 * $6 ttl ms, $7 lock id, $8 lock timeout ms, $9 insert (phased).
 */
static const char sql_lookup[] =
	"SELECT * FROM idem_claim($1, $2, $3, $4, $5, $6::bigint, $7::bigint,"
	" $8::bigint, $9::boolean)";

enum {	/* columns of sql_lookup */
	C_TENANT, C_SECRET, C_GOT, C_CLAIMED, C_INSERTED, C_ID, C_METHOD,
	C_PATH, C_FPR, C_STATE, C_STATUS, C_HEADERS, C_BODY, C_LIVE, C_POINT,
	C_STALE
};

/*
 * Flight 2 of an atomic route: the record, written once and completed
 * (idem_complete(), which raises unless it wrote exactly that row).
 * $1 tenant, $2 key, $3 method, $4 path, $5 fingerprint, $6 ttl ms,
 * $7 status, $8 headers (json), $9 body.
 */
static const char sql_complete[] =
	"SELECT idem_complete($1::bigint, $2, $3, $4, $5, $6::bigint,"
	" $7::integer, $8::jsonb, $9)";

/* The last phase of a phased route: $1 id, $2 status, $3 headers, $4 body */
static const char sql_store[] =
	"UPDATE idempotency_keys SET state = 'completed',"
	" response_status = $2, response_headers = $3::jsonb,"
	" response_body = $4, locked_at = NULL, recovery_point = 'finished'"
	" WHERE id = $1";

static int64_t
get_i64(const PGresult *r, int col)
{
	const unsigned char	*p;
	uint64_t		 v = 0;
	int			 i;

	if (PQgetisnull(r, 0, col) || PQgetlength(r, 0, col) != 8)
		return 0;
	p = (const unsigned char *)PQgetvalue(r, 0, col);
	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

static int
get_i32(const PGresult *r, int col)
{
	uint32_t	v;

	if (PQgetisnull(r, 0, col) || PQgetlength(r, 0, col) != 4)
		return 0;
	memcpy(&v, PQgetvalue(r, 0, col), 4);
	return (int)ntohl(v);
}

static int
get_bool(const PGresult *r, int col)
{
	return !PQgetisnull(r, 0, col) && PQgetlength(r, 0, col) == 1 &&
	    PQgetvalue(r, 0, col)[0] != 0;
}

/* The advisory lock id: 64 bits of SHA-256(tenant secret hash, key). */
static void
lock_id(const idem_req *req, char out[24])
{
	struct idem_buf	 b = { 0 };
	unsigned char	 h[32];
	int64_t		 v = 0;
	int		 i;

	idem_buf_add(&b, req->tenant_hash, sizeof(req->tenant_hash));
	idem_buf_adds(&b, req->key);
	idem_sha256(b.p, b.len, h);
	idem_buf_free(&b);
	for (i = 0; i < 8; i++)
		v = (int64_t)((uint64_t)v << 8 | h[i]);
	snprintf(out, 24, "%lld", (long long)v);
}

/* SHA-256 over method, path and the canonical body, NUL-separated. */
static void
fingerprint(idem_req *req)
{
	struct idem_buf	b = { 0 };

	idem_buf_adds(&b, req->method);
	idem_buf_addc(&b, '\0');
	idem_buf_adds(&b, req->path);
	idem_buf_addc(&b, '\0');
	idem_buf_add(&b, req->canon.p ? req->canon.p : "", req->canon.len);
	idem_sha256(b.p, b.len, req->fingerprint);
	idem_buf_free(&b);
}

/* End the transaction without waiting; release drains the answer. */
static void
rollback_async(idem_req *req)
{
	if (req->db != NULL && PQsendQuery(req->db, "ROLLBACK") == 0)
		idem_log(IDEM_LOG_WARN, "db: cannot send ROLLBACK");
}

static void
unavailable(idem_req *req)
{
	idem_resp_problem(req, IDEM_P_UNAVAILABLE,
	    "the database is not available; retry later");
	req->outcome = IDEM_OUT_ERROR;
}

/*
 * The request failed: keep a 5xx the handler set, else answer 503 when
 * the database is the cause (retry later) and 500 otherwise.
 */
static void
failed(idem_req *req, int rc)
{
	req->outcome = IDEM_OUT_ERROR;
	/* The transaction may hold the key's lock: end it before the client
	 * hears of the failure, or its retry would find the key in flight. */
	if (req->db != NULL && PQstatus(req->db) == CONNECTION_OK &&
	    PQtransactionStatus(req->db) != PQTRANS_IDLE) {
		PQclear(PQexec(req->db, "ROLLBACK"));
		req->txn_open = 0;
	}
	if (rc == 0 && req->status >= 500)
		return;
	/* -2: the database failed, not the request; a retry may succeed. */
	if (rc == -2 || req->db_unavailable || idem_db_broken(req->db))
		unavailable(req);
	else
		idem_resp_problem(req, IDEM_P_INTERNAL,
		    "the request could not be completed");
}

static void
replay(idem_req *req, const PGresult *r)
{
	const char	*path[] = { NULL, NULL };
	yajl_val	 h, v;
	const char	*ctype = "application/json";
	size_t		 i;

	h = yajl_tree_parse(PQgetvalue(r, 0, C_HEADERS), NULL, 0);
	if (h != NULL && (v = yajl_tree_get(h, (path[0] = "Content-Type",
	    path), yajl_t_string)) != NULL)
		ctype = YAJL_GET_STRING(v);
	idem_resp_body(req, get_i32(r, C_STATUS), ctype,
	    PQgetvalue(r, 0, C_BODY), (size_t)PQgetlength(r, 0, C_BODY));
	if (h != NULL && YAJL_IS_OBJECT(h))
		for (i = 0; i < h->u.object.len; i++)
			if (strcasecmp(h->u.object.keys[i], "Content-Type") &&
			    YAJL_IS_STRING(h->u.object.values[i]))
				idem_resp_header(req, h->u.object.keys[i],
				    YAJL_GET_STRING(h->u.object.values[i]));
	if (h != NULL)
		yajl_tree_free(h);
	req->replayed = 1;
	req->outcome = IDEM_OUT_REPLAYED;
}

static int
headers_json(const idem_req *req, struct idem_buf *b)
{
	size_t	i;
	int	rc = 0;

	rc |= idem_buf_adds(b, "{\"Content-Type\":");
	rc |= idem_buf_add_jstr(b, req->ctype, strlen(req->ctype));
	for (i = 0; i < req->nheaders; i++) {
		rc |= idem_buf_addc(b, ',');
		rc |= idem_buf_add_jstr(b, req->hname[i], strlen(req->hname[i]));
		rc |= idem_buf_addc(b, ':');
		rc |= idem_buf_add_jstr(b, req->hvalue[i],
		    strlen(req->hvalue[i]));
	}
	rc |= idem_buf_addc(b, '}');
	return rc == 0 ? 0 : -1;
}

/* Append the handler's deferred statements to q at n; the new n. */
static size_t
defer_queue(idem_req *req, struct idem_q *q, size_t n)
{
	size_t	i;

	for (i = 0; i < req->ndefer; i++, n++) {
		memset(&q[n], 0, sizeof(q[n]));
		q[n].sql = req->defer[i].sql;
		q[n].n = req->defer[i].n;
		q[n].vals = (const char *const *)req->defer[i].vals;
	}
	return n;
}

/* The record's statement wrote its one row: "UPDATE 1", or an id. */
static int
wrote_one(const PGresult *r)
{
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		return PQntuples(r) == 1 && !PQgetisnull(r, 0, 0);
	return strcmp(PQcmdStatus((PGresult *)r), "UPDATE 1") == 0;
}

/*
 * End a transaction of the middleware in one round trip: BEGIN when none
 * is open (phased), the handler's deferred statements, the record's
 * statement (which must write its one row), COMMIT.  0, -1 or -2 as
 * idem_flight().
 */
static int
commit_with(idem_req *req, const struct idem_q *record)
{
	struct idem_q	 q[1 + 4 + 2];
	size_t		 n = 0;
	int		 rc;

	memset(q, 0, sizeof(q));
	if (!req->txn_open)
		q[n++].sql = "BEGIN";
	n = defer_queue(req, q, n);
	q[n++] = *record;
	q[n++].sql = "COMMIT";
	rc = idem_flight(req->db, q, n, &req->round_trips);
	req->txn_open = 0;
	if (rc == 0 && !wrote_one(q[n - 2].res))
		rc = -1;
	idem_flight_clear(q, n);
	idem_defer_free(req);
	return rc;
}

/*
 * Flight 2: deferred effects, the stored response, COMMIT.  An atomic
 * route writes its record here, once; a phased one completes the record
 * its first flight inserted.
 */
static int
store_and_commit(idem_req *req)
{
	const struct idem_cfg	*cfg = &req->app->cfg;
	struct idem_q		 rec;
	struct idem_buf		 hj = { 0 };
	char			 id[24], st[8], ttl[24];
	const char		*vals[9];
	int			 lens[9] = { 0 }, fmts[9] = { 0 };
	int			 rc, body;

	if (headers_json(req, &hj) == -1)
		return -1;
	snprintf(st, sizeof(st), "%d", req->status);
	memset(&rec, 0, sizeof(rec));
	if (req->phased) {
		snprintf(id, sizeof(id), "%lld", (long long)req->record_id);
		vals[0] = id;
		vals[1] = st;
		vals[2] = hj.p;
		body = 3;
		rec.sql = sql_store;
	} else {
		snprintf(id, sizeof(id), "%lld", (long long)req->tenant);
		snprintf(ttl, sizeof(ttl), "%lld", idem_cfg_route_ttl(cfg,
		    req->method, req->route->pattern));
		vals[0] = id;
		vals[1] = req->key;
		vals[2] = req->method;
		vals[3] = req->path;
		vals[4] = (const char *)req->fingerprint;
		lens[4] = 32;
		fmts[4] = 1;
		vals[5] = ttl;
		vals[6] = st;
		vals[7] = hj.p;
		body = 8;
		rec.sql = sql_complete;
	}
	vals[body] = req->resp.p ? req->resp.p : "";
	lens[body] = (int)req->resp.len;
	fmts[body] = 1;
	rec.n = body + 1;
	rec.vals = vals;
	rec.lens = lens;
	rec.fmts = fmts;
	rc = commit_with(req, &rec);
	idem_buf_free(&hj);
	return rc;
}

/*
 * Commit the record as leased.  The first phase's transaction opens when
 * the handler first asks for its connection (idem_req_db).  A takeover only
 * succeeds if the lease is still expired now: the lookup's snapshot may
 * predate another request's takeover.  0, -1 error, 1 lost the race.
 */
static int
lease(idem_req *req, const char *lock_timeout_ms)
{
	struct idem_q	 q[2];
	char		 id[24];
	const char	*vals[2] = { id, lock_timeout_ms };
	int		 rc;

	snprintf(id, sizeof(id), "%lld", (long long)req->record_id);
	memset(q, 0, sizeof(q));
	q[0].sql = req->resumed ? "UPDATE idempotency_keys SET locked_at ="
	    " now() WHERE id = $1 AND state = 'in_progress' AND (locked_at IS"
	    " NULL OR locked_at < now() - $2::bigint * interval"
	    " '1 millisecond')" : "UPDATE idempotency_keys SET locked_at ="
	    " now() WHERE id = $1 AND $2::bigint > 0";
	q[0].n = 2;
	q[0].vals = vals;
	q[1].sql = "COMMIT";
	rc = idem_flight(req->db, q, 2, &req->round_trips);
	req->txn_open = 0;
	if (rc == 0 && strcmp(PQcmdStatus(q[0].res), "UPDATE 1") != 0)
		rc = 1;
	idem_flight_clear(q, 2);
	return rc;
}

/*
 * A phase failed: its transaction is undone.  A record that never passed
 * a recovery point is deleted (a retry executes afresh); otherwise its
 * lease is released so that a retry resumes at once.
 */
static void
phase_failed(idem_req *req, int rc)
{
	char		 id[24];
	const char	*vals[1] = { id };
	PGresult	*r;

	if (req->txn_open)
		PQclear(PQexec(req->db, "ROLLBACK"));
	req->txn_open = 0;
	snprintf(id, sizeof(id), "%lld", (long long)req->record_id);
	r = PQexecParams(req->db, strcmp(req->recovery_point, "started") == 0 ?
	    "DELETE FROM idempotency_keys WHERE id = $1 AND state = "
	    "'in_progress'" : "UPDATE idempotency_keys SET locked_at = NULL "
	    "WHERE id = $1 AND state = 'in_progress'", 1, NULL, vals, NULL,
	    NULL, 0);
	PQclear(r);
	failed(req, rc);
}

/*
 * A test-only crash switch, compiled in only with --enable-fault-injection:
 * IDEM_FAULT=before:POINT or after:POINT kills the process there.
 */
static void
fault(const char *when, const char *point)
{
#ifdef IDEM_FAULT_INJECTION
	const char	*f = getenv("IDEM_FAULT");
	size_t		 n = strlen(when);

	if (f != NULL && strncmp(f, when, n) == 0 && f[n] == ':' &&
	    strcmp(f + n + 1, point) == 0) {
		idem_log(IDEM_LOG_WARN, "fault: killing the process %s %s",
		    when, point);
		raise(SIGKILL);
	}
#else
	(void)when;
	(void)point;
#endif
}

int
idem_phase_begin(idem_req *req)
{
	PGresult	*r;
	int		 ok;

	r = PQexec(req->db, "BEGIN");
	req->round_trips++;
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (ok)
		req->txn_open = 1;
	return ok ? 0 : -1;
}

int
idem_req_phase_pause(idem_req *req)
{
	PGresult	*r;

	/* Nothing may be pending: this records no recovery point. */
	if (!req->phased || req->ndefer > 0)
		return -1;
	if (!req->txn_open)
		return 0;
	r = PQexec(req->db, "ROLLBACK");
	req->round_trips++;
	req->txn_open = 0;
	PQclear(r);
	return 0;
}

const char *
idem_req_recovery_point(const idem_req *req)
{
	return req->recovery_point[0] != '\0' ? req->recovery_point : NULL;
}

int64_t
idem_req_record_id(const idem_req *req)
{
	return req->record_id;
}

int
idem_req_phase_commit(idem_req *req, const char *next)
{
	struct idem_q	 update;
	char		 id[24];
	const char	*vals[2];
	int		 rc;

	if (!req->phased || req->db == NULL || next == NULL ||
	    strlen(next) == 0 || strlen(next) >= sizeof(req->recovery_point))
		return -1;
	fault("before", next);
	snprintf(id, sizeof(id), "%lld", (long long)req->record_id);
	vals[0] = id;
	vals[1] = next;
	memset(&update, 0, sizeof(update));
	/* The lease is renewed with every phase. */
	update.sql = "UPDATE idempotency_keys SET recovery_point = $2,"
	    " locked_at = now() WHERE id = $1 AND state = 'in_progress'";
	update.n = 2;
	update.vals = vals;
	rc = commit_with(req, &update);
	if (rc != 0)
		return -1;
	strcpy(req->recovery_point, next);
	fault("after", next);
	return 0;
}

int
idem_req_derived_key(const idem_req *req, const char *phase, char *out,
    size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	struct idem_buf	  b = { 0 };
	unsigned char	  h[32];
	size_t		  i;

	/*
	 * Stable across retries and processes, opaque to the other side, and
	 * new when an expired key is used afresh (the record gets a new id).
	 */
	if (req->record_id == 0 || outlen < 2 * 20 + 1)
		return -1;
	idem_buf_add(&b, req->tenant_hash, sizeof(req->tenant_hash));
	idem_buf_addf(&b, "%lld", (long long)req->record_id);
	idem_buf_addc(&b, '\0');
	idem_buf_adds(&b, req->key);
	idem_buf_addc(&b, '\0');
	idem_buf_adds(&b, phase);
	idem_sha256(b.p, b.len, h);
	idem_buf_free(&b);
	for (i = 0; i < 20; i++) {
		out[2 * i] = hex[h[i] >> 4];
		out[2 * i + 1] = hex[h[i] & 0xf];
	}
	out[40] = '\0';
	return 0;
}

void
idem_idempotent_run(idem_req *req)
{
	const struct idem_cfg	*cfg = &req->app->cfg;
	struct idem_q		 q[2];
	char			 lock[24], ttl[24], lto[24];
	const char		*vals[9];
	int			 lens[9] = { 32, 0, 0, 0, 32, 0, 0, 0, 0 };
	int			 fmts[9] = { 1, 0, 0, 0, 1, 0, 0, 0, 0 };
	const PGresult		*r;
	int			 rc, locked = 0;

	req->phased = (req->route->flags & IDEM_ROUTE_PHASED) != 0;
	fingerprint(req);
	if (idem_req_db(req) == NULL) {
		unavailable(req);
		return;
	}
	lock_id(req, lock);
	snprintf(ttl, sizeof(ttl), "%lld", idem_cfg_route_ttl(cfg,
	    req->method, req->route->pattern));
	snprintf(lto, sizeof(lto), "%lld", cfg->lock_timeout_ms);
	vals[0] = (const char *)req->tenant_hash;
	vals[1] = req->key;
	vals[2] = req->method;
	vals[3] = req->path;
	vals[4] = (const char *)req->fingerprint;
	vals[5] = ttl;
	vals[6] = lock;
	vals[7] = lto;
	vals[8] = req->phased ? "true" : "false";

	memset(q, 0, sizeof(q));
	q[0].sql = "BEGIN";
	q[1].sql = sql_lookup;
	q[1].n = 9;
	q[1].vals = vals;
	q[1].lens = lens;
	q[1].fmts = fmts;
	q[1].binary = 1;
	rc = idem_flight(req->db, q, 2, &req->round_trips);
	if (rc == -2 && idem_db_broken(req->db)) {
		/* Nothing happened yet: once more, on a re-established one. */
		idem_flight_clear(q, 2);
		idem_pool_release(req->app->pool, req->db);
		req->db = NULL;
		if (idem_req_db(req) != NULL)
			rc = idem_flight(req->db, q, 2, &req->round_trips);
	}
	if (rc != 0) {
		idem_flight_clear(q, 2);
		failed(req, rc);
		return;
	}
	req->in_txn = 1;
	req->txn_open = 1;
	r = q[1].res;
	/* The index found the hash; the comparison is in constant time. */
	if (PQntuples(r) != 1 || PQgetisnull(r, 0, C_TENANT) ||
	    PQgetlength(r, 0, C_SECRET) != 32 || CRYPTO_memcmp(PQgetvalue(r, 0,
	    C_SECRET), req->tenant_hash, 32) != 0) {
		idem_resp_problem(req, IDEM_P_UNAUTHORIZED,
		    "a valid 'Authorization: Bearer' API key is required");
		idem_resp_header(req, "WWW-Authenticate", "Bearer");
		req->outcome = IDEM_OUT_REJECTED;
		goto done_ro;
	}
	req->tenant = get_i64(r, C_TENANT);
	locked = get_bool(r, C_GOT);
	if (!PQgetisnull(r, 0, C_GOT) && !locked) {
		idem_resp_problem(req, IDEM_P_KEY_IN_FLIGHT,
		    "a request with this Idempotency-Key is being processed; "
		    "retry later");
		req->outcome = IDEM_OUT_IN_FLIGHT;
		goto done_ro;
	}
	if (!PQgetisnull(r, 0, C_INSERTED)) {
		req->record_id = get_i64(r, C_INSERTED);
		strcpy(req->recovery_point, "started");
		idem_flight_clear(q, 2);
		goto execute;
	}
	if (!req->phased && locked && get_bool(r, C_CLAIMED)) {
		/* Atomic: the record is written once, with the response. */
		idem_flight_clear(q, 2);
		goto execute;
	}
	if (PQgetisnull(r, 0, C_ID) || !get_bool(r, C_LIVE)) {
		/* Claimed, yet nothing inserted: the record changed under
		 * the lock (only a writer that ignores it can do that). */
		idem_resp_problem(req, IDEM_P_KEY_IN_FLIGHT,
		    "a request with this Idempotency-Key has just been "
		    "processed; retry");
		req->outcome = IDEM_OUT_IN_FLIGHT;
		goto done_ro;
	}
	if (strcmp(PQgetvalue(r, 0, C_METHOD), req->method) != 0 ||
	    strcmp(PQgetvalue(r, 0, C_PATH), req->path) != 0 ||
	    PQgetlength(r, 0, C_FPR) != 32 ||
	    memcmp(PQgetvalue(r, 0, C_FPR), req->fingerprint, 32) != 0) {
		idem_resp_problem(req, IDEM_P_KEY_REUSED,
		    "this Idempotency-Key was already used for a different "
		    "request; use a new key");
		req->outcome = IDEM_OUT_REUSED;
		goto done_ro;
	}
	if (strcmp(PQgetvalue(r, 0, C_STATE), "completed") == 0 &&
	    !PQgetisnull(r, 0, C_STATUS)) {
		replay(req, r);
		goto done_ro;
	}
	if (req->phased && locked && get_bool(r, C_STALE) &&
	    PQgetlength(r, 0, C_POINT) < (int)sizeof(req->recovery_point)) {
		/* The owner is gone: take the lease over and resume. */
		req->record_id = get_i64(r, C_ID);
		strcpy(req->recovery_point, PQgetvalue(r, 0, C_POINT));
		req->resumed = 1;
		idem_flight_clear(q, 2);
		goto execute;
	}
	idem_resp_problem(req, IDEM_P_KEY_IN_FLIGHT,
	    "a request with this Idempotency-Key is being processed; "
	    "retry later");
	req->outcome = IDEM_OUT_IN_FLIGHT;
done_ro:
	idem_flight_clear(q, 2);
	/* Holding the key's lock, wait: a retry must not find it taken. */
	if (locked)
		PQclear(PQexec(req->db, "ROLLBACK"));
	else
		rollback_async(req);
	return;

execute:
	if (req->phased && (rc = lease(req, lto)) != 0) {
		if (rc < 0) {
			failed(req, rc);
			return;
		}
		idem_resp_problem(req, IDEM_P_KEY_IN_FLIGHT,
		    "a request with this Idempotency-Key is being processed; "
		    "retry later");
		req->outcome = IDEM_OUT_IN_FLIGHT;
		PQclear(PQexec(req->db, "ROLLBACK"));
		return;
	}
	rc = req->route->fn(req, req->route->arg);
	if (req->phased && (rc == -1 || req->status == 0 ||
	    req->status >= 500)) {
		phase_failed(req, rc);
		return;
	}
	if (rc == -1 || req->status == 0 || req->status >= 500) {
		/* No key, no effect: a retry executes afresh. */
		PQclear(PQexec(req->db, "ROLLBACK"));
		failed(req, rc);
		return;
	}
	if ((rc = store_and_commit(req)) != 0) {
		failed(req, rc);
		return;
	}
	req->outcome = IDEM_OUT_CREATED;
}

int
idem_req_defer(idem_req *req, const char *sql, int nparams,
    const char *const *values)
{
	struct idem_defer	*d;
	PGresult		*r;
	int			 i, ok;

	if (nparams < 0 || nparams > 64)
		return -1;
	if (!req->in_txn) {
		if (idem_req_db(req) == NULL)
			return -1;
		r = PQexecParams(req->db, sql, nparams, NULL, values, NULL,
		    NULL, 0);
		ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
		    PQresultStatus(r) == PGRES_TUPLES_OK;
		if (!ok)
			idem_log(IDEM_LOG_ERROR, "db: %s",
			    PQresultErrorMessage(r));
		PQclear(r);
		return ok ? 0 : -1;
	}
	if (req->ndefer == sizeof(req->defer) / sizeof(req->defer[0]))
		return -1;
	d = &req->defer[req->ndefer];
	memset(d, 0, sizeof(*d));
	if ((d->sql = strdup(sql)) == NULL ||
	    (d->vals = calloc((size_t)nparams + 1, sizeof(char *))) == NULL)
		goto fail;
	d->n = nparams;
	req->ndefer++;
	for (i = 0; i < nparams; i++)
		if (values[i] != NULL && (d->vals[i] = strdup(values[i])) == NULL)
			return -1;	/* freed with the request */
	return 0;
fail:
	free(d->sql);
	free(d->vals);
	return -1;
}

void
idem_defer_free(idem_req *req)
{
	size_t	i;
	int	j;

	for (i = 0; i < req->ndefer; i++) {
		for (j = 0; j < req->defer[i].n; j++)
			free(req->defer[i].vals[j]);
		free(req->defer[i].vals);
		free(req->defer[i].sql);
	}
	req->ndefer = 0;
}
