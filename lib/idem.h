/*
 * idem.h - libidem for a handler's author: the application, its routes,
 * requests and responses (the operator's calls are in idem_admin.h).
 * Each function is described in its man page; idem(3) is the overview.
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

/* A handler sets req's response and returns 0, or -1 (a 500; a 503 when no
 * database connection could be had).  idem(3). */
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
	IDEM_P_WEBHOOK_ENDPOINT_LIMIT,	/* webhook-endpoint-limit (422) */
	IDEM_P_WEBHOOK_SIGNATURE,	/* webhook-signature-invalid ([inbox]) */
	IDEM_P_WEBHOOK_TIMESTAMP,	/* webhook-timestamp-out-of-tolerance */
	IDEM_P__MAX	/* an application's own types follow (idem_app_problem) */
};

/* --- application ------------------------------------------------------- */

idem_app	*idem_app_new(const char *name);
void		 idem_app_free(idem_app *app);

/* Register a route; pattern segments ":name" capture parameters. */
int		 idem_app_route(idem_app *app, const char *method,
		    const char *pattern, unsigned flags,
		    idem_handler_fn fn, void *arg);

/* An application's own problem type (any status 400 to 599, a slug none
 * of the library's) for idem_resp_problem(): its value, past IDEM_P__MAX,
 * or -1.  idem_app_new(3). */
int		 idem_app_problem(idem_app *app, const char *slug, int status,
		    const char *title, const char *doc);

/* Why the first setup call (idem_app_route(), idem_app_problem(), ...)
 * that returned -1 refused, one line for the program to print before it
 * gives up ("" while none did).  idem_app_new(3). */
const char	*idem_app_error(const idem_app *app);

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
/* Typed values: 1 with *out set, 0 when unset (*out left alone), -1 when
 * not of that type or unknown. */
int		 idem_app_config_int(const idem_app *app, const char *section,
		    const char *key, long long *out);
int		 idem_app_config_duration_ms(const idem_app *app,
		    const char *section, const char *key, long long *out);
int		 idem_app_config_size(const idem_app *app, const char *section,
		    const char *key, size_t *out);
int		 idem_app_config_bool(const idem_app *app, const char *section,
		    const char *key, int *out);

/* Parse the command line (-c FILE, -l ADDR, -t N) and load the config:
 * 0, or an exit status. */
int		 idem_app_init(idem_app *app, int argc, char *argv[]);
/* Serve until SIGTERM/SIGINT, drain, and return the exit status. */
int		 idem_app_run(idem_app *app);
/* The exit status when requests were cut off at the drain's deadline
 * (idem_app_run() does not return then). */
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
/* The request's id (16 hex digits): its log lines' "request_id" and its
 * problems' "instance".  idem_req_log(3). */
const char	*idem_req_id(const idem_req *req);
const idem_app	*idem_req_app(const idem_req *req);

/* The request's connection: inside the key's transaction on an idempotent
 * route, autocommit elsewhere; NULL when none in time.  idem_req_db(3). */
PGconn		*idem_req_db(idem_req *req);

/* Queue a statement to run with the commit of an idempotent request (at
 * most 4; at once elsewhere); a failure rolls back.  idem_req_db(3). */
int		 idem_req_defer(idem_req *req, const char *sql, int nparams,
		    const char *const *values);

/* --- logs ---------------------------------------------------------------- */

enum idem_log_level { IDEM_LOG_DEBUG, IDEM_LOG_INFO, IDEM_LOG_WARN,
	IDEM_LOG_ERROR };

/* A line of the JSON log under [server] log_level; fmt is printf-style.
 * idem_req_log(3). */
void		 idem_req_log(const idem_req *req, enum idem_log_level level,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A handler's statement failed: log it, PQclear(r), return -1; a timeout
 * or serialization failure answers 503.  idem_req_log(3). */
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

/* IDEM_ROUTE_PHASED: the handler runs as phases, each committed with the
 * next recovery point under the request's lease.  idem_req_phases(3). */
const char	*idem_req_recovery_point(const idem_req *req);
int		 idem_req_phase_commit(idem_req *req, const char *next_point);
/* End a read-only phase transaction and renew the lease before a slow
 * external call: 0, or -1. */
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
/* A key for the external call of a phase, the same for the same
 * operation whatever became of its record (40 hex digits). */
int		 idem_req_derived_key(const idem_req *req, const char *phase,
		    char *out, size_t outlen);

/* nbytes (1 to 64) random bytes as hex into out, for the handler's own
 * ids: 0, or -1.  idem_random_id(3). */
int		 idem_random_id(char *out, size_t outlen, size_t nbytes);

/* --- JSON responses (json.c) ---------------------------------------------- */

/* A JSON writer in document order; its first failure sticks (every later
 * call returns -1).  idem_json(3). */
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
/* A PostgreSQL value by its column type (NULL as null, numbers, json
 * embedded, the rest strings). */
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

/* One member of a JSON object; min/max (0 0: unbounded) bound a value,
 * length or count.  idem_validate(3). */
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
	/* array: each item (null refused); IDEM_UNIQUE: no two alike */
	const struct idem_member *items;
};

