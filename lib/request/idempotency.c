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
 * progress, in flight 1, under a lease: a token naming this request and a
 * time it lapses (the route's lease from the last renewal).  Each phase
 * commits on its own, moves the recovery point and renews the lease; so
 * does idem_req_phase_pause() before an external call; and in between the
 * process's heartbeat (heartbeat.c) renews it until the request's deadline,
 * so the lease is short (a crashed owner's key is resumed a lease after)
 * whatever the route's deadline.  Every write of
 * the owner is fenced by its token in the same statement (sql/005): one
 * that finds the record no longer its own raises, and the owner's whole
 * transaction, effects included, rolls back (503, retry).  A duplicate is
 * 409 while the lease is live, whatever the record's expiry; once it has
 * lapsed the same request takes it over and resumes at the stored
 * recovery point.  The handler and each phase run under wall-clock
 * deadlines; past them the heartbeat stops renewing, the lease lapses, and
 * the request is abandoned and rolled back at its next phase boundary (or
 * fenced out, if it was taken over meanwhile).  A phase that fails releases
 * the lease at once, on a fresh connection if its own broke, so that the
 * retry after a database restart resumes without waiting for the lease.
 *
 * An owner acts only on a lease it can prove it holds (lease.h): proven
 * until the instant its last claim or renewal (its own, or the
 * heartbeat's for it) was sent, plus the lease, less a margin.  Before
 * each phase, each idem_http call (and throughout it) and each commit it
 * checks; past that instant it stops: no further external call, the 503
 * with Retry-After, the lease released within a bound where the database
 * answers.  So when the heartbeat's session stalls, the owner has stopped
 * before the database would let a retry take its key over.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <unistd.h>

#include "private.h"
#include "heartbeat.h"
#include "lease.h"

/*
 * Flight 1's statement: idem_claim() (sql/005_idem_fencing.sql) resolves
 * the tenant, looks the key up, tries the per-key advisory lock only when
 * this request may write the record, and, on phased routes, inserts it in
 * progress or takes a lapsed lease over.  A function, so that its plan is
 * kept per connection; called unnamed.  $1 secret hash, $2 key, $3 method,
 * $4 path, $5 fingerprint, $6 ttl ms, $7 lock id (also the key's digest
 * among remembered keys), $8 lease ms, $9 phased, $10 the canonical body
 * (phased: kept for the completer), $11 the route's remember ms (NULL:
 * off; sql/010).
 */
static const char sql_lookup[] =
	"SELECT * FROM idem_claim($1, $2, $3, $4, $5, $6::bigint, $7::bigint,"
	" $8::bigint, $9::boolean, $10, $11::bigint)";

enum {	/* columns of sql_lookup */
	C_TENANT, C_SECRET, C_GOT, C_CLAIMED, C_INSERTED, C_ID, C_METHOD,
	C_PATH, C_FPR, C_STATE, C_STATUS, C_HEADERS, C_BODY, C_LIVE, C_POINT,
	C_STALE, C_TAKEN, C_TOKEN, C_EXPIRES, C_REMEMBERED
};

/*
 * Flight 2 of an atomic route: the record, written once and completed
 * (idem_complete(), which raises unless it wrote exactly that row, and
 * returns its expires_at in Unix seconds).
 * $1 tenant, $2 key, $3 method, $4 path, $5 fingerprint, $6 ttl ms,
 * $7 status, $8 headers (json), $9 body, $10 remember ms (NULL: off).
 */
static const char sql_complete[] =
	"SELECT idem_complete($1::bigint, $2, $3, $4, $5, $6::bigint,"
	" $7::integer, $8::jsonb, $9, $10::bigint)";

/* The last phase of a phased route, fenced: $1 id, $2 token, $3 status,
 * $4 headers, $5 body, $6 ttl ms (the replay window from now, at least).
 * Raises unless the lease is still ours; returns expires_at as stored. */
static const char sql_finish[] =
	"SELECT idem_finish($1::bigint, $2::uuid, $3::integer, $4::jsonb, $5,"
	" $6::bigint)";

/* A phase commit, fenced: $1 id, $2 token, $3 next point (NULL: renew
 * only), $4 lease ms.  Raises unless the lease is still ours. */
static const char sql_advance[] =
	"SELECT idem_advance($1::bigint, $2::uuid, $3, $4::bigint)";

/* Why a fenced write failed, for the 503: the lease is someone else's. */
static const char lost_key[] = "this request no longer holds its "
    "Idempotency-Key";
/* Why an owner stopped: its lease could not be proven (heartbeat stalled). */
static const char doubtful_key[] = "this request could not prove it still "
    "holds its Idempotency-Key (its lease was not renewed in time) and "
    "stopped";

/* How long a failed phase waits for each of its rollback and its lease's
 * release: the lease lapses by itself anyway, and a worker is not held by
 * a stalled database. */
#define CLEANUP_BOUND_MS	1000

static int	deadline_passed(idem_req *);

/* Until when the heartbeat keeps our lease: the handler's deadline or the
 * phase's, whichever is first (idem_now_us()'s clock). */
static long long
lease_until_us(const idem_req *req)
{
	long long	a, b;

	a = req->txn.started_us + req->txn.limits.deadline_ms * 1000;
	b = req->txn.phase_started_us +
	    req->txn.limits.phase_deadline_ms * 1000;
	return a < b ? a : b;
}

static void
heartbeat_stop(idem_req *req)
{
	idem_heartbeat_remove(req->app->heartbeat, req->txn.hb);
	req->txn.hb = 0;
}

/* Until when our lease is proven: from our last claim or renewal, or the
 * heartbeat's last renewal of it, whichever was sent last. */
static long long
lease_sure_until_us(const idem_req *req)
{
	long long	own = req->txn.lease_sent_us,
			hb = idem_heartbeat_renewed_us(req->app->heartbeat,
			    req->txn.hb);

	return idem_lease_sure_until_us(own > hb ? own : hb,
	    req->txn.limits.lock_timeout_ms);
}

/* Does req hold a lease it must prove?  A phased request that claimed. */
static int
leased(const idem_req *req)
{
	return req->txn.phased && req->txn.in_txn && req->txn.lease_sent_us > 0;
}

long long
idem_req_lease_left_us(const idem_req *req)
{
	if (!leased(req))
		return LLONG_MAX;
	if (req->txn.lease_doubt)
		return 0;
	return lease_sure_until_us(req) - idem_now_us();
}

enum idem_lease_state
idem_req_lease_check(idem_req *req)
{
	long long	now = idem_now_us(), until;

	if (!leased(req))
		return IDEM_LEASE_SURE;
	if (req->txn.lease_doubt)
		return IDEM_LEASE_DOUBTFUL;
	until = lease_sure_until_us(req);
	if (idem_lease_state_at(until, now) == IDEM_LEASE_SURE)
		return IDEM_LEASE_SURE;
	req->txn.lease_doubt = 1;
	req->txn.retry_later = doubtful_key;
	idem_log(IDEM_LOG_WARN, "request %s: key record %" PRId64 ": its "
	    "lease is no longer proven (its last renewal was sent %lld ms ago; "
	    "lease %lld ms, margin %lld ms): stopped, no further external "
	    "call", req->request_id, req->txn.record_id, (now - until) / 1000 +
	    req->txn.limits.lock_timeout_ms -
	    idem_lease_margin_ms(req->txn.limits.lock_timeout_ms),
	    req->txn.limits.lock_timeout_ms,
	    idem_lease_margin_ms(req->txn.limits.lock_timeout_ms));
	return IDEM_LEASE_DOUBTFUL;
}

static int64_t
get_i64(const PGresult *r, int col)
{
	return idem_pg_int8(r, 0, col);
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
	unsigned char	 h[32];
	int64_t		 v = 0;
	int		 i;

	idem_key_digest(req->secret_hash, req->key, h);
	for (i = 0; i < 8; i++)
		v = (int64_t)((uint64_t)v << 8 | h[i]);
	idem_fmt_int(out, (long long)v);
}

/*
 * SHA-256 over method, path and the canonical body, NUL-separated (the
 * body without the route's fingerprint_exclude members, where it has any).
 */
static void
fingerprint(idem_req *req)
{
	struct idem_buf		 b = { 0 };
	const struct idem_buf	*body = req->fpcanon.p != NULL ?
				    &req->fpcanon : &req->canon;

	idem_buf_adds(&b, req->method);
	idem_buf_addc(&b, '\0');
	idem_buf_adds(&b, req->path);
	idem_buf_addc(&b, '\0');
	idem_buf_add(&b, body->p ? body->p : "", body->len);
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
		req->txn.txn_open = 0;
	}
	/* A handler's 5xx stays, unless the request stopped for its lease
	 * (whatever the handler made of its cut call). */
	if (rc == 0 && req->status >= 500 && !req->txn.lease_doubt)
		return;
	/* Transient: the database failed, not the request; a retry may
	 * succeed. */
	if (req->txn.retry_later) {
		idem_resp_problem(req, IDEM_P_UNAVAILABLE, "%s; retry later",
		    req->txn.retry_later);
		req->outcome = IDEM_OUT_ERROR;
	} else if (rc == IDEM_RC_TRANSIENT || req->db_unavailable ||
	    idem_db_broken(req->db) || idem_sqlstate_transient(req->db_sqlstate))
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

	for (i = 0; i < req->txn.ndefer; i++, n++) {
		memset(&q[n], 0, sizeof(q[n]));
		q[n].sql = req->txn.defer[i].sql;
		q[n].n = req->txn.defer[i].n;
		q[n].vals = (const char *const *)req->txn.defer[i].vals;
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
 * statement (which must write its one row; its value into *value when
 * value is not NULL), COMMIT.  An enum idem_rc, as idem_pipeline().
 */
static int
commit_with(idem_req *req, const struct idem_q *record, long long *value)
{
	struct idem_q	 q[1 + 4 + 2];
	size_t		 n = 0;
	int		 rc;

	memset(q, 0, sizeof(q));
	if (!req->txn.txn_open)
		q[n++].sql = "BEGIN";
	n = defer_queue(req, q, n);
	q[n++] = *record;
	q[n++].sql = "COMMIT";
	rc = idem_pipeline(req->db, req->stmts, q, n, &req->round_trips);
	req->txn.txn_open = 0;
	if (rc == 0 && !wrote_one(q[n - 2].res))
		rc = -1;
	if (rc == 0 && value != NULL)
		*value = strtoll(PQgetvalue(q[n - 2].res, 0, 0), NULL, 10);
	idem_pipeline_clear(q, n);
	idem_defer_free(req);
	return rc;
}

/* The statement that stores the response (sql_finish or sql_complete)
 * and its parameters' text. */
struct store_args {
	char		 id[24], st[24], ttl[24], rem[24];
	const char	*vals[10];
	int		 lens[10], fmts[10];
};

static void
store_params(idem_req *req, const char *headers, struct store_args *a,
    struct idem_q *rec)
{
	const char	**vals = a->vals;
	int		 body;

	idem_fmt_int(a->st, req->status);
	idem_fmt_int(a->ttl, req->txn.limits.ttl_ms);
	if (req->txn.phased) {
		idem_fmt_int(a->id, (long long)req->txn.record_id);
		vals[0] = a->id;
		vals[1] = req->txn.lease_token;
		vals[2] = a->st;
		vals[3] = headers;
		body = 4;
		vals[5] = a->ttl;
		rec->sql = sql_finish;
	} else {
		idem_fmt_int(a->id, (long long)req->tenant);
		vals[0] = a->id;
		vals[1] = req->key;
		vals[2] = req->method;
		vals[3] = req->path;
		vals[4] = (const char *)req->fingerprint;
		a->lens[4] = 32;
		a->fmts[4] = 1;
		vals[5] = a->ttl;
		vals[6] = a->st;
		vals[7] = headers;
		body = 8;
		rec->sql = sql_complete;
	}
	vals[body] = req->resp.p ? req->resp.p : "";
	a->lens[body] = (int)req->resp.len;
	a->fmts[body] = 1;
	if (!req->txn.phased) {
		idem_fmt_int(a->rem, req->txn.limits.remember_ms);
		vals[body + 1] = req->txn.limits.remember_ms > 0 ? a->rem : NULL;
	}
	rec->n = req->txn.phased ? 6 : body + 2;
	rec->vals = vals;
	rec->lens = a->lens;
	rec->fmts = a->fmts;
}

/*
 * Flight 2: deferred effects, the stored response, COMMIT.  An atomic
 * route writes its record here, once; a phased one completes the record
 * its first flight inserted.
 */
static int
store_and_commit(idem_req *req)
{
	struct idem_q		 rec;
	struct idem_buf		 hj = { 0 };
	struct store_args	 a;
	int			 rc;

	if (req->txn.phased && (deadline_passed(req) ||
	    idem_req_lease_check(req) != IDEM_LEASE_SURE))
		return -1;
	/* The last phase ends the lease: nothing is left to renew. */
	if (req->txn.phased)
		heartbeat_stop(req);
	if (headers_json(req, &hj) == -1)
		return -1;
	memset(&rec, 0, sizeof(rec));
	memset(&a, 0, sizeof(a));
	store_params(req, hj.p, &a, &rec);
	rc = commit_with(req, &rec, &req->txn.key_expires);
	idem_buf_free(&hj);
	/* A broken connection is the database's failure, not a lost key. */
	if (rc == IDEM_RC_TRANSIENT && req->txn.phased &&
	    !idem_db_broken(req->db))
		req->txn.retry_later = lost_key;
	return rc;
}

/*
 * Past the handler's or the phase's wall-clock deadline?  Then the request
 * is abandoned: whatever it has not committed rolls back, and the client
 * is told to retry (the lease, shorter than neither, is still ours).
 */
static int
deadline_passed(idem_req *req)
{
	long long	now = idem_now_us();

	if (now - req->txn.started_us <= req->txn.limits.deadline_ms * 1000 &&
	    now - req->txn.phase_started_us <=
	    req->txn.limits.phase_deadline_ms * 1000)
		return 0;
	idem_log(IDEM_LOG_WARN, "request %s ran past its deadline: abandoned",
	    req->request_id);
	req->txn.retry_later = "the request ran past its deadline";
	return 1;
}

/* Renew our lease in a statement of its own (no transaction open): 0, or
 * -1 when the record is no longer ours or the database failed. */
static int
renew(idem_req *req)
{
	struct idem_q	 q;
	char		 id[24], lease[24];
	const char	*vals[4] = { id, req->txn.lease_token, NULL, lease };
	long long	 sent;
	int		 rc;

	idem_fmt_int(id, (long long)req->txn.record_id);
	idem_fmt_int(lease, req->txn.limits.lock_timeout_ms);
	memset(&q, 0, sizeof(q));
	q.sql = sql_advance;
	q.n = 4;
	q.vals = vals;
	sent = idem_now_us();
	rc = idem_pipeline(req->db, req->stmts, &q, 1, &req->round_trips);
	idem_pipeline_clear(&q, 1);
	if (rc == 0)
		req->txn.lease_sent_us = sent;
	if (rc == IDEM_RC_TRANSIENT && !idem_db_broken(req->db))
		req->txn.retry_later = lost_key;
	return rc == 0 ? 0 : -1;
}

/* One statement of a failed phase's cleanup, answered within
 * CLEANUP_BOUND_MS or given up (the connection with it); its result, or
 * NULL. */
static PGresult *
cleanup_exec(idem_req *req, const char *sql, int n, const char *const *vals)
{
	PGresult	*r;

	if (idem_db_exec_until(req->db, sql, n, vals, idem_now_us() +
	    CLEANUP_BOUND_MS * 1000LL, &r) == IDEM_TIMED_LATE) {
		idem_log(IDEM_LOG_WARN, "db: no answer within %d ms to "
		    "\"%.24s\": its connection is given up", CLEANUP_BOUND_MS,
		    sql);
		idem_db_abandon(req->db);
	}
	return r;
}

/*
 * A phase failed: its transaction is undone.  A record that never passed
 * a recovery point is deleted (a retry executes afresh); otherwise its
 * lease is released so that a retry (or the completer) resumes at once.
 */
static void
phase_failed(idem_req *req, int rc)
{
	char		 id[24];
	const char	*vals[2] = { id, req->txn.lease_token };
	PGresult	*r;

	/* Open, or aborted by a failed flight (a fenced write that raised). */
	if (req->txn.txn_open || PQtransactionStatus(req->db) != PQTRANS_IDLE)
		PQclear(cleanup_exec(req, "ROLLBACK", 0, NULL));
	req->txn.txn_open = 0;
	idem_defer_free(req);
	heartbeat_stop(req);
	/* The answer first (it looks at the connection that failed). */
	failed(req, rc);
	/*
	 * Then the lease, only while it is ours (idem_release() is fenced);
	 * on a fresh connection when this one broke (a restart, a
	 * failover), so that the retry resumes at once instead of a lease
	 * later.
	 */
	idem_fmt_int(id, (long long)req->txn.record_id);
	if (idem_db_broken(req->db)) {
		idem_req_conn_release(req);
		if (idem_req_conn(req) == NULL) {
			idem_log(IDEM_LOG_WARN, "key record %s: no connection "
			    "to release its lease; it lapses", id);
			return;
		}
	}
	/* Bounded: a database that does not answer lets the lease lapse. */
	r = cleanup_exec(req, "SELECT idem_release($1::bigint, $2::uuid)", 2,
	    vals);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		idem_log(IDEM_LOG_WARN, "key record %s: its lease could not be "
		    "released (it lapses): %s", id, r != NULL ?
		    PQresultErrorMessage(r) : PQerrorMessage(req->db));
	PQclear(r);
}

/*
 * A test-only crash switch, compiled in only with --enable-fault-injection:
 * IDEM_FAULT=before:POINT or after:POINT kills the process there;
 * IDEM_FAULT=stall-before:POINT or stall-after:POINT makes the request
 * sleep there for STALL_S seconds (a database restart at that boundary).
 */
#define STALL_S	6
static void
fault(const char *when, const char *point)
{
#ifdef IDEM_FAULT_INJECTION
	const char	*f = getenv("IDEM_FAULT");
	size_t		 n = strlen(when);
	int		 stall = 0;

	if (f != NULL && strncmp(f, "stall-", 6) == 0) {
		f += 6;
		stall = 1;
	}
	if (f != NULL && strncmp(f, when, n) == 0 && f[n] == ':' &&
	    strcmp(f + n + 1, point) == 0) {
		idem_log(IDEM_LOG_WARN, "fault: %s %s %s", stall ?
		    "stalling the request" : "killing the process", when,
		    point);
		if (!stall)
			raise(SIGKILL);
		sleep(STALL_S);
	}
#else
	(void)when;
	(void)point;
#endif
}

/* Phased: open the phase's transaction (the handler asked for db). */
static int
phase_begin(idem_req *req)
{
	PGresult	*r;
	int		 ok;

	r = PQexec(req->db, "BEGIN");
	req->round_trips++;
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (ok)
		req->txn.txn_open = 1;
	return ok ? 0 : -1;
}

/*
 * The handler's connection.  Under the middleware on a phased route each
 * phase runs in its own transaction, opened here when the handler first
 * asks for the connection in that phase (lazily: a phase that only pauses
 * costs no BEGIN).  The state is this file's; request.c only owns the
 * connection (conn.c).
 */
PGconn *
idem_req_db(idem_req *req)
{
	if (idem_req_conn(req) == NULL)
		return NULL;
	if (req->txn.phased && req->txn.in_txn && !req->txn.txn_open &&
	    phase_begin(req) == -1)
		return NULL;
	return req->db;
}

int
idem_req_phase_pause(idem_req *req)
{
	PGresult	*r;

	/* Nothing may be pending: this records no recovery point. */
	if (!req->txn.phased || req->txn.ndefer > 0 || req->db == NULL)
		return -1;
	if (req->txn.txn_open) {
		r = PQexec(req->db, "ROLLBACK");
		req->round_trips++;
		req->txn.txn_open = 0;
		PQclear(r);
	}
	/* The external call that follows gets a whole lease: it is bounded
	 * by the phase's deadline, which is shorter. */
	if (deadline_passed(req) ||
	    idem_req_lease_check(req) != IDEM_LEASE_SURE)
		return -1;
	return renew(req);
}

int
idem_req_lease_renew(idem_req *req)
{
	if (!req->txn.phased || req->db == NULL || req->txn.txn_open ||
	    deadline_passed(req) ||
	    idem_req_lease_check(req) != IDEM_LEASE_SURE)
		return -1;
	return renew(req);
}

long long
idem_req_time_left_ms(const idem_req *req)
{
	long long	now = idem_now_us(), a, b;

	if (req->txn.started_us == 0)
		return 0;
	a = req->txn.limits.deadline_ms - (now - req->txn.started_us) / 1000;
	b = req->txn.limits.phase_deadline_ms -
	    (now - req->txn.phase_started_us) / 1000;
	a = a < b ? a : b;
	return a > 0 ? a : 0;
}

const char *
idem_req_recovery_point(const idem_req *req)
{
	return req->txn.recovery_point[0] != '\0' ? req->txn.recovery_point :
	    NULL;
}

int64_t
idem_req_record_id(const idem_req *req)
{
	return req->txn.record_id;
}

int
idem_req_phase_commit(idem_req *req, const char *next)
{
	struct idem_q	 update;
	char		 id[24], lease[24];
	const char	*vals[4];
	long long	 sent;
	int		 rc;

	if (!req->txn.phased || req->db == NULL || next == NULL ||
	    strlen(next) == 0 ||
	    strlen(next) >= sizeof(req->txn.recovery_point))
		return -1;
	if (deadline_passed(req) ||
	    idem_req_lease_check(req) != IDEM_LEASE_SURE)
		return -1;
	fault("before", next);
	idem_fmt_int(id, (long long)req->txn.record_id);
	idem_fmt_int(lease, req->txn.limits.lock_timeout_ms);
	vals[0] = id;
	vals[1] = req->txn.lease_token;
	vals[2] = next;
	vals[3] = lease;
	memset(&update, 0, sizeof(update));
	/* Fenced: raises (rolling the phase back) unless the lease is ours;
	 * renews it with the new recovery point. */
	update.sql = sql_advance;
	update.n = 4;
	update.vals = vals;
	sent = idem_now_us();
	rc = commit_with(req, &update, NULL);
	if (rc != 0) {
		if (rc == IDEM_RC_TRANSIENT && !idem_db_broken(req->db))
			req->txn.retry_later = lost_key;
		return -1;
	}
	strcpy(req->txn.recovery_point, next);
	req->txn.lease_sent_us = sent;
	req->txn.phase_started_us = idem_now_us();
	idem_heartbeat_until(req->app->heartbeat, req->txn.hb,
	    lease_until_us(req));
	fault("after", next);
	return 0;
}

int
idem_req_derived_key(const idem_req *req, const char *phase, char *out,
    size_t outlen)
{
	struct idem_buf	  b = { 0 };
	unsigned char	  h[32];

	/*
	 * Stable across retries, processes and even a replaced record: the
	 * same tenant, key and request (fingerprint) give the same key, so
	 * the other side can always deduplicate; opaque to it.
	 */
	if (!req->has_key || phase == NULL || outlen < 2 * 20 + 1)
		return -1;
	idem_buf_add(&b, req->secret_hash, sizeof(req->secret_hash));
	idem_buf_add(&b, req->fingerprint, sizeof(req->fingerprint));
	idem_buf_adds(&b, req->key);
	idem_buf_addc(&b, '\0');
	idem_buf_adds(&b, phase);
	idem_sha256(b.p, b.len, h);
	idem_buf_free(&b);
	idem_hex(h, 20, out);
	return 0;
}

/* Read flight 1's row for the verdict. */
static void
claim_row(const idem_req *req, const PGresult *r, struct idem_claim_row *row)
{
	memset(row, 0, sizeof(*row));
	/* The index found the hash; the comparison is in constant time. */
	row->tenant_ok = PQntuples(r) == 1 && !PQgetisnull(r, 0, C_TENANT) &&
	    idem_secret_eq(req->secret_hash, PQgetvalue(r, 0, C_SECRET),
	    (size_t)PQgetlength(r, 0, C_SECRET));
	if (!row->tenant_ok)
		return;
	row->lock_tried = !PQgetisnull(r, 0, C_GOT);
	row->lock_got = get_bool(r, C_GOT);
	row->claimed = get_bool(r, C_CLAIMED);
	row->inserted = !PQgetisnull(r, 0, C_INSERTED) &&
	    !PQgetisnull(r, 0, C_TOKEN);
	row->taken = get_bool(r, C_TAKEN) && !PQgetisnull(r, 0, C_TOKEN) &&
	    PQgetlength(r, 0, C_POINT) < (int)sizeof(req->txn.recovery_point);
	row->has_record = !PQgetisnull(r, 0, C_ID);
	row->same_request = row->has_record &&
	    strcmp(PQgetvalue(r, 0, C_METHOD), req->method) == 0 &&
	    strcmp(PQgetvalue(r, 0, C_PATH), req->path) == 0 &&
	    PQgetlength(r, 0, C_FPR) == 32 &&
	    memcmp(PQgetvalue(r, 0, C_FPR), req->fingerprint, 32) == 0;
	row->completed = row->has_record &&
	    strcmp(PQgetvalue(r, 0, C_STATE), "completed") == 0 &&
	    !PQgetisnull(r, 0, C_STATUS);
	row->remembered = !PQgetisnull(r, 0, C_REMEMBERED);
}

/* The lease token, a uuid in binary (16 bytes), as text. */
static void
token_text(const PGresult *r, char out[40])
{
	const unsigned char	*u = (const unsigned char *)PQgetvalue(r, 0,
				    C_TOKEN);
	int			 i, n = 0;

	out[0] = '\0';
	if (PQgetlength(r, 0, C_TOKEN) != 16)
		return;
	for (i = 0; i < 16; i++)
		n += snprintf(out + n, (size_t)(40 - n), "%s%02x",
		    i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
}

/*
 * Tell the client how long its key is remembered: the record's expires_at,
 * on the first answer and on every replay (not stored with the response,
 * because a late completion moves it).
 */
static void
expires_header(idem_req *req)
{
	char	date[IDEM_IMF_FIXDATE_LEN];

	if (req->txn.key_expires > 0 &&
	    idem_imf_fixdate(req->txn.key_expires, date, sizeof(date)) == 0)
		idem_resp_header(req, "Idempotency-Key-Expires", date);
}

/*
 * 410: this request ran under this key before and its record expired at
 * Unix time t; the route remembers it (sql/010).  Not executed again,
 * and its answer is gone: the client must look the operation up.
 */
static void
expired(idem_req *req, long long t)
{
	char	date[IDEM_IMF_FIXDATE_LEN];

	if (idem_imf_fixdate(t, date, sizeof(date)) != 0)
		snprintf(date, sizeof(date), "%s", "an earlier time");
	idem_resp_problem(req, IDEM_P_KEY_EXPIRED, "this request was already "
	    "executed under this Idempotency-Key; its record expired at %s "
	    "and its answer can no longer be replayed; it is not executed "
	    "again: do not retry, look the operation up", date);
	req->outcome = IDEM_OUT_EXPIRED;
}

static void
in_flight(idem_req *req, const char *detail)
{
	idem_resp_problem(req, IDEM_P_KEY_IN_FLIGHT, "%s", detail);
	req->outcome = IDEM_OUT_IN_FLIGHT;
}

/*
 * Prefer: wait=N (RFC 7240) on a duplicate of a key in flight: instead of
 * the 409 at once, wait up to min(N, [idempotency] max_wait) for the first
 * request to end, then answer as a retry would (a replay, or an execution
 * when the first stored nothing).  A waiter holds its worker thread and
 * its request's memory, never a pool connection: between polls the
 * connection goes back to the pool, and each poll is one flight 1.  A
 * duplicate waits only if idem_wait_admit() lets it (a worker left free
 * beside waiters and owners, max_waiters, max_waiters_per_tenant); the
 * others get the 409 at once.
 */
struct wait {
	int		 state;		/* enum wait_state */
	unsigned	 slot;		/* app->waiting[], while WAIT_WAITING */
	unsigned	 applied_s;	/* min(N, max_wait), for the header */
	long long	 until_us;
	long long	 delay_us;	/* the next poll's, doubling */
};

enum wait_state {
	WAIT_UNASKED,		/* not asked yet */
	WAIT_NO,		/* no preference, or refused */
	WAIT_WAITING,		/* holding a waiter slot */
	WAIT_EXECUTING,		/* waited, then executed: slot given back */
};

#define WAIT_POLL_FIRST_US	20000
#define WAIT_POLL_MAX_US	200000

/* The refusal's outcome in idem_prefer_waits_total. */
static const enum idem_wait_outcome refused_as[] = {
	[IDEM_ADMIT_NO_WORKER] = IDEM_WAIT_REFUSED_WORKER,
	[IDEM_ADMIT_PROCESS_FULL] = IDEM_WAIT_REFUSED,
	[IDEM_ADMIT_TENANT_FULL] = IDEM_WAIT_REFUSED_TENANT,
};

/* A waiter slot for req's tenant, if idem_wait_admit() allows: 0, or -1
 * with the refusal counted. */
static int
wait_slot_take(idem_req *req, struct wait *w)
{
	idem_app		*app = req->app;
	struct idem_wait_load	 l = { 0 };
	enum idem_wait_admission a;
	unsigned		 i, free_slot = IDEM_WAITERS_MAX;

	l.threads = app->cfg.threads;
	l.max_waiters = app->cfg.max_waiters;
	l.max_per_tenant = app->cfg.max_waiters_per_tenant;
	l.owners = (unsigned)atomic_load(&app->owners);
	pthread_mutex_lock(&app->waiting_mu);
	for (i = 0; i < IDEM_WAITERS_MAX; i++) {
		if (!app->waiting[i].used) {
			if (free_slot == IDEM_WAITERS_MAX)
				free_slot = i;
			continue;
		}
		l.waiters++;
		l.tenant_waiters += app->waiting[i].tenant == req->tenant;
	}
	/* max_waiters <= IDEM_WAITERS_MAX: admitted, a slot is free. */
	if ((a = idem_wait_admit(&l)) == IDEM_ADMIT_WAIT) {
		app->waiting[free_slot].used = 1;
		app->waiting[free_slot].tenant = req->tenant;
		w->slot = free_slot;
		atomic_fetch_add(&app->waiters, 1);
	}
	pthread_mutex_unlock(&app->waiting_mu);
	if (a == IDEM_ADMIT_WAIT)
		return 0;
	idem_metrics_wait(app, refused_as[a]);
	return -1;
}

static void
wait_slot_give(idem_req *req, struct wait *w)
{
	pthread_mutex_lock(&req->app->waiting_mu);
	req->app->waiting[w->slot].used = 0;
	pthread_mutex_unlock(&req->app->waiting_mu);
	atomic_fetch_sub(&req->app->waiters, 1);
}

/* May this duplicate wait (more)?  Takes a waiter slot the first time. */
static int
wait_more(idem_req *req, struct wait *w)
{
	const struct idem_cfg	*cfg = &req->app->cfg;
	unsigned		 n;
	long long		 max_s = cfg->max_wait_ms / 1000;

	if (w->state == WAIT_UNASKED) {
		w->state = WAIT_NO;
		if (idem_prefer_wait(idem_req_header(req, "Prefer"), &n) !=
		    IDEM_PREFER_WAIT || max_s == 0 ||
		    wait_slot_take(req, w) == -1)
			return 0;
		w->state = WAIT_WAITING;
		w->applied_s = n < max_s ? n : (unsigned)max_s;
		w->until_us = idem_now_us() + (long long)w->applied_s * 1000000;
		w->delay_us = WAIT_POLL_FIRST_US;
		return 1;
	}
	if (w->state != WAIT_WAITING)
		return 0;
	if (atomic_load(&req->app->stopping) ||
	    idem_now_us() + w->delay_us > w->until_us) {
		idem_metrics_wait(req->app, IDEM_WAIT_TIMEOUT);
		return 0;
	}
	return 1;
}

/* Between two polls: no connection held. */
static void
wait_sleep(idem_req *req, struct wait *w)
{
	struct timespec	ts;

	idem_req_conn_release(req);
	ts.tv_sec = w->delay_us / 1000000;
	ts.tv_nsec = (long)(w->delay_us % 1000000) * 1000;
	nanosleep(&ts, NULL);
	w->delay_us = w->delay_us * 2 > WAIT_POLL_MAX_US ? WAIT_POLL_MAX_US :
	    w->delay_us * 2;
}

/* A waiter about to execute (the first stored nothing) is an owner from
 * now on, no longer a waiter. */
static void
wait_executes(idem_req *req, struct wait *w)
{
	if (w->state != WAIT_WAITING)
		return;
	wait_slot_give(req, w);
	w->state = WAIT_EXECUTING;
}

/* The slot back; the answer says the wait was honoured unless it is the
 * 409 of a wait that ran out. */
static void
wait_end(idem_req *req, struct wait *w)
{
	char	v[32];

	if (w->state == WAIT_WAITING)
		wait_slot_give(req, w);
	else if (w->state != WAIT_EXECUTING)
		return;
	if (req->outcome == IDEM_OUT_IN_FLIGHT)
		return;
	snprintf(v, sizeof(v), "wait=%u", w->applied_s);
	idem_resp_header(req, "Preference-Applied", v);
	idem_metrics_wait(req->app, req->outcome == IDEM_OUT_REPLAYED ?
	    IDEM_WAIT_REPLAYED : IDEM_WAIT_OTHER);
}

/*
 * Run the handler that flight 1 let execute or resume, then store its
 * response (the last phase, on phased routes) and commit.
 */
static void
execute(idem_req *req)
{
	int	rc;

	req->txn.started_us = req->txn.phase_started_us = idem_now_us();
	if (req->txn.phased)
		req->txn.hb = idem_heartbeat_add(req->app->heartbeat,
		    req->txn.record_id, req->txn.lease_token,
		    req->txn.limits.lock_timeout_ms, lease_until_us(req));
	rc = req->route->fn(req, req->route->arg);
	if (req->txn.phased && (rc == -1 || req->status == 0 ||
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
		if (req->txn.phased)
			phase_failed(req, rc);
		else
			failed(req, rc);
		return;
	}
	heartbeat_stop(req);
	/* The record and the effect committed, the answer not yet sent
	 * (IDEM_FAULT=stall-after:stored: the database restarted then). */
	fault("after", "stored");
	req->outcome = IDEM_OUT_CREATED;
	expires_header(req);
}

/* The claim's parameters (sql_lookup's $1..$11) and their text. */
struct claim_args {
	char		 lock[24], ttl[24], lease[24], rem[24];
	const char	*vals[11];
	int		 lens[11];
	int		 fmts[11];
};

static void
claim_args(idem_req *req, struct claim_args *a)
{
	static const int	 lens[11] = { 32, 0, 0, 0, 32 };
	static const int	 fmts[11] = { 1, 0, 0, 0, 1, 0, 0, 0, 0, 1 };

	memcpy(a->lens, lens, sizeof(lens));
	memcpy(a->fmts, fmts, sizeof(fmts));
	lock_id(req, a->lock);
	idem_fmt_int(a->ttl, req->txn.limits.ttl_ms);
	idem_fmt_int(a->lease, req->txn.limits.lock_timeout_ms);
	a->vals[0] = (const char *)req->secret_hash;
	a->vals[1] = req->key;
	a->vals[2] = req->method;
	a->vals[3] = req->path;
	a->vals[4] = (const char *)req->fingerprint;
	a->vals[5] = a->ttl;
	a->vals[6] = a->lock;
	a->vals[7] = a->lease;
	a->vals[8] = req->txn.phased ? "true" : "false";
	a->vals[9] = req->txn.phased ? (req->canon.p ? req->canon.p : "") :
	    NULL;
	a->lens[9] = req->txn.phased ? (int)req->canon.len : 0;
	idem_fmt_int(a->rem, req->txn.limits.remember_ms);
	a->vals[10] = req->txn.limits.remember_ms > 0 ? a->rem : NULL;
}

/* Sends the claim (q[1] is its answer); *sent: when it left. */
static int
claim_send(idem_req *req, struct claim_args *a, struct idem_q *q,
    size_t *nqp, long long *sent)
{
	size_t		 nq;
	int		 rc;

	memset(q, 0, 3 * sizeof(*q));
	q[0].sql = "BEGIN";
	q[1].sql = sql_lookup;
	q[1].n = 11;
	q[1].vals = a->vals;
	q[1].lens = a->lens;
	q[1].fmts = a->fmts;
	q[1].binary = 1;
	/* Phased: the new record and its lease commit at once, and nothing
	 * else happened when the verdict is a replay, a 409 or a 422. */
	nq = 2;
	if (req->txn.phased)
		q[nq++].sql = "COMMIT";
	*nqp = nq;
	*sent = idem_now_us();
	rc = idem_pipeline(req->db, req->stmts, q, nq, &req->round_trips);
	if (rc == IDEM_RC_TRANSIENT && idem_db_broken(req->db)) {
		/* Nothing happened yet: once more, on a re-established one. */
		idem_pipeline_clear(q, nq);
		idem_req_conn_release(req);
		*sent = idem_now_us();
		if (idem_req_db(req) != NULL)
			rc = idem_pipeline(req->db, req->stmts, q, nq,
			    &req->round_trips);
	}
	return rc;
}

/* What the claim's verdict leaves to idem_idempotent_run. */
enum claim_next {
	CLAIM_ANSWERED,		/* the response is set */
	CLAIM_EXECUTE,		/* this request owns the key: run it */
	CLAIM_WAIT		/* a duplicate in flight: wait, claim again */
};

/* This request owns the key (new, or a phased one to resume). */
static void
claim_owned(idem_req *req, const PGresult *r,
    const struct idem_claim_row *row, long long sent)
{
	req->tenant = get_i64(r, C_TENANT);
	token_text(r, req->txn.lease_token);
	if (req->txn.phased) {
		req->txn.resumed = !row->inserted;
		req->txn.record_id = get_i64(r, row->inserted ?
		    C_INSERTED : C_ID);
		strcpy(req->txn.recovery_point, row->inserted ?
		    "started" : PQgetvalue(r, 0, C_POINT));
		/* The claim took the lease: proven from its sending. */
		req->txn.lease_sent_us = sent;
	}
}

static enum claim_next
claim_answer(idem_req *req, const PGresult *r,
    const struct idem_claim_row *row, long long sent, struct wait *w)
{
	enum idem_verdict	v = idem_claim_verdict(row, req->txn.phased);

	switch (v) {
	case IDEM_V_UNAUTHORIZED:
		idem_resp_problem(req, IDEM_P_UNAUTHORIZED,
		    "a valid 'Authorization: Bearer' API key is required");
		idem_resp_header(req, "WWW-Authenticate", "Bearer");
		req->outcome = IDEM_OUT_REJECTED;
		break;
	case IDEM_V_EXECUTE:
	case IDEM_V_RESUME:
		claim_owned(req, r, row, sent);
		return CLAIM_EXECUTE;
	case IDEM_V_REPLAY:
		req->tenant = get_i64(r, C_TENANT);
		replay(req, r);
		req->txn.key_expires = get_i64(r, C_EXPIRES);
		expires_header(req);
		break;
	case IDEM_V_EXPIRED:
		req->tenant = get_i64(r, C_TENANT);
		expired(req, get_i64(r, C_REMEMBERED));
		break;
	case IDEM_V_REUSED:
		req->tenant = get_i64(r, C_TENANT);
		idem_resp_problem(req, IDEM_P_KEY_REUSED,
		    "this Idempotency-Key was already used for a different "
		    "request; use a new key");
		req->outcome = IDEM_OUT_REUSED;
		break;
	case IDEM_V_RACED:
	case IDEM_V_IN_FLIGHT:
		req->tenant = get_i64(r, C_TENANT);
		if (wait_more(req, w))
			return CLAIM_WAIT;
		in_flight(req, v == IDEM_V_RACED ? "a request with this "
		    "Idempotency-Key has just been processed; retry" : "a "
		    "request with this Idempotency-Key is being processed; "
		    "retry later");
		break;
	}
	return CLAIM_ANSWERED;
}

void
idem_idempotent_run(idem_req *req)
{
	struct idem_claim_row	 row;
	struct idem_q		 q[3];
	struct claim_args	 a;
	struct wait		 w = { WAIT_UNASKED, 0, 0, 0, 0 };
	size_t			 nq;
	long long		 sent;
	int			 rc;
	enum claim_next		 next;

	req->txn.phased = (req->route->flags & IDEM_ROUTE_PHASED) != 0;
	idem_cfg_route_limits(&req->app->cfg, req->method, req->route->pattern,
	    &req->txn.limits);
	req->txn.limits.ttl_ms = idem_inbox_ttl_ms(&req->app->cfg, req->route,
	    req->txn.limits.ttl_ms);
	fingerprint(req);
again:
	if (idem_req_db(req) == NULL) {
		unavailable(req);
		wait_end(req, &w);
		return;
	}
	claim_args(req, &a);
	if ((rc = claim_send(req, &a, q, &nq, &sent)) != 0) {
		idem_pipeline_clear(q, nq);
		failed(req, rc);
		wait_end(req, &w);
		return;
	}
	req->txn.in_txn = 1;
	req->txn.txn_open = !req->txn.phased;
	claim_row(req, q[1].res, &row);
	next = claim_answer(req, q[1].res, &row, sent, &w);
	idem_pipeline_clear(q, nq);
	if (next == CLAIM_EXECUTE) {
		wait_executes(req, &w);
		/* An owner holds its worker until its answer is stored. */
		atomic_fetch_add(&req->app->owners, 1);
		execute(req);
		atomic_fetch_sub(&req->app->owners, 1);
		wait_end(req, &w);
		return;
	}
	/* Phased: committed with flight 1. */
	if (!req->txn.phased) {
		/* Holding the key's lock, wait: a retry must not find it
		 * taken. */
		if (row.lock_got)
			PQclear(PQexec(req->db, "ROLLBACK"));
		else
			rollback_async(req);
		req->txn.txn_open = 0;
	}
	if (next == CLAIM_WAIT) {
		wait_sleep(req, &w);
		goto again;
	}
	wait_end(req, &w);
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
	if (!req->txn.in_txn) {
		if (idem_req_db(req) == NULL)
			return -1;
		r = PQexecParams(req->db, sql, nparams, NULL, values, NULL,
		    NULL, 0);
		ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
		    PQresultStatus(r) == PGRES_TUPLES_OK;
		if (!ok)
			idem_log_db_result(req, r);
		PQclear(r);
		return ok ? 0 : -1;
	}
	if (req->txn.ndefer ==
	    sizeof(req->txn.defer) / sizeof(req->txn.defer[0]))
		return -1;
	d = &req->txn.defer[req->txn.ndefer];
	memset(d, 0, sizeof(*d));
	if ((d->sql = strdup(sql)) == NULL ||
	    (d->vals = calloc((size_t)nparams + 1, sizeof(char *))) == NULL)
		goto fail;
	for (i = 0; i < nparams; i++)
		if (values[i] != NULL && (d->vals[i] = strdup(values[i])) == NULL)
			goto fail;
	/* Queued only whole: a failed copy would have become an SQL NULL. */
	d->n = nparams;
	req->txn.ndefer++;
	return 0;
fail:
	if (d->vals != NULL)
		for (i = 0; i < nparams; i++)
			free(d->vals[i]);
	free(d->sql);
	free(d->vals);
	memset(d, 0, sizeof(*d));
	return -1;
}

void
idem_defer_free(idem_req *req)
{
	size_t	i;
	int	j;

	for (i = 0; i < req->txn.ndefer; i++) {
		for (j = 0; j < req->txn.defer[i].n; j++)
			free(req->txn.defer[i].vals[j]);
		free(req->txn.defer[i].vals);
		free(req->txn.defer[i].sql);
	}
	req->txn.ndefer = 0;
}

int
idem_txn_phased(const idem_req *req)
{
	return req->txn.phased;
}
