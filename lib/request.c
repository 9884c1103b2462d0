/*
 * request.c - the life of one request: read and validate what the web
 * server sent (lengths, route, credentials, media type, JSON, key), run
 * the handler directly or through the idempotency middleware, write the
 * response.  Everything untrusted is checked here, at the boundary.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "private.h"

#define PATH_MAX_LEN	2048
#define QUERY_MAX_LEN	4096
#define CTYPE_MAX_LEN	256
#define HEADER_MAX_LEN	8192

static long long
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* --- accessors ------------------------------------------------------------ */

const char *
idem_req_method(const idem_req *req)
{
	return req->method;
}

const char *
idem_req_path(const idem_req *req)
{
	return req->path;
}

const char *
idem_req_param(const idem_req *req, const char *name)
{
	size_t	i;

	for (i = 0; i < req->params.n; i++)
		if (strcmp(req->params.name[i], name) == 0)
			return req->params.value[i];
	return NULL;
}

/* One decoded query value; name and value follow in data. */
struct idem_qval {
	struct idem_qval	*next;
	const char		*val;	/* into data */
	char			 data[];
};

/*
 * Decode one query value.  Results are kept with the request (asking for
 * a name twice returns the same string), so each stays valid until the
 * request ends, however many others the handler asks for.
 */
const char *
idem_req_query(const idem_req *req, const char *name)
{
	char			 val[QUERY_MAX_LEN + 1];
	const char		*q, *end, *eq;
	size_t			 nlen = strlen(name), o;
	struct idem_qval	*qv;
	idem_req		*mut;

	if (req->query == NULL)
		return NULL;
	for (qv = req->qvals; qv != NULL; qv = qv->next)
		if (strcmp(qv->data, name) == 0)
			return qv->val;
	for (q = req->query; *q != '\0'; q = *end ? end + 1 : end) {
		end = strchr(q, '&');
		if (end == NULL)
			end = q + strlen(q);
		eq = memchr(q, '=', (size_t)(end - q));
		if (eq == NULL || (size_t)(eq - q) != nlen ||
		    strncmp(q, name, nlen) != 0)
			continue;
		for (o = 0, q = eq + 1; q < end && o < QUERY_MAX_LEN; q++) {
			if (*q == '+')
				val[o++] = ' ';
			else if (*q == '%' && end - q >= 3 &&
			    isxdigit((unsigned char)q[1]) &&
			    isxdigit((unsigned char)q[2])) {
				char h[3] = { q[1], q[2], 0 };
				val[o++] = (char)strtol(h, NULL, 16);
				q += 2;
			} else
				val[o++] = *q;
		}
		val[o] = '\0';
		/* A decoded NUL would truncate silently: refuse the value. */
		if (strlen(val) != o)
			o = 0;
		if ((qv = malloc(sizeof(*qv) + nlen + 1 + o + 1)) == NULL)
			return "";	/* refused, rather than "absent" */
		memcpy(qv->data, name, nlen + 1);
		memcpy(qv->data + nlen + 1, val, o);
		qv->data[nlen + 1 + o] = '\0';
		qv->val = qv->data + nlen + 1;
		/* The cache is not part of what a const request means. */
		mut = (idem_req *)(uintptr_t)req;
		qv->next = mut->qvals;
		mut->qvals = qv;
		return qv->val;
	}
	return NULL;
}

void
idem_req_query_free(idem_req *req)
{
	struct idem_qval	*qv;

	while ((qv = req->qvals) != NULL) {
		req->qvals = qv->next;
		free(qv);
	}
}

const char *
idem_req_header(const idem_req *req, const char *name)
{
	char		 env[128];
	size_t		 i, o = 0;
	const char	*v;

	/* A request the completer runs again has no headers. */
	if (req->fcgi == NULL)
		return NULL;
	if (strcasecmp(name, "Content-Type") == 0)
		return FCGX_GetParam("CONTENT_TYPE", req->fcgi->envp);
	if (strcasecmp(name, "Content-Length") == 0)
		return FCGX_GetParam("CONTENT_LENGTH", req->fcgi->envp);
	if (strlen(name) + 6 > sizeof(env))
		return NULL;
	memcpy(env, "HTTP_", 5);
	o = 5;
	for (i = 0; name[i] != '\0'; i++)
		env[o++] = name[i] == '-' ? '_' :
		    (char)toupper((unsigned char)name[i]);
	env[o] = '\0';
	v = FCGX_GetParam(env, req->fcgi->envp);
	if (v != NULL && strlen(v) > HEADER_MAX_LEN)
		return NULL;
	return v;
}