#define IDEM_BODY_OPEN	0x01u	/* undeclared members allowed */

/* An object: its members (ended by a NULL name); undeclared ones are
 * refused unless IDEM_BODY_OPEN, then checked against rest. */
struct idem_body {
	const struct idem_member *members;
	unsigned		  flags;
	const struct idem_member *rest;
	long long		  name_min, name_max;
};

/* Check v against b: 0, or -1 with why = "member: the rule it breaks". */
int		 idem_validate(yajl_val v, const struct idem_body *b,
		    char *why, size_t whylen);
/* Every failure of v against b (the first max into errs, as JSON
 * Pointer and rule): how many there are, 0 when valid. */
#define IDEM_VALIDATION_TEXT_MAX	256
struct idem_validation_error {
	char	pointer[IDEM_VALIDATION_TEXT_MAX];	/* "/metadata/key" */
	char	detail[IDEM_VALIDATION_TEXT_MAX];	/* "must be a string" */
};
size_t		 idem_validate_errors(yajl_val v, const struct idem_body *b,
		    struct idem_validation_error *errs, size_t max);
/* Declare a JSON route's body: an invalid request gets 400
 * validation-error before the handler; also its /openapi.json schema. */
int		 idem_app_route_body(idem_app *app, const char *method,
		    const char *pattern, const struct idem_body *b);
/* A declared query parameter (a list ended by a NULL name), checked
 * before the handler runs.  idem_app_route_query(3). */
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
/* Cursor pagination: 200 {"object": "list", "data", "has_more"} of the
 * first limit rows of r (query limit + 1).  0, or -1. */
int		 idem_resp_list(idem_req *req, const PGresult *r, long limit);
/* A page after cursor (NULL: the first): 422 when cursor_sql ($1 the
 * cursor, $2 the tenant) finds no such what, else idem_resp_list() of
 * page_sql ($1 the tenant, $2 the cursor, $3 limit + 1).  idem_resp_page(3). */
int		 idem_resp_page(idem_req *req, const char *cursor_sql,
		    const char *page_sql, const char *cursor, long limit,
		    const char *what);

/* --- the route in /openapi.json ----------------------------------------- */

/* A route's operationId and summary in /openapi.json: 0, or -1.
 * idem_app_route_summary(3). */
int		 idem_app_route_summary(idem_app *app, const char *method,
		    const char *pattern, const char *operation_id,
		    const char *summary);

#define IDEM_RESPONSE_LIST	0x01u	/* idem_resp_list() of body objects */
#define IDEM_RESPONSE_LOCATION	0x02u	/* with a Location header */
/* A success a route answers: its status (200 to 299) and its JSON object.
 * idem_app_route_response(3). */
struct idem_response {
	int			 status;
	const struct idem_body	*body;	/* NULL: no body */
	unsigned		 flags;	/* IDEM_RESPONSE_* */
	const char		*doc;	/* one line, its description */
};
/* Declare a route's successes (ended by status 0) in /openapi.json: 0,
 * or -1.  idem_app_route_response(3). */
int		 idem_app_route_response(idem_app *app, const char *method,
		    const char *pattern, const struct idem_response *responses);
/* The application's problem types (by slug, ended by NULL) a route may
 * answer, in /openapi.json: 0, or -1.  idem_app_route_problems(3). */
int		 idem_app_route_problems(idem_app *app, const char *method,
		    const char *pattern, const char *const *slugs);

/* A webhook event the application sends, in /openapi.json's "webhooks";
 * before idem_app_run(): 0, or -1.  idem_app_webhook(3). */
int		 idem_app_webhook(idem_app *app, const char *type,
		    const char *summary, const struct idem_body *data);
/* The webhook endpoint routes under path (NULL: "/v1/webhook_endpoints"):
 * create, list, get, delete, enable, recover, for the event types declared
 * with idem_app_webhook() before; once, before idem_app_run(): 0, or -1.
 * idem_app_webhook_routes(3). */
int		 idem_app_webhook_routes(idem_app *app, const char *path);

/* Typed top-level members of the (validated) body. */
yajl_val	 idem_req_member(const idem_req *req, const char *name);
const char	*idem_req_str(const idem_req *req, const char *name);
long long	 idem_req_int(const idem_req *req, const char *name,
		    long long dflt);

/* --- typed statement parameters (params.c) ------------------------------- */

/* Parameters for one statement; failures stick (idem_req_exec() then
 * fails).  idem_args_new(3). */
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
/* Enqueue an event in the request's transaction, delivered as webhooks
 * after it commits; id gets its id.  0, or -1.  idem_req_enqueue(3). */
int		 idem_req_enqueue(idem_req *req, const char *type,
		    const char *data, size_t len, char *id, size_t idlen);
enum idem_endpoint_rc {
	IDEM_ENDPOINT_DELETED,		/* deleted; its pending deliveries die */
	IDEM_ENDPOINT_NOT_FOUND,	/* no live endpoint of this tenant
					 * with that id */
	IDEM_ENDPOINT_ERROR,		/* the database (logged) */
	IDEM_ENDPOINT_CREATED,		/* created: *id and secret set */
	IDEM_ENDPOINT_LIMIT		/* not created: the tenant has [webhooks]
					 * max_endpoints already */
};
/* A webhook endpoint of the request's tenant; sets *id and its secret.
 * idem_req_enqueue(3). */
