/*
 * idem.h - libidem for a handler's author: the application, its routes,
 * requests and responses; the operator's calls are in idem_admin.h.
 *
 * libidem is a FastCGI runtime (a pool of worker threads on a listening
 * socket) with an idempotency middleware: a route marked IDEM_ROUTE_IDEMPOTENT
 * runs its handler inside the same PostgreSQL transaction that records the
 * request's Idempotency-Key, so a retried request replays the stored
 * response instead of executing twice.  See idem(3).
 */
#ifndef IDEM_H
#define IDEM_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>
#include <yajl/yajl_tree.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IDEM_VERSION "0.1.0"

typedef struct idem_app idem_app;	/* the program: config, routes, pool */
typedef struct idem_req idem_req;	/* one request and its response */

/*
 * A handler fills the response of req and returns 0, or returns -1 on a
 * failure it could not turn into a response (that becomes a 500, or a 503
 * when no database connection could be had).  On an idempotent route a
 * 2xx/4xx response is committed together with the handler's effect; a 5xx
 * or -1 rolls everything back so that a retry executes afresh.
 */
typedef int (*idem_handler_fn)(idem_req *req, void *arg);

/* Route flags. */
#define IDEM_ROUTE_IDEMPOTENT	0x01u	/* Idempotency-Key required, exactly-once */
#define IDEM_ROUTE_JSON		0x02u	/* body must be application/json */
#define IDEM_ROUTE_PUBLIC	0x04u	/* no Authorization required */
#define IDEM_ROUTE_LOCAL	0x08u	/* only for [metrics] allow addresses */
#define IDEM_ROUTE_PHASED	0x10u	/* idempotent, in phases (implies it) */

/* Problem types (RFC 9457); the type URI ends in the slug. */
enum idem_problem {
	IDEM_P_KEY_MISSING,		/* idempotency-key-missing */
	IDEM_P_KEY_INVALID,		/* idempotency-key-invalid */
	IDEM_P_KEY_IN_FLIGHT,		/* idempotency-key-in-flight */
	IDEM_P_KEY_REUSED,		/* idempotency-key-reused */
	IDEM_P_INVALID_JSON,		/* invalid-json */
	IDEM_P_VALIDATION,		/* validation-error */
	IDEM_P_TOO_LARGE,		/* payload-too-large */
	IDEM_P_MEDIA_TYPE,		/* unsupported-media-type */
	IDEM_P_UNAUTHORIZED,		/* unauthorized */
	IDEM_P_NOT_FOUND,		/* not-found */
	IDEM_P_METHOD,			/* method-not-allowed */
	IDEM_P_UNAVAILABLE,		/* service-unavailable */
	IDEM_P_INTERNAL,		/* internal-error */
	IDEM_P_KEY_ABANDONED,		/* idempotency-key-abandoned (idemctl) */
	IDEM_P_KEY_EXPIRED,		/* idempotency-key-expired (remember) */
	IDEM_P__MAX	/* an application's own types follow (idem_app_problem) */
};

/* --- application ------------------------------------------------------- */

idem_app	*idem_app_new(const char *name);
void		 idem_app_free(idem_app *app);

/* Register a route; pattern segments ":name" capture parameters. */
int		 idem_app_route(idem_app *app, const char *method,
		    const char *pattern, unsigned flags,
		    idem_handler_fn fn, void *arg);

/*
 * Define an application's own problem type (type URI ending in slug, its
 * status, its title, and the sentence of its documentation page, NULL:
 * the title) for idem_resp_problem(); before idem_app_run().  The value
 * to pass, past IDEM_P__MAX, or -1 (bad slug, status, title or doc, a
 * slug already defined, too many, out of memory).  409 and 422 are
 * refused: they belong to the key protocol (retry with the same key; use
 * a new key), and a handler's answer is stored and replayed.
 */
int		 idem_app_problem(idem_app *app, const char *slug, int status,
		    const char *title, const char *doc);

/* Allow an application config key ([section] key) before loading. */
int		 idem_app_config_key(idem_app *app, const char *section,
		    const char *key);
/* Value of an application config key, or NULL when unset. */
const char	*idem_app_config(const idem_app *app, const char *section,
		    const char *key);

/* The type of an application config key, checked when the file is read
 * (a bad value is a "file:line: ..." error, the program does not start). */
