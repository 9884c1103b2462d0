/*
 * private.h - the structures behind idem_app and idem_req, and the
 * functions that pass them between runtime, request and middleware.
 */
#ifndef IDEM_PRIVATE_H
#define IDEM_PRIVATE_H

#include <sys/socket.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* listen.c and runtime.c still use libfcgi for the listening socket
 * (FCGX_OpenSocket, FCGX_IsCGI); requests are read by fcgi.c. */
#include <fcgiapp.h>

#include "internal.h"
#include "fcgi.h"
#include "idempotency.h"
#include "stmts.h"
#include "trace.h"
#include "test/idem_test_private.h"	/* exported for libidem_test */

/* --- pgpool.c ------------------------------------------------------------ */

struct idem_pool;

/*
 * request_timeout_ms bounds every statement and idle transaction;
 * prepared is [database] prepared_statements.
 */
struct idem_pool *idem_pool_new(const char *conninfo, unsigned size,
	    long long request_timeout_ms, enum idem_prepared prepared);
/*
 * A healthy connection outside any transaction, or NULL after timeout_ms.
 * *stmts (when stmts is not NULL) is its prepared statements, for
 * idem_pipeline(), until it is released.
 */
PGconn	*idem_pool_acquire(struct idem_pool *pool, long long timeout_ms,
	    struct idem_stmts **stmts);
/* Give back; a connection left in a transaction is rolled back first. */
void	 idem_pool_release(struct idem_pool *pool, PGconn *db);
void	 idem_pool_counts(struct idem_pool *pool, unsigned *idle,
	    unsigned *busy);
void	 idem_pool_free(struct idem_pool *pool);
/* Is db unusable (server gone, session terminated)?  Reads pending input. */
int	 idem_db_broken(PGconn *db);
/* A binary int8 (network order) of a result; 0 if NULL or not 8 bytes. */
int64_t	 idem_pg_int8(const PGresult *r, int row, int col);
/* Connect one standalone connection (idemctl). */
PGconn	*idem_db_connect(const char *conninfo, long long timeout_ms);

/* --- pgtimed.c: a session and a statement within a deadline -------------- */

enum idem_timed {
	IDEM_TIMED_OK = 0,	/* answered in time, and it succeeded */
	IDEM_TIMED_FAILED,	/* answered in time with an error, or broken */
	IDEM_TIMED_LATE		/* no answer by the deadline */
};
/*
 * A session of its own (heartbeat) made without blocking past deadline_us
 * (idem_now_us()'s clock), named appname, with TCP keepalives and a
 * tcp_user_timeout of lease_ms; NULL (logged) when it is not up in time.
 */
PGconn	*idem_db_connect_until(const char *conninfo, const char *appname,
	    long long lease_ms, long long deadline_us);
/*
 * One statement (text parameters) answered by deadline_us; its result in
 * *res (NULL when none came; PQclear it).  LATE leaves the statement
 * running: the caller must idem_db_abandon() db.
 */
enum idem_timed idem_db_exec_until(PGconn *db, const char *sql, int n,
	    const char *const *vals, long long deadline_us, PGresult **res);
/* Give a late statement up: a cancel request sent in the background, and
 * the connection cut so that any later use of it fails at once. */
void	 idem_db_abandon(PGconn *db);

/* --- pipeline.c: several statements, one round trip ----------------------- */

struct idem_q {
	const char		*sql;
	int			 n;
	const char *const	*vals;
	const int		*lens;	/* NULL: all text */
	const int		*fmts;	/* NULL: all text */
	int			 binary;	/* result format */
	PGresult		*res;	/* filled; idem_pipeline_clear() */
};

/*
 * Pipeline q[0..n-1] and a sync, preparing and naming the statements
 * with parameters where stmts (NULL: none) allows; IDEM_RC_OK when every
 * statement succeeded, IDEM_RC_TRANSIENT when one failed for a transient reason
 * (connection, shutdown, timeout, serialisation), IDEM_RC_FAIL otherwise.
 */
