/*
 * problem.c - the RFC 9457 problem types of idem, in one table, those an
 * application adds (idem_app_problem()), the function that turns one into
 * an application/problem+json response, and the HTML page of each type
 * that the app serves under [server] problem_base.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

/* The default of [server] problem_base: relative, served by the app. */
#define IDEM_PROBLEM_BASE "/problems/"

static const struct idem_problem_type problems[IDEM_P__MAX] = {
	[IDEM_P_KEY_MISSING] = { "idempotency-key-missing",
	    "Idempotency-Key header required", 400,
	    "This route is idempotent: send an Idempotency-Key header." },
	[IDEM_P_KEY_INVALID] = { "idempotency-key-invalid",
	    "Idempotency-Key header is malformed", 400,
	    "The key must be 1 to 255 visible ASCII characters, bare or as "
	    "a quoted RFC 8941 string." },
	[IDEM_P_KEY_IN_FLIGHT] = { "idempotency-key-in-flight",
	    "A request with this Idempotency-Key is in progress", 409,
	    "Retry shortly with the same key (see Retry-After)." },
	[IDEM_P_KEY_REUSED] = { "idempotency-key-reused",
	    "Idempotency-Key was used for a different request", 422,
	    "This key belongs to another request: use a new key." },
	[IDEM_P_INVALID_JSON] = { "invalid-json",
	    "Request body is not valid JSON", 400,
	    "Send one valid UTF-8 JSON value, without duplicate member "
	    "names." },
	[IDEM_P_VALIDATION] = { "validation-error",
	    "Request is invalid", 400,
	    "The detail names the member and the rule it breaks; the "
	    "route's schema is in /openapi.json." },
	[IDEM_P_TOO_LARGE] = { "payload-too-large",
	    "Request body too large", 413,
	    "The body exceeds the server's limit." },
	[IDEM_P_MEDIA_TYPE] = { "unsupported-media-type",
	    "Unsupported media type", 415,
	    "Send the body as application/json." },
	[IDEM_P_UNAUTHORIZED] = { "unauthorized",
	    "Missing or invalid credentials", 401,
	    "Send Authorization: Bearer with an API key that is not "
	    "revoked." },
	[IDEM_P_NOT_FOUND] = { "not-found", "Not found", 404,
	    "No such resource." },
	[IDEM_P_METHOD] = { "method-not-allowed",
	    "Method not allowed", 405,
	    "The Allow header lists the methods of this path." },
	[IDEM_P_UNAVAILABLE] = { "service-unavailable",
	    "Service temporarily unavailable", 503,
	    "Nothing was stored: retry later with the same key." },
	[IDEM_P_INTERNAL] = { "internal-error",
	    "Internal server error", 500,
	    "Nothing was stored: a retry with the same key executes "
	    "afresh." },
	/* Stored by idemctl key abandon (sql/009), replayed to every retry. */
	[IDEM_P_KEY_ABANDONED] = { "idempotency-key-abandoned",
	    "Idempotency key abandoned", 500,
	    "The request was interrupted and an operator abandoned it: "
	    "effects of its completed phases may stand. Do not retry it with "
	    "this key; ask the operator." },
	/*
	 * [route] remember: the same request under a key whose record
	 * expired.  410, not 409 (retry) nor 422 (use a new key): the
	 * operation happened and its answer is gone for good.
	 */
	[IDEM_P_KEY_EXPIRED] = { "idempotency-key-expired",
	    "Idempotency key expired", 410,
	    "This request was executed under this key before its record "
	    "expired; it is not executed again and its answer cannot be "
	    "replayed. Do not retry: the operation happened; look it up." },
	/* idem_app_webhook_routes()' create: [webhooks] max_endpoints. */
	[IDEM_P_WEBHOOK_ENDPOINT_LIMIT] = { "webhook-endpoint-limit",
	    "Too many webhook endpoints", 422,
	    "The tenant has as many webhook endpoints as it may have: delete "
	    "one, then create this one with a new Idempotency-Key." },
	/* A signed source's receiver ([inbox]): nothing stored, no handler
	 * run; the sender's retry is checked afresh. */
	[IDEM_P_WEBHOOK_SIGNATURE] = { "webhook-signature-invalid",
	    "Webhook signature invalid", 400,
	    "The message's signature headers are missing, malformed, or "
	    "match none of the source's secrets: nothing was stored." },
	[IDEM_P_WEBHOOK_TIMESTAMP] = { "webhook-timestamp-out-of-tolerance",
	    "Webhook timestamp out of tolerance", 400,
	    "The message's signed timestamp is further from the receiver's "
	    "clock than the source's tolerance: nothing was stored." },
};