enum idem_config_type {
	IDEM_CONFIG_STRING,	/* any text (idem_app_config_key()) */
	IDEM_CONFIG_INT,	/* a whole number, 0 or more */
	IDEM_CONFIG_DURATION,	/* 250ms, 8s, 5m, 2h, 1d (a bare number:
				 * seconds), as idem.conf(5)'s durations */
	IDEM_CONFIG_SIZE,	/* 512, 64K, 1M, 2GiB..., as idem.conf(5)'s */
	IDEM_CONFIG_BOOL,	/* on/off, true/false, yes/no, 1/0 */
};
/* idem_app_config_key() with the type its value must have. */
int		 idem_app_config_key_type(idem_app *app, const char *section,
		    const char *key, enum idem_config_type type);
/*
 * Typed values: 1 with *out set, 0 when the key is unset (*out left as
 * the caller's default), -1 when its value is not of that type (possible
 * only for a key declared with another type) or the key is unknown.
 */
int		 idem_app_config_int(const idem_app *app, const char *section,
		    const char *key, long long *out);
int		 idem_app_config_duration_ms(const idem_app *app,
		    const char *section, const char *key, long long *out);
int		 idem_app_config_size(const idem_app *app, const char *section,
		    const char *key, size_t *out);
int		 idem_app_config_bool(const idem_app *app, const char *section,
		    const char *key, int *out);

/*
 * Parse the command line (-c FILE, -l ADDR, -t N) and load the config
 * (application keys must be allowed first).  0, or an exit status.
 */
int		 idem_app_init(idem_app *app, int argc, char *argv[]);
/* Serve until SIGTERM/SIGINT, drain, and return the exit status. */
int		 idem_app_run(idem_app *app);
/* The exit status when requests were still running at the drain's
 * deadline (they were cut off: their keys are left to the lease); the
 * process then exits at once, idem_app_run() does not return. */
#define IDEM_EXIT_UNDRAINED	3
/* idem_app_init() then idem_app_run(). */
int		 idem_app_main(idem_app *app, int argc, char *argv[]);

/* --- request ----------------------------------------------------------- */

const char	*idem_req_method(const idem_req *req);
const char	*idem_req_path(const idem_req *req);
const char	*idem_req_param(const idem_req *req, const char *name);
const char	*idem_req_query(const idem_req *req, const char *name);
/* Header by its HTTP name ("Content-Type", "Idempotency-Key"). */
const char	*idem_req_header(const idem_req *req, const char *name);
const char	*idem_req_body(const idem_req *req, size_t *len);
/* Parsed body on IDEM_ROUTE_JSON routes (valid, no duplicate names). */
yajl_val	 idem_req_json(const idem_req *req);
/* The authenticated tenant (api_keys.id); 0 on public routes. */
int64_t		 idem_req_tenant(const idem_req *req);
/* The request's idempotency key, or NULL on other routes. */
const char	*idem_req_idempotency_key(const idem_req *req);
const idem_app	*idem_req_app(const idem_req *req);

/*
 * The database connection of this request.  On an idempotent route it is
 * inside the transaction that holds the key record; elsewhere a pooled
 * connection in autocommit.  NULL when none could be had in time.
 */
PGconn		*idem_req_db(idem_req *req);

/*
 * Queue a statement (text parameters, copied) to run in the same round trip
 * as the commit of an idempotent request, after the handler returns.  It
 * must not be able to fail for a reason the handler should answer: a
 * failure rolls everything back (500).  Outside an idempotent route it
 * runs at once.  At most 4 per request.
 */
int		 idem_req_defer(idem_req *req, const char *sql, int nparams,
		    const char *const *values);

/* --- logs ---------------------------------------------------------------- */

enum idem_log_level { IDEM_LOG_DEBUG, IDEM_LOG_INFO, IDEM_LOG_WARN,
	IDEM_LOG_ERROR };

/*
 * A line of the JSON log on stderr, {"time","level","msg","request_id"},
 * under [server] log_level like the framework's own: fmt is printf-style,
 * the message cut at 1 KiB and stripped of trailing newlines.
 */
