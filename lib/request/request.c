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
#include <unistd.h>

#include "private.h"

#define QUERY_MAX_LEN	4096

/* --- validation ------------------------------------------------------------ */

/* The first len bytes of the body the reader kept (it may have more). */
static int
read_body(idem_req *req, unsigned long long len)
{
	const struct idem_buf	*b = &req->in->body;

	if (b->len < len)
		return -1;
	if ((req->body = malloc((size_t)len + 1)) == NULL)
		return -1;
	if (len > 0)
		memcpy(req->body, b->p, (size_t)len);
	req->body[len] = '\0';
	req->bodylen = (size_t)len;
	return 0;
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

/*
 * prepare's steps: each returns 0 to go on, or -1 with the response set.
 */

/* The method, path, query string and peer address. */
static int
prepare_target(idem_req *req)
{
	const char		*uri, *q, *m, *v;
	size_t			 plen;

	m = idem_fcgi_param(req->in, "REQUEST_METHOD");
	if (m == NULL || strlen(m) >= sizeof(req->method)) {
		idem_resp_problem(req, IDEM_P_METHOD, "unsupported method");
		return -1;
	}
	strcpy(req->method, m);

	uri = idem_fcgi_param(req->in, "REQUEST_URI");
	if (uri != NULL) {
		q = strchr(uri, '?');
		plen = q ? (size_t)(q - uri) : strlen(uri);
		req->path = strndup(uri, plen > IDEM_PATH_MAX ? IDEM_PATH_MAX + 1
		    : plen);
	} else {
		const char *sn = idem_fcgi_param(req->in, "SCRIPT_NAME");
		const char *pi = idem_fcgi_param(req->in, "PATH_INFO");
		if (asprintf(&req->path, "%s%s", sn ? sn : "",
		    pi ? pi : "") < 0)
			req->path = NULL;
	}
	v = idem_fcgi_param(req->in, "QUERY_STRING");
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
	req->remote_addr = idem_fcgi_param(req->in, "REMOTE_ADDR");
	return 0;
}

/* The announced body length into *cl, within the limits. */
static int
prepare_length(idem_req *req, unsigned long long *clp)
{
	const struct idem_cfg	*cfg = &req->app->cfg;
	unsigned long long	 cl;

	if (idem_http_content_length(idem_fcgi_param(req->in,
	    "CONTENT_LENGTH"), &cl) == -1) {
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
	if (req->in->body_refused) {
		/* The process holds what [server] max_buffered allows. */
		idem_resp_problem(req, IDEM_P_UNAVAILABLE,
		    "too many request bodies are being received; retry later");
		return -1;
	}
	*clp = cl;
	return 0;
}

/* The route, then the body of length cl. */
static int
prepare_route(idem_req *req, unsigned long long cl)
{
	char			 allow[128];
	enum idem_match		 mt;

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
	return 0;
}

/* Who may call the route: local peers, or a known secret. */
static int
prepare_auth(idem_req *req)
{
	const struct idem_cfg	*cfg = &req->app->cfg;

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
	return 0;
}

/* The Idempotency-Key of an idempotent route. */
static int
prepare_key(idem_req *req)
{
	const char		*v;
	enum idem_key_verdict	 kv;

	if ((req->route->flags & IDEM_ROUTE_IDEMPOTENT) &&
	    req->route->inbox == NULL) {
		/* Raw: an oversized value is invalid, not missing. */
		v = idem_fcgi_param(req->in, "HTTP_IDEMPOTENCY_KEY");
		if (v == NULL) {
			idem_resp_problem(req, IDEM_P_KEY_MISSING,
			    "this endpoint requires an Idempotency-Key "
			    "header");
			return -1;
		}
		/* Two fields (nginx passes both) are a list of two values. */
		kv = idem_fcgi_param_count(req->in,
		    "HTTP_IDEMPOTENCY_KEY") > 1 ? IDEM_KEY_LIST :
		    idem_key_parse(v, strlen(v), req->key, sizeof(req->key));
		if (kv != IDEM_KEY_OK) {
			idem_resp_problem(req, IDEM_P_KEY_INVALID, "%s",
			    idem_key_reason(kv));
			return -1;
		}
		req->has_key = 1;
	}
	return 0;
}

/* A JSON body: canonical form (and the fingerprint's), parsed. */
static int
prepare_json(idem_req *req)
{
	const struct idem_cfg	*cfg = &req->app->cfg;
	char			 err[128];
	struct idem_jcs_limits	 lim;
	const char *const	*exclude;
	size_t			 nexclude;

	if (!idem_http_is_json(idem_req_header(req, "Content-Type"))) {
		idem_resp_problem(req, IDEM_P_MEDIA_TYPE,
		    "the body must be application/json");
		return -1;
	}
	lim.max_depth = IDEM_JSON_MAX_DEPTH;
	lim.max_values = cfg->max_json_values;
	/* The route's fingerprint_exclude: its own form for the
	 * fingerprint; canon stays whole (kept for the completer). */
	exclude = idem_cfg_route_exclude(cfg, req->route->method,
	    req->route->pattern, &nexclude);
	switch (idem_jcs_canonicalize_pruned(req->body, req->bodylen,
	    &lim, exclude, nexclude, &req->canon,
	    nexclude > 0 ? &req->fpcanon : NULL, err, sizeof(err))) {
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
	/*
	 * The canonicaliser admitted the body (valid, bounded in
	 * depth, unique names).  The validator and the handler read
	 * it as written, numbers as their literals: the canonical
	 * form, through doubles, is the fingerprint's only.
	 */
	req->json = yajl_tree_parse(req->body, NULL, 0);
	if (req->json == NULL) {
		idem_resp_problem(req, IDEM_P_INTERNAL,
		    "cannot parse the request");
		return -1;
	}
	/* Declared validation: refused before the key is used. */
	if (idem_req_body_check(req) == -1)
		return -1;
	return 0;
}

/* Returns 0 when req is ready for its handler; else the response is set. */
static int
prepare(idem_req *req)
{
	unsigned long long	 cl;

	if (prepare_target(req) == -1 || prepare_length(req, &cl) == -1 ||
	    prepare_route(req, cl) == -1)
		return -1;
	/* A signed source's message: its signature before anything else. */
	if (req->route->inbox != NULL && idem_inbox_receive(req) == -1)
		return -1;
	if (prepare_auth(req) == -1 || prepare_key(req) == -1)
		return -1;
	/* Declared query parameters: refused before the key is used. */
	if (idem_req_query_check(req) == -1)
		return -1;
	if ((req->route->flags & IDEM_ROUTE_JSON) && prepare_json(req) == -1)
		return -1;
	/* Its key: the source's tenant and the message's id. */
	if (req->route->inbox != NULL && idem_inbox_claimant(req) == -1)
		return -1;
	return 0;
}

static void
run_plain(idem_req *req)
{
	int	rc;

	rc = req->route->fn(req, req->route->arg);
	if (rc == -1 || req->status == 0) {
		if (req->db_unavailable || (req->db != NULL &&
		    idem_db_broken(req->db)) ||
		    idem_sqlstate_transient(req->db_sqlstate))
			idem_resp_problem(req, IDEM_P_UNAVAILABLE,
			    "the database is not available; retry later");
		else
			idem_resp_problem(req, IDEM_P_INTERNAL,
			    "the request could not be completed");
	}
}

/* The response as STDOUT records and END_REQUEST, handed to answer. */
static enum idem_rc
respond(idem_req *req, idem_answer_fn answer, void *conn)
{
	struct idem_buf	 cgi = { 0 }, out = { 0 };
	enum idem_rc	 rc = IDEM_RC_FAIL;

	if (idem_resp_write(req, &cgi) == 0 &&
	    idem_fcgi_response(&out, req->in->req_id, cgi.p, cgi.len) == 0)
		rc = answer(conn, &out);
	idem_buf_free(&cgi);
	idem_buf_free(&out);
	return rc;
}

enum idem_rc
idem_request_handle(idem_app *app, struct idem_fcgi *in,
    idem_answer_fn answer, void *conn)
{
	idem_req	 req;
	long long	 t0 = idem_now_us();
	enum idem_rc	 rc;

	memset(&req, 0, sizeof(req));
	req.app = app;
	req.in = in;
	if (idem_random_hex(req.request_id, 8) == -1)
		strcpy(req.request_id, "0");
	idem_trace_begin(&req);
	idem_log_bind(req.request_id, req.trace.trace_id);

	if (prepare(&req) == 0) {
		if (req.route->flags & IDEM_ROUTE_IDEMPOTENT) {
			idem_idempotent_run(&req);
			if (req.route->inbox == NULL)
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
	idem_metrics_request(app, &req, (double)(idem_now_us() - t0) / 1e6);
	/* The client is answered before a pending ROLLBACK is drained. */
	rc = respond(&req, answer, conn);
	idem_req_conn_release(&req);
	idem_log_request(&req, idem_now_us() - t0);
	idem_req_release(&req);
	idem_log_bind(NULL, NULL);
	return rc;
}

void
idem_req_release(idem_req *req)
{
	idem_req_conn_release(req);
	idem_resp_reset(req);
	idem_buf_free(&req->resp);
	idem_buf_free(&req->canon);
	idem_buf_free(&req->fpcanon);
	idem_buf_free(&req->events);
	if (req->json != NULL)
		yajl_tree_free(req->json);
	req->json = NULL;
	idem_params_free(&req->params);
	idem_defer_free(req);
	idem_req_query_free(req);
	idem_query_pairs_free(&req->qpairs);
	free(req->path);
	free(req->query);
	free(req->body);
	req->path = req->query = req->body = NULL;
}