const char *
idem_req_body(const idem_req *req, size_t *len)
{
	if (len != NULL)
		*len = req->bodylen;
	return req->body != NULL ? req->body : "";
}

yajl_val
idem_req_json(const idem_req *req)
{
	return req->json;
}

int64_t
idem_req_tenant(const idem_req *req)
{
	return req->tenant;
}

const char *
idem_req_idempotency_key(const idem_req *req)
{
	return req->has_key ? req->key : NULL;
}

const idem_app *
idem_req_app(const idem_req *req)
{
	return req->app;
}

PGconn *
idem_req_db(idem_req *req)
{
	long long	t0;

	if (req->db == NULL && !req->db_unavailable) {
		t0 = now_us();
		req->db = idem_pool_acquire(req->app->pool,
		    req->app->cfg.acquire_timeout_ms);
		idem_metrics_pool_wait(req->app, (double)(now_us() - t0) / 1e6);
		if (req->db == NULL)
			req->db_unavailable = 1;
	}
	if (req->db != NULL && req->phased && req->in_txn && !req->txn_open &&
	    idem_phase_begin(req) == -1)
		return NULL;
	return req->db;
}

/* --- response ------------------------------------------------------------- */

void
idem_resp_reset(idem_req *req)
{
	size_t	i;

	for (i = 0; i < req->nheaders; i++) {
		free(req->hname[i]);
		free(req->hvalue[i]);
	}
	req->nheaders = 0;
	free(req->ctype);
	req->ctype = NULL;
	idem_buf_reset(&req->resp);
	req->status = 0;
}

int
idem_resp_body(idem_req *req, int status, const char *ctype,
    const char *body, size_t len)
{
	if (status < 100 || status > 599 || ctype == NULL ||
	    strpbrk(ctype, "\r\n") != NULL)
		return -1;
	idem_resp_reset(req);
	if ((req->ctype = strdup(ctype)) == NULL ||
	    idem_buf_add(&req->resp, body, len) == -1)
		return -1;
	req->status = status;
	return 0;
}

int
idem_resp_json(idem_req *req, int status, const char *json, size_t len)
{
	return idem_resp_body(req, status, "application/json", json, len);
}

int
idem_resp_header(idem_req *req, const char *name, const char *value)
{
	size_t	i;

	/* Header injection is refused, whatever the handler passes. */
	if (req->nheaders == IDEM_MAX_HEADERS || name[0] == '\0' ||
	    strpbrk(name, "\r\n: ") != NULL || strpbrk(value, "\r\n") != NULL)
		return -1;
	for (i = 0; i < req->nheaders; i++)
		if (strcasecmp(req->hname[i], name) == 0)
			return -1;
	req->hname[req->nheaders] = strdup(name);
	req->hvalue[req->nheaders] = strdup(value);
	if (req->hname[req->nheaders] == NULL ||
	    req->hvalue[req->nheaders] == NULL) {
		free(req->hname[req->nheaders]);
		free(req->hvalue[req->nheaders]);
		return -1;
	}
	req->nheaders++;
	return 0;
}

int
idem_resp_has_header(const idem_req *req, const char *name)
{
	size_t	i;

	for (i = 0; i < req->nheaders; i++)
		if (strcasecmp(req->hname[i], name) == 0)
			return 1;
	return 0;
}

static const char *
reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 402: return "Payment Required";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default:  return "Status";
	}
}