void		 idem_req_log(const idem_req *req, enum idem_log_level level,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * A statement of the handler's own (PQexec on idem_req_db()) failed:
 * log it with the request id, remember its SQLSTATE, PQclear(r), and
 * return -1 for the handler to return.  A statement timeout, lock
 * timeout, serialization failure or deadlock then answers 503 with
 * Retry-After (nothing stored), like a failure of idem_req_exec().
 */
int		 idem_req_db_error(idem_req *req, PGresult *r);

/* --- response ---------------------------------------------------------- */

/* Set status, Content-Type and body (copied). */
int		 idem_resp_body(idem_req *req, int status, const char *ctype,
		    const char *body, size_t len);
int		 idem_resp_json(idem_req *req, int status, const char *json,
		    size_t len);
/* Add a header; Location is stored and replayed with the response. */
int		 idem_resp_header(idem_req *req, const char *name,
		    const char *value);
/* An application/problem+json response; detail is printf-style. */
int		 idem_resp_problem(idem_req *req, enum idem_problem p,
		    const char *fmt, ...)
		    __attribute__((format(printf, 3, 4)));

/* --- phased handlers (external side effects) ---------------------------- */

/*
 * An IDEM_ROUTE_PHASED handler cannot share one transaction with an effect
 * outside the database (a card acquirer).  The key record is committed
 * first (state in_progress, recovery point "started") under a lease that
 * names this request; the handler then runs as phases, each in its own
 * transaction, ended by idem_req_phase_commit() which also records the
 * next recovery point and renews the lease.  Every write of the phase is
 * fenced by the lease: if the record is no longer this request's, the
 * phase's transaction rolls back, the call fails and the client gets 503.
 * A duplicate gets 409 while the lease is live; after the owner died (the
 * lease lapsed, [route] lock_timeout after its last renewal) a retry, or
 * the completer, resumes at the stored point, so the handler must switch
 * on idem_req_recovery_point().  The handler and each phase run under the
 * route's deadline and phase_deadline: past either, the next phase
 * boundary fails (503).  The response set when the handler returns is
 * stored and the key completed.
 */
const char	*idem_req_recovery_point(const idem_req *req);
int		 idem_req_phase_commit(idem_req *req, const char *next_point);
/*
 * End the current phase's (read-only) transaction without recording a
 * point, so that a slow external call holds no transaction open, and renew
 * the lease so that the call has a whole lock_timeout; the next
 * idem_req_db() opens a new transaction.  -1 if statements are deferred,
 * the deadline has passed or the record is no longer this request's.
 */
int		 idem_req_phase_pause(idem_req *req);
/* Renew the lease outside a transaction (a long wait between phases):
 * 0, or -1 as idem_req_phase_pause(). */
int		 idem_req_lease_renew(idem_req *req);
/* Milliseconds left before the handler's or the phase's deadline, the
 * nearer (0 when passed): the bound for an external call's timeout. */
long long	 idem_req_time_left_ms(const idem_req *req);
/* The record's id: lets a phase find the rows an earlier phase wrote
 * (0 on atomic routes: their record is written at the commit). */
int64_t		 idem_req_record_id(const idem_req *req);
/*
 * A key derived from ours for the external call of a phase: 40 hex digits
 * from the tenant, the Idempotency-Key, the request's fingerprint and
 * phase, so it is the same for the same operation whatever happens to its
 * record, and the other side can always deduplicate.
 */
int		 idem_req_derived_key(const idem_req *req, const char *phase,
		    char *out, size_t outlen);

/*
 * nbytes (1 to 64) random bytes, as 2 * nbytes lowercase hex digits and a
 * NUL, into out: an identifier for the handler's own rows.  Drawn from the
 * library's per-thread buffer of OpenSSL random bytes (each byte handed out
 * once), so a call costs no system call.  0, or -1 (nbytes out of range,
 * outlen too small, no randomness).
 */
int		 idem_random_id(char *out, size_t outlen, size_t nbytes);

/* --- JSON responses (json.c) ---------------------------------------------- */

/*
 * A JSON writer over yajl_gen: values are appended in document order, a
 * member's value right after its idem_json_key().  The first failure
 * (out of memory, invalid UTF-8, a value where a key belongs) sticks:
 * every later call returns -1 and idem_json_send() sends nothing.
 */
typedef struct idem_json idem_json;

idem_json	*idem_json_new(void);
void		 idem_json_free(idem_json *j);
int		 idem_json_object(idem_json *j);	/* { */
int		 idem_json_object_end(idem_json *j);	/* } */
int		 idem_json_array(idem_json *j);		/* [ */
int		 idem_json_array_end(idem_json *j);	/* ] */
int		 idem_json_key(idem_json *j, const char *name);
/* A string (NULL: null). */
int		 idem_json_str(idem_json *j, const char *s);
int		 idem_json_int(idem_json *j, long long v);
int		 idem_json_bool(idem_json *j, int v);
int		 idem_json_null(idem_json *j);
/* A parsed value (a request body's member), copied compactly. */
int		 idem_json_value(idem_json *j, yajl_val v);
/*
 * A PostgreSQL value by its column type: NULL as null, bool, integers and
 * finite numerics as numbers, json and jsonb embedded, the rest strings.
 */
int		 idem_json_pg(idem_json *j, const PGresult *r, int row,
		    int col);
/* Row row of r as an object of its columns (names as keys). */
int		 idem_json_pg_row(idem_json *j, const PGresult *r, int row);
/* Member shortcuts: key, then the value. */
int		 idem_json_kstr(idem_json *j, const char *key, const char *s);
int		 idem_json_kint(idem_json *j, const char *key, long long v);
/* The finished document (NULL if failed or incomplete). */
const char	*idem_json_buf(const idem_json *j, size_t *len);
/* Make the finished document the response body, and free j (always). */
int		 idem_json_send(idem_json *j, idem_req *req, int status);

/* --- declared body validation (validate.c) ------------------------------- */

enum idem_type {
	IDEM_T_INTEGER = 1,
	IDEM_T_STRING,
	IDEM_T_BOOLEAN,
	IDEM_T_OBJECT,
	IDEM_T_ARRAY,		/* each item as the member's items says */
};

#define IDEM_REQUIRED	0x01u	/* absent or null is refused */
#define IDEM_UNIQUE	0x02u	/* an array: no two items alike */
/* 2^53 - 1: an integer member is never beyond +-IDEM_INT_EXACT_MAX, the
 * integers a double (RFC 8785's numbers) holds exactly. */
#define IDEM_INT_EXACT_MAX	9007199254740991LL

struct idem_body;

/*
 * One member of a JSON object.  min/max (both 0: unbounded) bound an
 * integer's value, a string's length in characters, an object's number of
 * members, an array's number of items.  An integer is an integer literal as written (no fraction, no
 * exponent) within +-IDEM_INT_EXACT_MAX.  A null member counts as absent.
 */
struct idem_member {
	const char		*name;
	enum idem_type		 type;
	unsigned		 flags;
	long long		 min, max;
	const char *const	*oneof;	/* string: allowed values, NULL-ended */
	const char		*pattern;	/* string: POSIX ERE */
	/* Last rule: 0, or -1 with the broken rule written to why. */
	int			(*check)(yajl_val v, char *why, size_t whylen);
	const struct idem_body	*object;	/* object: its members */
	const char		*doc;	/* one line, for the OpenAPI document */
	/* array: what each item is (its name unused; null items are
	 * refused); with IDEM_UNIQUE in flags, no two items may be equal
	 * strings or integers */
	const struct idem_member *items;
};

#define IDEM_BODY_OPEN	0x01u	/* undeclared members allowed */

/*
 * An object: its members (ended by a NULL name).  Undeclared members are
 * refused unless IDEM_BODY_OPEN; then each one's value must satisfy rest
 * (when set), and its name be name_min to name_max characters long.
 */
struct idem_body {
	const struct idem_member *members;
	unsigned		  flags;
	const struct idem_member *rest;
	long long		  name_min, name_max;
};

/*
 * Check v against b: 0, or -1 with why = "member: the rule it breaks"
 * (nested members as "metadata.key").
 */
int		 idem_validate(yajl_val v, const struct idem_body *b,
		    char *why, size_t whylen);
/*
 * Every failure of v against b, one per member: the first max of them
 * into errs, each a JSON Pointer (RFC 6901; "" for the body itself) and
 * the rule it breaks ("must be an integer").  Returns how many failures
 * there are (0: valid), which may be more than max.
 */
#define IDEM_VALIDATION_TEXT_MAX	256
struct idem_validation_error {
	char	pointer[IDEM_VALIDATION_TEXT_MAX];	/* "/metadata/key" */
	char	detail[IDEM_VALIDATION_TEXT_MAX];	/* "must be a string" */
};
size_t		 idem_validate_errors(yajl_val v, const struct idem_body *b,
		    struct idem_validation_error *errs, size_t max);
/*
 * Declare the body of a JSON route (registered before): each request is
 * validated before its handler runs, and an invalid one gets 400
 * validation-error naming the member and the rule (on idempotent routes
 * nothing is stored: the corrected retry with the same key executes).
 * The body is also the route's schema in /openapi.json.
 */
int		 idem_app_route_body(idem_app *app, const char *method,
		    const char *pattern, const struct idem_body *b);
/*
 * Declared query parameters of a route: integer (min..max, 0 0: any),
 * string (min..max characters, or one of oneof) or boolean (true, false).
 * Each request's query string is checked before the handler runs: an
 * undeclared, repeated, malformed or missing required parameter gets
 * 400 validation-error listing every failure as errors[{"parameter",
 * "detail"}].  The list (ended by a NULL name) is also the route's
 * query parameters in /openapi.json.  See idem_app_route_query(3).
 */
struct idem_param {
	const char		*name;
	enum idem_type		 type;	/* IDEM_T_INTEGER, _STRING, _BOOLEAN */
	unsigned		 flags;	/* IDEM_REQUIRED */
	long long		 min, max;
	const char *const	*oneof;	/* string: allowed values, NULL-ended */
	const char		*def;	/* the value when absent, as text */
	const char		*doc;	/* one line, for the OpenAPI document */
};
int		 idem_app_route_query(idem_app *app, const char *method,
		    const char *pattern, const struct idem_param *params);
/* A declared parameter's value (or its default; NULL: neither), and
 * typed: dflt when absent without a default. */
const char	*idem_req_qparam(const idem_req *req, const char *name);
long long	 idem_req_qparam_int(const idem_req *req, const char *name,
		    long long dflt);
int		 idem_req_qparam_bool(const idem_req *req, const char *name,
		    int dflt);
/*
 * Cursor pagination: send 200 {"object": "list", "data": [the first
 * limit rows of r, as objects], "has_more": whether r has more}; query
 * limit + 1 rows to know.  r is the caller's to PQclear().  0, or -1.
 */
int		 idem_resp_list(idem_req *req, const PGresult *r, long limit);

/* --- the route in /openapi.json ----------------------------------------- */

/*
 * A route's operationId (letters, digits, '_' and '-', 1 to 64) and
 * summary (one line, at most 200 characters) in /openapi.json.  Without
 * them the document derives both from the method and the pattern
 * ("get_v1_payments_id", "GET /v1/payments/{id}"; made unique with the
 * route's index when two derive alike).  0, or -1 (no such
 * route, declared twice, a bad operationId or summary, an operationId
 * another route has).  See idem_app_route_summary(3).
 */
int		 idem_app_route_summary(idem_app *app, const char *method,
		    const char *pattern, const char *operation_id,
		    const char *summary);

#define IDEM_RESPONSE_LIST	0x01u	/* idem_resp_list() of body objects */
#define IDEM_RESPONSE_LOCATION	0x02u	/* with a Location header */
/*
 * A success the route answers: its status (200 to 299) and its JSON
 * object, declared as a request body is (struct idem_body).  In a
 * response every declared member is present; one without IDEM_REQUIRED
 * may be null.  With IDEM_RESPONSE_LIST the answer is idem_resp_list()'s
 * {"object": "list", "data": [objects], "has_more"}.
 */
struct idem_response {
	int			 status;
	const struct idem_body	*body;	/* NULL: no body */
	unsigned		 flags;	/* IDEM_RESPONSE_* */
	const char		*doc;	/* one line, its description */
};
/*
 * Declare the successes of a route (a list ended by status 0): each is
 * a 2XX response of /openapi.json with its schema, in place of the
 * undescribed "2XX".  0, or -1 (no such route, declared twice, a status
 * outside 200..299 or repeated, an empty list).  Nothing is checked at
 * run time: the handler answers.  See idem_app_route_response(3).
 */
int		 idem_app_route_response(idem_app *app, const char *method,
		    const char *pattern, const struct idem_response *responses);
/*
 * The application's problem types (idem_app_problem(), by slug; a list
 * ended by NULL) that the route's handler may answer: each is listed
 * under its status in /openapi.json, besides the library's own that the
 * route can get.  0, or -1 (no such route, declared twice, a slug that is
 * not an application problem type registered before).  See
 * idem_app_route_problems(3).
 */
int		 idem_app_route_problems(idem_app *app, const char *method,
		    const char *pattern, const char *const *slugs);

/*
 * A webhook event the application sends (its type, "payment.succeeded":
 * 1 to 64 of a-z, 0-9, '.', '_', '-'), one line of summary (at most 200
 * characters) and the object its "data" holds: listed under the top-level
 * "webhooks" of /openapi.json as the POST a receiver gets, with the
 * Standard Webhooks headers and the body {"id", "type", "created",
 * "data"}.  Before idem_app_run(); the strings and data are not copied.
 * 0, or -1 (a bad type or summary, a NULL data, a type declared twice,
 * more than 32).  Sending is idem_req_enqueue()'s.  See idem_app_webhook(3).
 */
int		 idem_app_webhook(idem_app *app, const char *type,
		    const char *summary, const struct idem_body *data);

/* Typed top-level members of the (validated) body. */
yajl_val	 idem_req_member(const idem_req *req, const char *name);
const char	*idem_req_str(const idem_req *req, const char *name);
long long	 idem_req_int(const idem_req *req, const char *name,
		    long long dflt);

/* --- typed statement parameters (params.c) ------------------------------- */

/*
 * Parameters for one statement, built without string buffers.  Failures
 * stick (idem_req_exec() then fails); a NULL args is a failed one.
 */
typedef struct idem_args idem_args;

idem_args	*idem_args_new(void);
void		 idem_args_free(idem_args *a);
/* A string (copied; NULL: SQL NULL). */
int		 idem_args_str(idem_args *a, const char *s);
int		 idem_args_int(idem_args *a, long long v);
/* The request's tenant (api_keys.id). */
int		 idem_args_tenant(idem_args *a, const idem_req *req);
/* A body member: text of a string, digits of an integer, true/false,
 * compact JSON of an object or array; absent or null: SQL NULL. */
int		 idem_args_member(idem_args *a, const idem_req *req,
		    const char *name);
/* Run sql on idem_req_db(req); frees a.  The result (PQclear it), or NULL
 * on any failure (no connection, a failed statement). */
PGresult	*idem_req_exec(idem_req *req, const char *sql, idem_args *a);
/* idem_req_defer() with a; frees a. */
int		 idem_req_defer_args(idem_req *req, const char *sql,
		    idem_args *a);

/* --- the outbox: events after commit, as webhooks (outbox.c) -------------- */

/* "evt_" and 40 hex digits, NUL-terminated, fit. */
#define IDEM_EVENT_ID_MAX	48
/*
 * Enqueue an event in the request's current transaction (the key's on an
 * atomic route, the current phase's on a phased route): it exists iff that
 * transaction commits, and a replay (which runs no handler) enqueues
 * nothing.  The library builds the body {"id": <event id>, "type": type,
 * "created": <unix seconds>, "data": data} (data: a JSON text of len
 * bytes, validated) and makes one delivery to each live webhook endpoint
 * of the request's tenant subscribed to type (1 to 128 letters, digits,
 * '.', '_', '-'); the dispatcher sends them after the commit.  The event
 * id is "evt_" + idem_req_derived_key(req, "event:" type ":" n) where n
 * counts the events of this type in this request (in this phase, whose
 * recovery point is appended, on a phased route): the same operation
 * gives the same id, also re-executed after a takeover.  id (may be NULL)
 * receives it (IDEM_EVENT_ID_MAX bytes).  Idempotent routes only.  The
 * statement is deferred (idem_req_defer()): it goes out with the commit,
 * in its round trip, and counts as one of the request's deferred
 * statements.  0, or -1 (logged; the handler returns -1 and the
 * transaction rolls back).
 */
int		 idem_req_enqueue(idem_req *req, const char *type,
		    const char *data, size_t len, char *id, size_t idlen);
/*
 * A webhook endpoint of the request's tenant, in the request's
 * transaction: url (see idem_webhook_url_check()), the event types it
 * receives (1 to 64).  *id and secret ("whsec_..." of at most
 * IDEM_WEBHOOK_SECRET_MAX bytes, for the receiver's signature check) are
 * set.  0, or -1 (a bad URL or type, the database: logged).
 */
int		 idem_req_endpoint_create(idem_req *req, const char *url,
		    const char *const *types, size_t ntypes, int64_t *id,
		    char *secret, size_t secretlen);
enum idem_endpoint_rc {
	IDEM_ENDPOINT_DELETED,		/* deleted; its pending deliveries die */
	IDEM_ENDPOINT_NOT_FOUND,	/* no live endpoint of this tenant
					 * with that id */
	IDEM_ENDPOINT_ERROR		/* the database (logged) */
};
enum idem_endpoint_rc idem_req_endpoint_delete(idem_req *req, int64_t id);
/* Append a JSON array of the tenant's live endpoints, newest first:
 * [{"id", "url", "events": [types], "created": <unix seconds>}] (no
 * secret).  0, or -1. */
int		 idem_req_endpoint_list(idem_req *req, idem_json *j);
/*
 * The rule of an endpoint's URL, as a body member's check (struct
 * idem_member): a string of at most 2048 bytes, http:// or https://, a
 * host (an optional port 1 to 65535), no user:password@, no #fragment, no
 * space or control byte.  0, or -1 with why.  Private and loopback
 * destinations are refused at delivery ([webhooks] allow_private).
 */
int		 idem_webhook_url_check(yajl_val v, char *why, size_t whylen);

/* --- phases as a table (phases.c) ---------------------------------------- */

/*
 * A phase returns IDEM_PHASE_NEXT, or what a handler returns: 0 (or
 * IDEM_PHASE_END) once it set the response, which ends the request, or
 * -1.  NEXT is not 0, so `return idem_resp_problem(...)` in a phase ends
 * the request with the problem; and a phase that set a response ends it
 * even when it returns NEXT (logged as a warning).
 */
#define IDEM_PHASE_NEXT	2
#define IDEM_PHASE_END	1

struct idem_phase {
	const char	*point;		/* the recovery point it starts from */
	int		(*fn)(idem_req *req, void *arg);
};

/*
 * Run the phases of table (ended by a NULL point) from the stored recovery
 * point: after each phase that returns IDEM_PHASE_NEXT, commit with the
 * next entry's point (idem_req_phase_commit()).  The last phase sets the
 * response.  On an atomic route every phase runs in the one transaction.
 * Returns what a handler returns.
 */
int		 idem_req_phases(idem_req *req, const struct idem_phase *table,
		    void *arg);

/* --- outbound HTTP for handlers (httpclient.c) --------------------------- */

/*
 * A client for the external call of a handler or phase, on libcurl: one
 * request built, sent within the request's time left, its answer read
 * into memory (bounded).  Each worker thread keeps its own connections
 * open between calls (keep-alive), so a second call to the same host
 * reuses the first one's connection.  TLS peers are verified (the
 * system's CAs, or idem_http_ca_file()); redirects are not followed.
 */
typedef struct idem_http	idem_http;	/* a request being built */
typedef struct idem_http_resp	idem_http_resp;	/* its answer */

/* What became of a call: a phase retries the transient ones or refuses. */
enum idem_http_rc {
	IDEM_HTTP_OK = 0,	/* an answer with a 2xx status */
	IDEM_HTTP_STATUS,	/* an answer with another status */
	IDEM_HTTP_CONNECT,	/* no connection (refused, unreachable, no
				 * such host): the request was not sent */
	IDEM_HTTP_TIMEOUT,	/* no answer within the time allowed (it may
				 * have been acted upon) */
	IDEM_HTTP_TLS,		/* TLS handshake or peer verification failed:
				 * the request was not sent */
	IDEM_HTTP_TOO_LARGE,	/* the answer was larger than allowed */
	IDEM_HTTP_BROKEN,	/* the connection broke or the answer was not
				 * HTTP (it may have been acted upon) */
	IDEM_HTTP_FAIL,		/* the call was wrong (URL, arguments) or out
				 * of memory: nothing sent */
	IDEM_HTTP_REFUSED,	/* the destination's address is not a public
				 * one (idem_http_allow_private() off):
				 * nothing connected, nothing sent */
};

/* A request for method (GET, POST...) and an http:// or https:// URL
 * (copied); NULL when out of memory. */
idem_http	*idem_http_new(const char *method, const char *url);
void		 idem_http_free(idem_http *h);
/* Add a header line (name and value copied); 0, or -1 when either has a
 * CR, LF or NUL, or the name is empty or has a colon. */
int		 idem_http_header(idem_http *h, const char *name,
		    const char *value);
/* The key derived from the request's Idempotency-Key for phase
 * (idem_req_derived_key()) as the header name: 0, or -1. */
int		 idem_http_derived_key(idem_http *h, const idem_req *req,
		    const char *name, const char *phase);
/* The request body (copied) with its Content-Type: 0, or -1. */
int		 idem_http_body(idem_http *h, const char *content_type,
		    const void *body, size_t len);
/* The document of a finished JSON writer as an application/json body
 * (copied; j stays the caller's): 0, or -1 when j failed or is open. */
int		 idem_http_json(idem_http *h, const idem_json *j);
/* Upper bound of the whole call in milliseconds (default 10000); a
 * request's time left lowers it further (idem_http_send()). */
void		 idem_http_timeout_ms(idem_http *h, long long ms);
/* Bound of the answer's body in bytes (default 1 MiB); its headers are
 * bounded to 64 KiB apart from that. */
void		 idem_http_max_body(idem_http *h, size_t bytes);
/* Verify TLS peers against the CA certificates of this PEM file (copied)
 * instead of the system's. */
int		 idem_http_ca_file(idem_http *h, const char *path);
/*
 * on (the default): any destination.  Off: every address the URL's host
 * resolves to is checked when a connection is opened, and loopback,
 * private, link-local, shared (CGNAT), unspecified, multicast, reserved
 * and documentation addresses are refused (IPv4 and IPv6, IPv4-mapped and
 * NAT64 ones by their IPv4 address): nothing is connected to them, and a
 * kept-alive connection to one is not reused; no proxy is used then.  For
 * calls to addresses that other people choose (webhooks).
 */
void		 idem_http_allow_private(idem_http *h, int on);
/*
 * Send h and read the answer.  With req (not NULL) on an idempotent
 * route the call ends within idem_req_time_left_ms(req): with no time
 * left it is not made (IDEM_HTTP_TIMEOUT); with req NULL (a call outside
 * any request) within h's own timeout.  A redirect is an answer like any
 * other (IDEM_HTTP_STATUS): it is never followed.  *resp is set on IDEM_HTTP_OK
 * and IDEM_HTTP_STATUS (free it with idem_http_resp_free()), else NULL.
 * err (may be NULL) gets a line saying what failed.  h can be sent again.
 */
enum idem_http_rc idem_http_send(idem_http *h, idem_req *req,
		    idem_http_resp **resp, char *err, size_t errlen);
/* The enumerator's name without its prefix ("timeout"). */
const char	*idem_http_rc_name(enum idem_http_rc rc);

int		 idem_http_resp_status(const idem_http_resp *r);
/* The value of the first header called name (any case), or NULL. */
const char	*idem_http_resp_header(const idem_http_resp *r,
		    const char *name);
/* The body, NUL-terminated (it may also hold NULs); len may be NULL. */
const char	*idem_http_resp_body(const idem_http_resp *r, size_t *len);
/* The body parsed as JSON (yajl, parsed on the first call, freed with r),
 * or NULL when it is not JSON. */
yajl_val	 idem_http_resp_json(idem_http_resp *r);
void		 idem_http_resp_free(idem_http_resp *r);

/* --- Standard Webhooks signatures (webhook.c) ---------------------------- */

/*
 * The signature scheme of the Standard Webhooks specification: a message's
 * headers webhook-id, webhook-timestamp (unix seconds) and
 * webhook-signature, a space-separated list of "v1,<base64 HMAC-SHA256 of
 * id.timestamp.body>"; the secret is "whsec_" and the base64 of the key.
 */
#define IDEM_WEBHOOK_SECRET_MAX		64	/* a new secret and its NUL */
#define IDEM_WEBHOOK_SIGNATURE_MAX	128	/* one "v1,..." and its NUL */

/* What a receiver's check found, in the order it checks. */
enum idem_webhook_verdict {
	IDEM_WEBHOOK_OK = 0,		/* a v1 signature matches, in time */
	IDEM_WEBHOOK_BAD_SECRET,	/* the secret is not "[whsec_]base64" */
	IDEM_WEBHOOK_BAD_HEADER,	/* a header missing, or the timestamp
					 * not decimal seconds */
	IDEM_WEBHOOK_TOO_OLD,		/* timestamp older than the tolerance */
	IDEM_WEBHOOK_TOO_NEW,		/* timestamp further ahead than it */
	IDEM_WEBHOOK_MISMATCH,		/* no v1 signature matches */
};

/* The webhook-signature value of body for msg_id at timestamp into out
 * (NUL-terminated; IDEM_WEBHOOK_SIGNATURE_MAX is enough): 0, or -1 (bad
 * secret, outlen too small). */
int		 idem_webhook_sign(const char *secret, const char *msg_id,
		    long long timestamp, const void *body, size_t len,
		    char *out, size_t outlen);
/* For receivers: the three headers' values (NULL when absent) against the
 * body as received, any one of the signatures matching (compared in
 * constant time), and the timestamp within tolerance_s of now (unix
 * seconds; the specification suggests 300). */
enum idem_webhook_verdict idem_webhook_verify(const char *secret,
		    const char *msg_id, const char *timestamp,
		    const char *signatures, const void *body, size_t len,
		    long long now, long long tolerance_s);
/* The enumerator's name without its prefix ("too_old"). */
const char	*idem_webhook_verdict_name(enum idem_webhook_verdict v);
/* A new secret "whsec_" + base64 of 24 random bytes into out
 * (NUL-terminated; IDEM_WEBHOOK_SECRET_MAX is enough): 0, or -1. */
int		 idem_webhook_secret_new(char *out, size_t outlen);

#ifdef __cplusplus
}
#endif

#endif /* IDEM_H */