#define IDEM_PIPELINE_MAX	8	/* statements per flight */

enum idem_rc idem_pipeline(PGconn *db, struct idem_stmts *stmts,
	    struct idem_q *q, size_t n, unsigned *round_trips);
void	idem_pipeline_clear(struct idem_q *q, size_t n);

/* --- tracectx.c ---------------------------------------------------------- */

/* req's trace: its traceparent header's when valid (trace.h), else a new
 * one; a span id of its own either way.  No trace (trace_id "") only when
 * no random bytes could be had. */
void	idem_trace_begin(idem_req *req);
/* The traceparent of a call req makes: its trace, a new span id, into
 * out (IDEM_TRACEPARENT_LEN + 1); -1 when req has no trace. */
int	idem_trace_child(const idem_req *req, char *out);

/* --- log.c --------------------------------------------------------------- */

void	idem_log_set_level(const char *name);
/* One log line per line of text (what the config parser warned of). */
void	idem_log_lines(enum idem_log_level lvl, const char *text);
/*
 * One JSON object per line on stderr: {"time","level","msg",...}, with
 * the "request_id" of the request this thread is serving (if any); the
 * message without trailing blanks or newlines (libpq's end in one).
 */
void	idem_log(enum idem_log_level lvl, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* The request this thread serves from now on (NULL: none): its id and
 * its trace id (kept by the caller, NULL or "": none) go on every line
 * idem_log() writes until then. */
void	idem_log_bind(const char *request_id, const char *trace_id);
/* A failed result of a request's statement, logged ("db: ...") and its
 * SQLSTATE kept in the request (a transient one makes the failure 503). */
void	idem_log_db_result(idem_req *req, const PGresult *r);

/* sqlstate.c: is a SQLSTATE the database's passing state (connection,
 * resources, statement or lock timeout, serialization failure,
 * deadlock), for which a retry may succeed?  1 or 0. */
int	idem_sqlstate_transient(const char *sqlstate);
/* While the runtime serves: gather lines, written by a thread of their
 * own within 100 ms (warnings and errors at once); stop flushes all. */
int	idem_log_gather_start(void);
void	idem_log_gather_stop(void);
/* Write the gathered lines now (before _exit). */
void	idem_log_flush(void);
/* The access log line of one request. */
void	idem_log_request(const idem_req *req, long long duration_us);
/* That line (a JSON object and "\n") appended to b. */
void	idem_log_request_line(const idem_req *req, long long duration_us,
	    struct idem_buf *b);

/* --- problem.c ----------------------------------------------------------- */

/* A problem type: the library's table, or an application's own
 * (idem_app_problem(); then the strings are owned by the app). */
struct idem_problem_type {
	const char	*slug;
	const char	*title;
	int		 status;
	const char	*doc;	/* the page's sentence: what the client does */
};

#define IDEM_APP_PROBLEMS_MAX	32

/* A webhook event the application sends (idem_app_webhook()), for the
 * OpenAPI document's webhooks. */
struct idem_webhook_decl {
	const char		*type;
	const char		*summary;
	const struct idem_body	*data;
};

#define IDEM_APP_WEBHOOKS_MAX	32

/* idem_app_webhook_routes() (endpoints.c): its declarations that name the
 * application's event types, so kept with the application. */
#define IDEM_ENDPOINT_VIEW_MEMBERS	9	/* the view's, its NULL too */
struct idem_endpoint_decls {
	const char		*types[IDEM_APP_WEBHOOKS_MAX + 1];
	struct idem_member	 type;		/* one of types */
	struct idem_member	 create[3];	/* url, events; NULL */
	struct idem_body	 create_body;
	struct idem_member	 view[IDEM_ENDPOINT_VIEW_MEMBERS];
	struct idem_member	 item[IDEM_ENDPOINT_VIEW_MEMBERS];
	struct idem_body	 view_body;	/* the create's, with its secret */
	struct idem_body	 item_body;	/* without */
	struct idem_response	 created[2], page[2], read[2], enabled[2];
	int			 done;		/* the routes are added */
};

/* The library's types and then app's (app may be NULL): their number, and
 * type p of them (internal-error for any other p). */
int	    idem_problem_count(const idem_app *app);
const struct idem_problem_type *idem_problem_type(const idem_app *app,
	    int p);
/* Free the application's problem types (idem_app_free()). */
void	    idem_app_problems_free(idem_app *app);
/* [server] problem_base, or the default "/problems/". */
const char *idem_problem_base(const idem_app *app);
/* Link: <type>; rel="describedby" for slug. */
int	    idem_problem_link(idem_req *req, const char *slug);
/* idem_resp_problem() with extension members: ext is JSON text of the
 * form ',"name":value...' (NULL: none). */
int	    idem_resp_problem_ext(idem_req *req, enum idem_problem p,
	    const char *ext, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
int	    idem_problem_doc_handler(idem_req *req, void *arg);
/* openapi.c: the document of app's routes (NULL: out of memory), and
 * GET /openapi.json */
idem_json  *idem_openapi(const idem_app *app);
int	    idem_openapi_handler(idem_req *req, void *arg);
/* json.c: a number given as its JSON text */
int	    idem_json_number(idem_json *j, const char *text);

/* --- the application ----------------------------------------------------- */

struct idem_app {
	char			*name;
	struct idem_cfg		 cfg;
	struct idem_router	 router;
	struct idem_pool	*pool;
	char			*listen;	/* -l */
	const char		*command;	/* "complete", "deliver", or NULL */
	long			 command_max;	/* complete: at most this many */
	struct idem_metrics	*metrics;
	struct idem_authc	*authc;		/* NULL: no cache */
	struct idem_janitor	*janitor;	/* its thread, while serving */
	struct idem_dispatcher	*dispatcher;	/* its thread, while serving */
	struct idem_heartbeat	*heartbeat;	/* its thread, while serving */
	struct idem_problem_type problems[IDEM_APP_PROBLEMS_MAX];
	size_t			 nproblems;	/* idem_app_problem() */
	struct idem_webhook_decl webhooks[IDEM_APP_WEBHOOKS_MAX];
	size_t			 nwebhooks;	/* idem_app_webhook() */
	char			 error[256];	/* idem_app_error() */
	struct idem_endpoint_decls endpoints;	/* idem_app_webhook_routes() */
	struct idem_inbox_route	*inboxes;	/* idem_app_inbox() */
	atomic_int		 stopping;
	atomic_int		 waiters;	/* Prefer: wait, now */
	atomic_size_t		 buffered;	/* bytes connections hold against
						 * [server] max_buffered (conns.c) */
	/* Owners in flight: requests running an idempotent route's handler,
	 * from their claim to their stored answer (idempotency.c). */
	atomic_int		 owners;
	/* Each waiter's tenant, in the slot it holds (idempotency.c). */
	pthread_mutex_t		 waiting_mu;
	struct idem_waiting {
		int		 used;
		int64_t		 tenant;
	}			 waiting[IDEM_WAITERS_MAX];
};

/* refusal.c: a setup call's reason for idem_app_error(), printf-style
 * (kept unless an earlier one was); returns -1, what the call returns. */
int	idem_app_refuse(idem_app *app, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* app.c: idem_app_prepare() is declared in test/idem_test_private.h. */

/* metrics.c */
struct idem_metrics;
int	idem_metrics_init(idem_app *app);
void	idem_metrics_free(idem_app *app);
void	idem_metrics_request(idem_app *app, const idem_req *req,
	    double seconds);
/* The pool waits req recorded (idem_metrics_request() counts them too). */
void	idem_metrics_pool_waits(idem_app *app, const idem_req *req);
void	idem_metrics_add(idem_app *app, int which, long n);
/* How a Prefer: wait ended (idempotency.c). */
enum idem_wait_outcome {
	IDEM_WAIT_REPLAYED,	/* the first request's stored answer */
	IDEM_WAIT_OTHER,	/* executed itself, or an error */
	IDEM_WAIT_TIMEOUT,	/* still in flight after the wait: 409 */
	IDEM_WAIT_REFUSED,	/* max_waiters already waiting: 409 at once */
	IDEM_WAIT_REFUSED_TENANT, /* max_waiters_per_tenant of its tenant */
	IDEM_WAIT_REFUSED_WORKER, /* it would leave no worker free */
	IDEM_WAIT__COUNT
};
void	idem_metrics_wait(idem_app *app, enum idem_wait_outcome o);
/* One janitor run took seconds; ok: without a database error. */
void	idem_metrics_janitor_run(idem_app *app, double seconds, int ok);
/* A connection closed for why (a refusal of fcgi.h, or its read timeout). */
void	idem_metrics_rejected(idem_app *app, enum idem_fcgi_rc why);
/* [metrics] listen: serve /metrics there from a thread (0, or -1). */
int	idem_metrics_listen(idem_app *app);
void	idem_metrics_listen_stop(idem_app *app);
/* A descriptor of the process was freed (a FastCGI connection closed): a
 * [metrics] listen socket paused at the limit is polled again. */
void	idem_metrics_fd_freed(idem_app *app);
enum { IDEM_M_EVICTED, IDEM_M_RECLAIMED, IDEM_M_COMPLETED, IDEM_M_REMEMBERED,
	IDEM_M_FORGOTTEN, IDEM_M_EVENTS_EVICTED, IDEM_M_BODIES_REFUSED };
/* A webhook delivery attempt of an event of topic (dispatcher.c). */
enum idem_event_metric {
	IDEM_EV_DELIVERED,	/* a 2xx answer */
	IDEM_EV_FAILED,		/* an attempt that failed */
	IDEM_EV_DEAD,		/* a delivery given up */
	IDEM_EV__COUNT
};
void	idem_metrics_event(idem_app *app, const char *topic,
	    enum idem_event_metric which);
/* An event's commit to its endpoint's 2xx took seconds. */
void	idem_metrics_event_latency(idem_app *app, double seconds);
/* The dispatcher disabled an endpoint for why (an enum
 * idem_endpoint_verdict other than IDEM_ENDPOINT_KEEP, delivery.h). */
void	idem_metrics_endpoint_disabled(idem_app *app, int why);
int	idem_metrics_handler(idem_req *req, void *arg);

/* Outcome of a request, for logs and metrics. */
enum idem_outcome {
	IDEM_OUT_NONE = 0,	/* not an idempotent route */
	IDEM_OUT_CREATED,	/* executed and stored */
	IDEM_OUT_REPLAYED,
	IDEM_OUT_IN_FLIGHT,
	IDEM_OUT_REUSED,
	IDEM_OUT_EXPIRED,	/* 410: remembered after its record expired */
	IDEM_OUT_REJECTED,	/* 4xx before the handler */
	IDEM_OUT_ERROR,		/* 5xx */
	IDEM_OUT__COUNT
};

/* log.c: the outcome's name in logs and metrics; NULL for IDEM_OUT_NONE. */
const char *idem_outcome_name(enum idem_outcome o);

#define IDEM_MAX_HEADERS	16

struct idem_req {
	idem_app		*app;
	struct idem_fcgi	*in;		/* NULL: run by the completer */
	const struct idem_route	*route;
	struct idem_params	 params;

	/* request */
	char			 method[16];
	char			*path;		/* owned */
	char			*query;		/* owned, raw */
	const char		*remote_addr;
	char			*body;		/* owned, NUL-terminated */
	size_t			 bodylen;
	struct idem_buf		 canon;		/* JCS form of the body */
	/* the fingerprint's form, when the route excludes members
	 * (fingerprint_exclude); else canon is */
	struct idem_buf		 fpcanon;
	yajl_val		 json;
	int64_t			 tenant;
	unsigned char		 secret_hash[IDEM_SECRET_HASH_LEN];	/* of the secret */
	long long		 auth_t0_ms;	/* before the secret was checked */
	struct idem_qval	*qvals;		/* idem_req_query() results */
	/* declared query parameters: the pairs, and each one's value */
	struct idem_query_pairs	 qpairs;
	const char		*qparam[IDEM_PARAMS_MAX];
	char			 key[IDEM_KEY_MAX + 1];
	int			 has_key;
	unsigned char		 fingerprint[32];
	char			 request_id[17];
	/* its trace (tracectx.c): trace_id "" when it has none */
	struct idem_trace	 trace;

	/* database (conn.c) */
	PGconn			*db;
	struct idem_stmts	*stmts;		/* db's prepared statements */
	int			 db_unavailable;
	char			 db_sqlstate[6];	/* of a statement that
						 * failed for the handler */
	unsigned		 round_trips;
	unsigned		 npool_waits;	/* acquisitions, for metrics */
	long long		 pool_wait_us[4];
	/* the middleware's transaction: read and written by idempotency.c
	 * only */
	struct idem_txn		 txn;

	/* response */
	int			 status;
	char			*ctype;
	struct idem_buf		 resp;
	size_t			 nheaders;
	char			*hname[IDEM_MAX_HEADERS];
	char			*hvalue[IDEM_MAX_HEADERS];
	int			 replayed;
	enum idem_outcome	 outcome;

	/* outbox.c: the events enqueued, "point\0type\0" each */
	struct idem_buf		 events;
};

/* request.c: is addr in the comma/blank-separated address list? */
int	idem_addr_allowed(const char *list, const char *addr);
/* http.c: "Content-Length" (absent or empty: 0) into n; -1 unless 1..19
 * digits.  Is ct application/json (parameters allowed)? */
int	idem_http_content_length(const char *s, unsigned long long *n);
int	idem_http_is_json(const char *ct);

/*
 * receive.c: routes that receive a signed source's webhooks
 * (idem_app_inbox()).  Each knows its source, its retention and, once
 * resolved, the secret hash that stands for the source's tenant (an
 * api_keys row whose secret nobody holds: sql/050).
 */
struct idem_inbox_route {
	char			*source;
	long long		 retention_ms;
	pthread_mutex_t		 mu;
	int			 resolved;	/* hash is the tenant's */
	unsigned char		 hash[IDEM_SECRET_HASH_LEN];
	struct idem_inbox_route	*next;
};
void	idem_inbox_routes_free(idem_app *app);
/* Verify an inbox route's message before anything else, and take its key
 * from webhook-id: 0, or -1 with the response set (400, 404). */
int	idem_inbox_receive(idem_req *req);
/* After the body's checks: the stripe scheme's key (the body's id) and
 * the source's tenant.  0, or -1 with the response set. */
int	idem_inbox_claimant(idem_req *req);
/* The record's ttl on route rt: its retention unless [route] ttl says. */
long long idem_inbox_ttl_ms(const struct idem_cfg *cfg,
	    const struct idem_route *rt, long long ttl_ms);
/* The route's signature headers as /openapi.json parameters. */
void	idem_inbox_openapi_params(idem_json *j, const struct idem_cfg *cfg,
	    const struct idem_route *rt);

/* body.c: the route registered with method and pattern, or NULL. */
struct idem_route *idem_route_of(idem_app *app, const char *method,
	    const char *pattern);
/* body.c: refuse a body its route's declaration does not admit (400, the
 * problem set): -1; else 0.  Before the handler and the key's lookup. */
int	idem_req_body_check(idem_req *req);
/* The same for the declared query parameters, before the body's. */
int	idem_req_query_check(idem_req *req);

/*
 * request.c: answer the whole request in (read by fcgi.c), its records
 * handed to answer(conn, out) (conns.c: sent as far as the peer takes
 * them at once, the rest kept; it may take out's bytes, leaving out
 * empty): what answer returns, IDEM_RC_FAIL when the connection is to be
 * closed.
 */
typedef enum idem_rc (*idem_answer_fn)(void *conn, struct idem_buf *out);
enum idem_rc idem_request_handle(idem_app *app, struct idem_fcgi *in,
	    idem_answer_fn answer, void *conn);
/* Free everything a request holds and give its connection back. */
void	idem_req_release(idem_req *req);
void	idem_resp_reset(idem_req *req);
/* Free what idem_req_query() returned (at the end of the request). */
void	idem_req_query_free(idem_req *req);
int	idem_resp_has_header(const idem_req *req, const char *name);

/* phases.c: what a phase's return means (rc: what it returned;
 * has_response: it set a response; last: no phase follows). */
enum idem_phase_step {
	IDEM_STEP_FAIL,		/* -1: a 500 (or the phase's 503) */
	IDEM_STEP_END,		/* the response it set ends the request */
	IDEM_STEP_END_MISUSED,	/* NEXT after setting a response: ends too */
	IDEM_STEP_NEXT,		/* commit, run the next phase */
};
enum idem_phase_step idem_phase_step(int rc, int has_response, int last);

/* --- auth.c -------------------------------------------------------------- */

/* How long a secret the database confirmed is taken as known. */
#define IDEM_AUTH_CACHE_MS	5000

enum idem_auth_result {
	IDEM_AUTH_OK = 0,
	IDEM_AUTH_DENIED = -1,		/* no usable secret, unknown, revoked */
	IDEM_AUTH_UNAVAILABLE = -2,	/* the database did not answer */
};

/* Resolve the Bearer secret to req->tenant in the database. */
enum idem_auth_result idem_auth(idem_req *req);
/*
 * Idempotent routes, before the body is parsed: OK for a secret the
 * database confirmed in the last IDEM_AUTH_CACHE_MS (no round trip), else
 * idem_auth().  Flight 1 still verifies the secret.
 */
enum idem_auth_result idem_auth_precheck(idem_req *req);
/* After the middleware: remember a confirmed secret, forget a refused one. */
void	idem_auth_settle(idem_req *req);
/* SHA-256 of the Bearer secret into req->secret_hash; -1 if unusable. */
int	idem_bearer_hash(idem_req *req);

struct idem_authc_entry {
	unsigned char	 hash[32];
	int64_t		 tenant;	/* 0: empty slot */
	long long	 expires_ms;	/* CLOCK_MONOTONIC */
};

enum idem_authc_state {
	IDEM_AUTHC_ABSENT,	/* empty, or another secret's */
	IDEM_AUTHC_STALE,	/* this secret, expired: ask the database */
	IDEM_AUTHC_FRESH,
};

/* What entry e says about hash at now_ms (pure). */
enum idem_authc_state idem_authc_state(const struct idem_authc_entry *e,
	    const unsigned char hash[32], long long now_ms);
struct idem_authc *idem_authc_new(void);
void	idem_authc_free(struct idem_authc *c);
enum idem_authc_state idem_authc_get(struct idem_authc *c,
	    const unsigned char hash[32], long long now_ms);
/* Known until verified_ms + IDEM_AUTH_CACHE_MS. */
void	idem_authc_put(struct idem_authc *c, const unsigned char hash[32],
	    int64_t tenant, long long verified_ms);
void	idem_authc_forget(struct idem_authc *c, const unsigned char hash[32]);

/* conn.c: the request's connection, taken from the pool on first use
 * (the wait is kept in req for metrics); NULL when none came in time. */
PGconn	*idem_req_conn(idem_req *req);
/* Give it back (a transaction still open is rolled back by the pool). */
void	idem_req_conn_release(idem_req *req);

/* response.c: the status line, headers and body (a CGI response) into out;
 * 0, or -1: no memory. */
int	idem_resp_write(idem_req *req, struct idem_buf *out);

/*
 * store.c: idem_evict() with a time budget (idem_now_us() clock; 0: none)
 * and a stop flag, both checked between batches: 0 when nothing is left, 2
 * when stopped with more left (or max_batches reached), 1 when another
 * process is evicting, -1 on a database error.  *remembered: the traces
 * written for routes with remember (sql/010).  duty: the share of time
 * (percent) batches take while a backlog lasts (backoff.h); 0 flat out.
 * Each batch takes a connection of pool (waiting acquire_ms at most) and
 * gives it back before the pause that follows.
 */
int	idem_evict_bounded(struct idem_pool *pool, long long acquire_ms,
	    long batch, long max_batches, long long until_us, int duty,
	    atomic_int *stop, long *evicted, long *remembered);
/* idem_forget() the same way: remembered traces whose window passed. */
int	idem_forget_bounded(struct idem_pool *pool, long long acquire_ms,
	    long batch, long max_batches, long long until_us, int duty,
	    atomic_int *stop, long *forgotten);

/*
 * store.c: an endpoint's recovery (sql/functions/idem_webhook_recover.sql)
 * as one statement, $1 the endpoint, $2 its tenant (NULL: any), $3 since
 * (Unix seconds); and what its result r says (*requeued set when
 * IDEM_RECOVER_REQUEUED).  idem_webhook_recover() and endpoints.c.
 */
#define IDEM_RECOVER_SQL "SELECT outcome, requeued FROM " \
	"idem_webhook_recover($1::bigint, $2::bigint, to_timestamp($3::bigint))"
enum idem_recover_rc idem_recover_result(const PGresult *r,
	    long long *requeued);

/* The fleet-wide eviction lock (any constant). */
#define IDEM_EVICT_LOCK	"7236491087"

/* runtime.c */
int	idem_runtime_run(idem_app *app, const char *listen_addr);

/*
 * conns.c: the runtime's connections, read without blocking (the epoll
 * set ep, one-shot, data.ptr the connection) and handed to request.c only
 * once a request is whole.  A worker's turn: accept one connection on the
 * listener l and read it (its close tells l); read a connection the set
 * woke it for, or written to: answers are sent without blocking too, what
 * the peer does not take at once kept with its connection, which then
 * waits to be writable (EPOLLOUT) and is not read meanwhile.
 * idem_conns_expire() shuts down the connections late with their request
 * ([server] read_timeout) or answer ([server] write_timeout) and returns
 * the ms until it is due again (the next deadline, at most the shorter
 * timeout).  idem_conns_free() lets answers still waiting go out for at
 * most flush_ms, then closes what is left (the workers gone).
 * idem_conns_serve_one() is declared in test/idem_test_private.h.
 */
struct idem_conns;
struct idem_listener;
struct idem_conns *idem_conns_new(idem_app *app, int ep);
void	idem_conns_accept(struct idem_conns *cs, struct idem_listener *l);
void	idem_conns_ready(struct idem_conns *cs, void *conn);
long long idem_conns_expire(struct idem_conns *cs);
void	idem_conns_free(struct idem_conns *cs, long long flush_ms);
/*
 * listener.c: the FastCGI listening socket fd in the epoll set ep, armed
 * one-shot, with a timer of its own in the set: idem_listener_tag() tells
 * which of the two (or neither) an event's data.ptr is.  A worker woken
 * for the socket calls idem_listener_accept() (accept4's result; the
 * listener armed again, or paused at the descriptor limit: accept.h,
 * counted {reason="fd_limit"}, logged once a second at most); one woken
 * for the timer, idem_listener_timer() (a pause ends).  A closed
 * connection calls idem_listener_freed() (a pause ends).
 * idem_listener_stop(): out of the set for good (draining).
 */
enum idem_listener_tag {
	IDEM_LISTENER_OTHER = 0,	/* not the listener's */
	IDEM_LISTENER_SOCKET,		/* a connection waits */
	IDEM_LISTENER_TIMER		/* a pause's end is due */
};
struct idem_listener *idem_listener_new(idem_app *app, int ep, int fd);
enum idem_listener_tag idem_listener_tag(const struct idem_listener *l,
	    const void *data);
int	idem_listener_accept(struct idem_listener *l, struct sockaddr *sa,
	    socklen_t *sl);
void	idem_listener_freed(struct idem_listener *l);
void	idem_listener_timer(struct idem_listener *l);
void	idem_listener_stop(struct idem_listener *l);
void	idem_listener_free(struct idem_listener *l);
/* listen.c: a listening socket on "host:port", ":port" or a unix socket
 * path ("unix:" optional), the file given mode and group (NULL: the
 * process's) before any peer can connect; -1, logged. */
int	idem_listen_addr(const char *addr, unsigned mode, const char *group);

/*
 * janitor.c: store upkeep on a thread of its own, every evict_interval
 * (sooner while a backlog is left), each run bounded in batches and time
 * and stopping between batches once app->stopping is set.
 */
int	idem_janitor_start(idem_app *app);
/* Wake and join it, waiting until deadline (CLOCK_REALTIME) at most:
 * 0, or -1 when it is still in a batch or a completion. */
int	idem_janitor_stop(idem_app *app, const struct timespec *deadline);

/*
 * completer.c: run up to max due abandoned phased records (in progress
 * past a recovery point, lease lapsed, not set aside) to completion, as a
 * retry would; a failure reschedules the record or sets it aside.  Fills
 * completed and left (taken but not completed: busy or failing again).
 * IDEM_RC_OK, or IDEM_RC_FAIL on error.
 */
int	idem_complete_abandoned(idem_app *app, long max, long *completed,
	    long *left);

/* httpclient.c: abandon h's call as soon as *flag is set (within about a
 * second; it then fails with IDEM_HTTP_FAIL): a stopping process's
 * dispatcher does not wait for a slow endpoint. */
void	idem_http_cancel_on(idem_http *h, atomic_int *flag);

/*
 * httpclient.c: up to max calls in flight at once on one thread (libcurl's
 * multi interface; its connections kept alive between calls).  _add
 * starts h's call (h is the caller's until it is done; tag names it):
 * IDEM_HTTP_OK, or why it was not started (err).  _wait lets the calls
 * run for ms at most.  _done: 1 with a finished call's tag, rc and
 * answer (as idem_http_send()'s), 0 when none has finished.  _abandon:
 * one call still running is dropped (its connection closed) and its tag
 * returned, NULL when none runs.
 */
typedef struct idem_http_batch idem_http_batch;
idem_http_batch *idem_http_batch_new(size_t max);
void	idem_http_batch_free(idem_http_batch *b);
size_t	idem_http_batch_running(const idem_http_batch *b);
enum idem_http_rc idem_http_batch_add(idem_http_batch *b, idem_http *h,
	    void *tag, char *err, size_t errlen);
void	idem_http_batch_wait(idem_http_batch *b, long ms);
int	idem_http_batch_done(idem_http_batch *b, void **tag,
	    enum idem_http_rc *rc, idem_http_resp **resp, char *err,
	    size_t errlen);
void	*idem_http_batch_abandon(idem_http_batch *b);

/*
 * dispatcher.c: the outbox's deliveries on a thread of their own
 * ([webhooks] dispatcher), or one run apart (PROGRAM deliver).
 */
int	idem_dispatcher_start(idem_app *app);
/* Wake and join it, waiting until deadline (CLOCK_REALTIME) at most: 0,
 * or -1 when it is still in a delivery. */
int	idem_dispatcher_stop(idem_app *app, const struct timespec *deadline);
/* idem_deliver_run(): test/idem_test_private.h (libidem_test calls it). */

#endif /* IDEM_PRIVATE_H */