static void
resp_write(idem_req *req)
{
	struct idem_buf	 h = { 0 };
	size_t		 i;

	idem_buf_addf(&h, "Status: %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %lu\r\n", req->status, reason(req->status),
	    req->ctype, (unsigned long)req->resp.len);
	for (i = 0; i < req->nheaders; i++)
		idem_buf_addf(&h, "%s: %s\r\n", req->hname[i], req->hvalue[i]);
	if (req->replayed)
		idem_buf_adds(&h, "Idempotent-Replayed: true\r\n");
	idem_buf_adds(&h, "\r\n");
	if (h.p != NULL)
		FCGX_PutStr(h.p, (int)h.len, req->fcgi->out);
	if (req->resp.len > 0 && strcmp(req->method, "HEAD") != 0)
		FCGX_PutStr(req->resp.p, (int)req->resp.len, req->fcgi->out);
	idem_buf_free(&h);
}

/* --- validation ------------------------------------------------------------ */

/* Absent or empty is 0; anything but 1..20 digits is an error. */
static int
content_length(const char *s, unsigned long long *n)
{
	size_t	i;

	*n = 0;
	if (s == NULL || *s == '\0')
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= 19 || !isdigit((unsigned char)s[i]))
			return -1;
		*n = *n * 10 + (unsigned long long)(s[i] - '0');
	}
	return 0;
}

static int
is_json_ctype(const char *ct)
{
	size_t	n = strlen("application/json");

	if (ct == NULL || strlen(ct) > CTYPE_MAX_LEN ||
	    strncasecmp(ct, "application/json", n) != 0)
		return 0;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	/* Parameters are allowed; another subtype is not. */
	return *ct == '\0' || *ct == ';';
}