/*
 * The types of errors the web server answers itself, before or instead of
 * the app (the static pages conf/errors/<status>.json name them): never
 * answered by idem, only documented here so that each type resolves while
 * the app runs.  413, 500 and 503 use the table's own types.
 */
static const struct idem_problem_type edge_problems[] = {
	{ "bad-request", "Bad request", 400,
	    "The web server could not parse the request (a malformed request "
	    "line or header field); it did not reach the application." },
	{ "request-timeout", "Request timeout", 408,
	    "The request did not arrive in time; it did not reach the "
	    "application." },
	{ "length-required", "Length required", 411,
	    "Send the body with a Content-Length." },
	{ "uri-too-long", "URI too long", 414,
	    "The request target is longer than the web server accepts." },
	{ "header-fields-too-large", "Request header fields too large", 431,
	    "The request's header fields are larger than the web server "
	    "accepts." },
	{ "bad-gateway", "Bad gateway", 502,
	    "The application did not answer.  The request may or may not "
	    "have run: retry with the same Idempotency-Key, which answers "
	    "what ran or runs it once." },
	{ "gateway-timeout", "Gateway timeout", 504,
	    "The application did not answer in time.  The request may still "
	    "complete: retry with the same Idempotency-Key." },
	{ "http-version-not-supported", "HTTP version not supported", 505,
	    "Use HTTP/1.1 (or HTTP/1.0)." },
};

#define STR_(x)	#x
#define STR(x)	STR_(x)

/* Is slug one of the library's types, answered or documented? */
static int
library_slug(const char *slug)
{
	size_t	i;

	for (i = 0; i < IDEM_P__MAX; i++)
		if (strcmp(problems[i].slug, slug) == 0)
			return 1;
	for (i = 0; i < sizeof(edge_problems) / sizeof(edge_problems[0]); i++)
		if (strcmp(edge_problems[i].slug, slug) == 0)
			return 1;
	return 0;
}

/* Why the definition is refused, or NULL.  The slug ends a URI and the
 * title and doc are JSON strings and an HTML page: plain text; any
 * status a client acts on (409 and 422 included: a client tells the
 * application's from the key protocol's by the type). */