enum idem_endpoint_rc idem_req_endpoint_create(idem_req *req,
		    const char *url, const char *const *types, size_t ntypes,
		    int64_t *id, char *secret, size_t secretlen);
enum idem_endpoint_rc idem_req_endpoint_delete(idem_req *req, int64_t id);
/* Append a JSON array of the tenant's live endpoints (no secret, with
 * their health): 0, or -1. */
int		 idem_req_endpoint_list(idem_req *req, idem_json *j);
/* The rule of an endpoint's URL, as a member's check: 0, or -1 with why.
 * idem_req_enqueue(3). */
int		 idem_webhook_url_check(yajl_val v, char *why, size_t whylen);

/* --- phases as a table (phases.c) ---------------------------------------- */

/* A phase returns IDEM_PHASE_NEXT, or what a handler returns (0 or
 * IDEM_PHASE_END, -1).  idem_req_phases(3). */
#define IDEM_PHASE_NEXT	2
#define IDEM_PHASE_END	1

struct idem_phase {
	const char	*point;		/* the recovery point it starts from */
	int		(*fn)(idem_req *req, void *arg);
};

/* Run the phases of table (ended by a NULL point) from the stored
 * recovery point; returns what a handler returns. */
int		 idem_req_phases(idem_req *req, const struct idem_phase *table,
		    void *arg);

/* --- outbound HTTP for handlers (httpclient.c) --------------------------- */

/* A client for a handler's external call, on libcurl, within the
 * request's time left.  idem_http(3). */
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
	IDEM_HTTP_REFUSED,	/* the destination is not public (allow_private
				 * off): nothing sent */
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
/* on (the default): any destination; off: non-public addresses are
 * refused (for addresses others choose).  idem_http(3). */
void		 idem_http_allow_private(idem_http *h, int on);
/* Send h within the request's time left (req may be NULL); *resp set on
 * IDEM_HTTP_OK and IDEM_HTTP_STATUS.  idem_http(3). */
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

/* Standard Webhooks signatures (webhook-id, -timestamp, -signature;
 * secrets "whsec_...").  idem_webhook_sign(3). */
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

/* The webhook-signature value of body into out: 0, or -1. */
int		 idem_webhook_sign(const char *secret, const char *msg_id,
		    long long timestamp, const void *body, size_t len,
		    char *out, size_t outlen);
/* For receivers: the three headers' values against the body, and the
 * timestamp within tolerance_s of now. */
enum idem_webhook_verdict idem_webhook_verify(const char *secret,
		    const char *msg_id, const char *timestamp,
		    const char *signatures, const void *body, size_t len,
		    long long now, long long tolerance_s);
/* The enumerator's name without its prefix ("too_old"). */
const char	*idem_webhook_verdict_name(enum idem_webhook_verdict v);
/* A new secret "whsec_" + base64 of 24 random bytes into out
 * (NUL-terminated; IDEM_WEBHOOK_SECRET_MAX is enough): 0, or -1. */
int		 idem_webhook_secret_new(char *out, size_t outlen);

/* --- Stripe signatures (stripe.c) ----------------------------------------- */

/* "t=" and up to 19 digits, ",v1=" and 64 hex digits, NUL. */
#define IDEM_STRIPE_SIGNATURE_MAX	96

/* A Stripe-Signature value ("t=...,v1=...") of body into out: 0, or -1.
 * idem_stripe_sign(3). */
int		 idem_stripe_sign(const char *secret, long long timestamp,
		    const void *body, size_t len, char *out, size_t outlen);
/* For receivers: a Stripe-Signature header against the body (any v1), its
 * t within tolerance_s of now; the verdicts of idem_webhook_verify(). */
enum idem_webhook_verdict idem_stripe_verify(const char *secret,
		    const char *header, const void *body, size_t len,
		    long long now, long long tolerance_s);

/* --- signed sources: receiving webhooks exactly once (inbox.c) ------------ */

/* A route that receives the messages of the source [inbox "source"]
 * (POST, JSON): verified before anything else, keyed by the message id,
 * exactly once; no API key.  retention_ms: how long a message id is
 * remembered (0: 7 days).  idem_app_inbox(3). */
int		 idem_app_inbox(idem_app *app, const char *pattern,
		    const char *source, const struct idem_body *body,
		    long long retention_ms, idem_handler_fn fn, void *arg);
/* The source of the request's route ([inbox "NAME"]), or NULL. */
const char	*idem_req_inbox(const idem_req *req);

/* idem_req_enqueue() for another tenant's endpoints (an inbox's handler
 * acting for the tenant a message concerns).  idem_req_enqueue(3). */
int		 idem_req_enqueue_tenant(idem_req *req, int64_t tenant,
		    const char *type, const char *data, size_t len, char *id,
		    size_t idlen);

#ifdef __cplusplus
}
#endif

#endif /* IDEM_H */