static int
read_body(idem_req *req, unsigned long long len)
{
	int	n;
	size_t	got = 0;

	if ((req->body = malloc((size_t)len + 1)) == NULL)
		return -1;
	while (got < len) {
		n = FCGX_GetStr(req->body + got, (int)(len - got),
		    req->fcgi->in);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	req->body[got] = '\0';
	req->bodylen = got;
	return got == len ? 0 : -1;
}

int
idem_addr_allowed(const char *list, const char *addr)
{
	const char	*p = list, *e;
	size_t		 n;

	if (addr == NULL || list == NULL)
		return 0;
	n = strlen(addr);
	while (*p != '\0') {
		while (*p == ' ' || *p == ',')
			p++;
		for (e = p; *e != '\0' && *e != ',' && *e != ' '; e++)
			continue;
		if ((size_t)(e - p) == n && strncmp(p, addr, n) == 0)
			return 1;
		p = e;
	}
	return 0;
}

/* How often a parameter occurs (nginx passes repeated headers twice). */
static int
param_count(char **envp, const char *prefix)
{
	size_t	n = strlen(prefix);
	int	c = 0;

	for (; envp != NULL && *envp != NULL; envp++)
		if (strncmp(*envp, prefix, n) == 0)
			c++;
	return c;
}

/* Answer a refused credential; 1 when refused, 0 when rc is OK. */
static int
auth_refused(idem_req *req, enum idem_auth_result rc)
{
	switch (rc) {
	case IDEM_AUTH_OK:
		return 0;
	case IDEM_AUTH_UNAVAILABLE:
		idem_resp_problem(req, IDEM_P_UNAVAILABLE,
		    "the database is not available; retry later");
		return 1;
	case IDEM_AUTH_DENIED:
	default:
		idem_resp_problem(req, IDEM_P_UNAUTHORIZED,
		    "a valid 'Authorization: Bearer' API key is required");
		idem_resp_header(req, "WWW-Authenticate", "Bearer");
		return 1;
	}
}

/* Returns 0 when req is ready for its handler; else the response is set. */
static int
prepare(idem_req *req)
{
	const struct idem_cfg	*cfg = &req->app->cfg;
	const char		*uri, *q, *m, *v;
	unsigned long long	 cl;
	char			 allow[128], err[128];
	struct idem_jcs_limits	 lim;
	enum idem_match		 mt;
	size_t			 plen;

	m = FCGX_GetParam("REQUEST_METHOD", req->fcgi->envp);
	if (m == NULL || strlen(m) >= sizeof(req->method)) {
		idem_resp_problem(req, IDEM_P_METHOD, "unsupported method");
		return -1;
	}
	strcpy(req->method, m);

	uri = FCGX_GetParam("REQUEST_URI", req->fcgi->envp);
	if (uri != NULL) {
		q = strchr(uri, '?');
		plen = q ? (size_t)(q - uri) : strlen(uri);
		req->path = strndup(uri, plen > PATH_MAX_LEN ? PATH_MAX_LEN + 1
		    : plen);
	} else {
		const char *sn = FCGX_GetParam("SCRIPT_NAME", req->fcgi->envp);
		const char *pi = FCGX_GetParam("PATH_INFO", req->fcgi->envp);
		if (asprintf(&req->path, "%s%s", sn ? sn : "",
		    pi ? pi : "") < 0)
			req->path = NULL;
	}
	v = FCGX_GetParam("QUERY_STRING", req->fcgi->envp);
	if (v != NULL && *v != '\0') {
		if (strlen(v) > QUERY_MAX_LEN) {
			idem_resp_problem(req, IDEM_P_VALIDATION,
			    "query string longer than %d bytes",
			    QUERY_MAX_LEN);
			return -1;
		}
		req->query = strdup(v);
	}
	if (req->path == NULL) {
		idem_resp_problem(req, IDEM_P_INTERNAL, "out of memory");
		return -1;
	}
	req->remote_addr = FCGX_GetParam("REMOTE_ADDR", req->fcgi->envp);

	if (content_length(FCGX_GetParam("CONTENT_LENGTH", req->fcgi->envp),
	    &cl) == -1) {
		idem_resp_problem(req, IDEM_P_VALIDATION,
		    "Content-Length is not a number");
		return -1;
	}
	if (cl > cfg->max_body) {
		idem_resp_problem(req, IDEM_P_TOO_LARGE,
		    "request body is larger than %lu bytes",
		    (unsigned long)cfg->max_body);
		return -1;
	}

	mt = idem_router_match(&req->app->router, req->method, req->path,
	    &req->route, &req->params, allow, sizeof(allow));
	if (mt == IDEM_MATCH_NOT_FOUND) {
		idem_resp_problem(req, IDEM_P_NOT_FOUND, "no such resource");
		return -1;
	}
	if (mt == IDEM_MATCH_METHOD) {
		idem_resp_problem(req, IDEM_P_METHOD,
		    "%s is not allowed here; allowed: %s", req->method, allow);
		idem_resp_header(req, "Allow", allow);
		return -1;
	}
	if (read_body(req, cl) == -1) {
		idem_resp_problem(req, IDEM_P_VALIDATION,
		    "request body is shorter than Content-Length");
		return -1;
	}

	if (req->route->flags & IDEM_ROUTE_LOCAL) {
		if (!idem_addr_allowed(cfg->metrics_allow, req->remote_addr)) {
			idem_resp_problem(req, IDEM_P_NOT_FOUND,
			    "no such resource");
			return -1;
		}
	} else if (!(req->route->flags & IDEM_ROUTE_PUBLIC)) {
		/*
		 * Idempotent routes: only a secret the database knows gets
		 * its body parsed; flight 1 still verifies it, and resolves
		 * the tenant.
		 */
		if (auth_refused(req, (req->route->flags &
		    IDEM_ROUTE_IDEMPOTENT) ? idem_auth_precheck(req) :
		    idem_auth(req)))
			return -1;
	}

	if (req->route->flags & IDEM_ROUTE_IDEMPOTENT) {
		/* Raw: an oversized value is invalid, not missing. */
		v = FCGX_GetParam("HTTP_IDEMPOTENCY_KEY", req->fcgi->envp);
		if (v != NULL && param_count(req->fcgi->envp,
		    "HTTP_IDEMPOTENCY_KEY=") > 1)
			v = "";		/* two fields (nginx) are malformed */
		if (v == NULL) {
			idem_resp_problem(req, IDEM_P_KEY_MISSING,
			    "this endpoint requires an Idempotency-Key "
			    "header");
			return -1;
		}
		if (idem_sfv_key(v, strlen(v), req->key, sizeof(req->key))
		    != IDEM_KEY_OK) {
			idem_resp_problem(req, IDEM_P_KEY_INVALID,
			    "Idempotency-Key must be a string of 1 to %d "
			    "visible ASCII characters", IDEM_KEY_MAX);
			return -1;
		}
		req->has_key = 1;
	}

	if (req->route->flags & IDEM_ROUTE_JSON) {
		if (!is_json_ctype(idem_req_header(req, "Content-Type"))) {
			idem_resp_problem(req, IDEM_P_MEDIA_TYPE,
			    "the body must be application/json");
			return -1;
		}
		lim.max_depth = IDEM_JSON_MAX_DEPTH;
		lim.max_values = cfg->max_json_values;
		switch (idem_jcs_canonicalize(req->body, req->bodylen, &lim,
		    &req->canon, err, sizeof(err))) {
		case IDEM_JCS_OK:
			break;
		case IDEM_JCS_TOO_MANY:
			idem_resp_problem(req, IDEM_P_TOO_LARGE, "%s", err);
			return -1;
		case IDEM_JCS_NOMEM:
			idem_resp_problem(req, IDEM_P_INTERNAL, "%s", err);
			return -1;
		case IDEM_JCS_INVALID:
		default:
			idem_resp_problem(req, IDEM_P_INVALID_JSON, "%s", err);
			return -1;
		}
		/* The canonical form is valid, bounded in depth, unique. */
		req->json = yajl_tree_parse(req->canon.p, NULL, 0);
		if (req->json == NULL) {
			idem_resp_problem(req, IDEM_P_INTERNAL,
			    "cannot parse the request");
			return -1;
		}
	}
	return 0;
}

static void
run_plain(idem_req *req)
{
	int	rc;

	rc = req->route->fn(req, req->route->arg);
	if (rc == -1 || req->status == 0) {
		if (req->db_unavailable || (req->db != NULL &&
		    idem_db_broken(req->db)))
			idem_resp_problem(req, IDEM_P_UNAVAILABLE,
			    "the database is not available; retry later");
		else
			idem_resp_problem(req, IDEM_P_INTERNAL,
			    "the request could not be completed");
	}
}

void
idem_request_handle(idem_app *app, FCGX_Request *fcgi)
{
	idem_req	 req;
	long long	 t0 = now_us();

	memset(&req, 0, sizeof(req));
	req.app = app;
	req.fcgi = fcgi;
	if (idem_random_hex(req.request_id, 8) == -1)
		strcpy(req.request_id, "0");

	if (prepare(&req) == 0) {
		if (req.route->flags & IDEM_ROUTE_IDEMPOTENT) {
			idem_idempotent_run(&req);
			idem_auth_settle(&req);
		} else
			run_plain(&req);
	} else if (req.route != NULL &&
	    (req.route->flags & IDEM_ROUTE_IDEMPOTENT))
		/* A 503 of the secret's lookup is the database's, not the
		 * client's. */
		req.outcome = req.status >= 500 ? IDEM_OUT_ERROR :
		    IDEM_OUT_REJECTED;
	if (req.status == 0)
		idem_resp_problem(&req, IDEM_P_INTERNAL, "no response");
	/* Counted before the client can read the answer and scrape. */
	idem_metrics_request(app, &req, (double)(now_us() - t0) / 1e6);
	/* The client is answered before a pending ROLLBACK is drained. */
	resp_write(&req);
	FCGX_FFlush(fcgi->out);
	if (req.db != NULL)
		idem_pool_release(app->pool, req.db);
	req.db = NULL;
	idem_log_request(&req, now_us() - t0);
	idem_req_release(&req);
}

void
idem_req_release(idem_req *req)
{
	if (req->db != NULL)
		idem_pool_release(req->app->pool, req->db);
	req->db = NULL;
	idem_resp_reset(req);
	idem_buf_free(&req->resp);
	idem_buf_free(&req->canon);
	if (req->json != NULL)
		yajl_tree_free(req->json);
	req->json = NULL;
	idem_params_free(&req->params);
	idem_defer_free(req);
	idem_req_query_free(req);
	free(req->path);
	free(req->query);
	free(req->body);
	req->path = req->query = req->body = NULL;
}