static const char *
app_problem_refusal(const idem_app *app, const char *slug, int status,
    const char *title, const char *doc)
{
	int	p;

	if (slug == NULL || *slug == '\0' || strlen(slug) > 64 ||
	    strspn(slug, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
	    strlen(slug))
		return "the slug must be 1 to 64 lower-case letters, digits "
		    "and hyphens";
	if (library_slug(slug) || strncmp(slug, "idempotency-key-", 16) == 0)
		return "the slug is the library's (its types, and every "
		    "idempotency-key-*, are the key protocol's and the web "
		    "servers')";
	for (p = IDEM_P__MAX; p < idem_problem_count(app); p++)
		if (strcmp(idem_problem_type(app, p)->slug, slug) == 0)
			return "the slug is defined already";
	if (status < 400 || status > 599)
		return "the status must be 400 to 599";
	if (title == NULL || *title == '\0' || strlen(title) > 128 ||
	    strpbrk(title, "\r\n") != NULL)
		return "the title must be 1 to 128 bytes without a line break";
	if (doc != NULL && (strlen(doc) > 512 || strpbrk(doc, "\r\n") !=
	    NULL))
		return "the doc must be at most 512 bytes without a line break";
	if (app->nproblems == IDEM_APP_PROBLEMS_MAX)
		return "too many problem types (at most "
		    STR(IDEM_APP_PROBLEMS_MAX) ")";
	return NULL;
}

int
idem_app_problem(idem_app *app, const char *slug, int status,
    const char *title, const char *doc)
{
	struct idem_problem_type	*t;
	const char			*why;
	char				*ps, *pt, *pd;

	if (app == NULL)
		return -1;
	if ((why = app_problem_refusal(app, slug, status, title, doc)) != NULL)
		return idem_app_refuse(app, "idem_app_problem(\"%.64s\", %d): "
		    "%s", slug != NULL ? slug : "(null)", status, why);
	ps = strdup(slug);
	pt = strdup(title);
	pd = strdup(doc != NULL ? doc : title);
	if (ps == NULL || pt == NULL || pd == NULL) {
		free(ps);
		free(pt);
		free(pd);
		return idem_app_refuse(app, "idem_app_problem(\"%s\"): out of "
		    "memory", slug);
	}
	t = &app->problems[app->nproblems];
	t->slug = ps;
	t->title = pt;
	t->doc = pd;
	t->status = status;
	return IDEM_P__MAX + (int)app->nproblems++;
}

void
idem_app_problems_free(idem_app *app)
{
	size_t	i;

	for (i = 0; i < app->nproblems; i++) {
		free((char *)(uintptr_t)app->problems[i].slug);
		free((char *)(uintptr_t)app->problems[i].title);
		free((char *)(uintptr_t)app->problems[i].doc);
	}
	app->nproblems = 0;
}

int
idem_problem_count(const idem_app *app)
{
	return IDEM_P__MAX + (app != NULL ? (int)app->nproblems : 0);
}

const struct idem_problem_type *
idem_problem_type(const idem_app *app, int p)
{
	if (p >= 0 && p < IDEM_P__MAX)
		return &problems[p];
	if (app != NULL && p >= IDEM_P__MAX &&
	    (size_t)(p - IDEM_P__MAX) < app->nproblems)
		return &app->problems[p - IDEM_P__MAX];
	return &problems[IDEM_P_INTERNAL];
}

const char *
idem_problem_base(const idem_app *app)
{
	return app != NULL && app->cfg.problem_base != NULL ?
	    app->cfg.problem_base : IDEM_PROBLEM_BASE;
}

/* The problem p with detail fmt, and ext (NULL: none), members of the
 * problem's own (RFC 9457 extension members) as JSON text ',"name":...'. */
static int
problem_v(idem_req *req, enum idem_problem p, const char *ext,
    const char *fmt, va_list ap)
{
	const struct idem_problem_type *t = idem_problem_type(req->app,
					    (int)p);
	struct idem_buf	 b = { 0 };
	char		*d;
	int		 n, rc;

	n = vasprintf(&d, fmt, ap);
	if (n < 0)
		d = NULL;
	rc = idem_buf_addf(&b, "{\"type\":\"%s%s\",\"title\":",
	    idem_problem_base(req->app), t->slug);
	rc |= idem_buf_add_jstr(&b, t->title,
	    strlen(t->title));
	rc |= idem_buf_addf(&b, ",\"status\":%d,\"detail\":",
	    t->status);
	rc |= idem_buf_add_jstr(&b, d ? d : t->title,
	    d ? (size_t)n : strlen(t->title));
	/* The request id of the access log line, so a report finds it. */
	if (req->request_id[0] != '\0')
		rc |= idem_buf_addf(&b, ",\"instance\":\"%s\"",
		    req->request_id);
	if (ext != NULL)
		rc |= idem_buf_adds(&b, ext);
	rc |= idem_buf_addc(&b, '}');
	free(d);
	if (rc != 0) {
		idem_buf_free(&b);
		return -1;
	}
	rc = idem_resp_body(req, t->status,
	    "application/problem+json", b.p, b.len);
	idem_buf_free(&b);
	if (rc == 0 && p == IDEM_P_KEY_IN_FLIGHT)
		rc = idem_resp_header(req, "Retry-After", "1");
	if (rc == 0 && p == IDEM_P_UNAVAILABLE)
		rc = idem_resp_header(req, "Retry-After", "1");
	/* The Idempotency-Key draft: the client can look the error up;
	 * and an application's type, whatever its status. */
	if (rc == 0 && (t->status == 400 || t->status == 422 ||
	    p >= IDEM_P__MAX))
		rc = idem_problem_link(req, t->slug);
	return rc;
}

int
idem_resp_problem(idem_req *req, enum idem_problem p, const char *fmt, ...)
{
	va_list	ap;
	int	rc;

	va_start(ap, fmt);
	rc = problem_v(req, p, NULL, fmt, ap);
	va_end(ap);
	return rc;
}

int
idem_resp_problem_ext(idem_req *req, enum idem_problem p, const char *ext,
    const char *fmt, ...)
{
	va_list	ap;
	int	rc;

	va_start(ap, fmt);
	rc = problem_v(req, p, ext, fmt, ap);
	va_end(ap);
	return rc;
}

int
idem_problem_link(idem_req *req, const char *slug)
{
	char	link[512];

	snprintf(link, sizeof(link), "<%s%s>; rel=\"describedby\"",
	    idem_problem_base(req->app), slug);
	return idem_resp_header(req, "Link", link);
}

/* s with &, <, >, " escaped, for an HTML page. */
static int
add_html(struct idem_buf *b, const char *s)
{
	int	rc = 0;

	for (; *s != '\0' && rc == 0; s++)
		switch (*s) {
		case '&':
			rc = idem_buf_adds(b, "&amp;");
			break;
		case '<':
			rc = idem_buf_adds(b, "&lt;");
			break;
		case '>':
			rc = idem_buf_adds(b, "&gt;");
			break;
		case '"':
			rc = idem_buf_adds(b, "&quot;");
			break;
		default:
			rc = idem_buf_addc(b, *s);
		}
	return rc;
}

/* GET <problem_base>:slug - the type's documentation, plain HTML. */
int
idem_problem_doc_handler(idem_req *req, void *arg)
{
	const char	*slug = idem_req_param(req, "slug");
	struct idem_buf	 b = { 0 };
	const struct idem_problem_type *t = NULL;
	int		 p, rc;

	(void)arg;
	for (p = 0; p < idem_problem_count(req->app); p++)
		if (slug != NULL &&
		    strcmp(idem_problem_type(req->app, p)->slug, slug) == 0)
			t = idem_problem_type(req->app, p);
	for (p = 0; t == NULL && slug != NULL && (size_t)p <
	    sizeof(edge_problems) / sizeof(edge_problems[0]); p++)
		if (strcmp(edge_problems[p].slug, slug) == 0)
			t = &edge_problems[p];
	if (t == NULL)
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such problem type");
	rc = idem_buf_adds(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
	    "<meta charset=\"utf-8\"><title>");
	rc |= add_html(&b, t->title);
	rc |= idem_buf_adds(&b, "</title></head>\n<body><h1>");
	rc |= add_html(&b, t->title);
	rc |= idem_buf_addf(&b, "</h1>\n<p>Type <code>%s%s</code>, HTTP "
	    "status %d.</p>\n<p>", idem_problem_base(req->app),
	    t->slug, t->status);
	rc |= add_html(&b, t->doc);
	rc |= idem_buf_adds(&b, "</p>\n</body></html>\n");
	if (rc == 0)
		rc = idem_resp_body(req, 200, "text/html; charset=utf-8", b.p,
		    b.len);
	idem_buf_free(&b);
	return rc;
}
