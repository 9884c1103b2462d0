/*
 * problem.c - the RFC 9457 problem types of idem, in one table, the
 * function that turns one into an application/problem+json response, and
 * the HTML page of each type that the app serves under [server]
 * problem_base.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

/* The default of [server] problem_base: relative, served by the app. */
#define IDEM_PROBLEM_BASE "/problems/"

static const struct {
	const char	*slug;
	const char	*title;
	int		 status;
	const char	*doc;	/* the page's sentence: what the client does */
} problems[IDEM_P__MAX] = {
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
	[IDEM_P_PAYMENT_REQUIRED] = { "payment-declined",
	    "Payment declined", 402,
	    "The card was declined; the answer is stored for this key." },
};

const char *
idem_problem_slug(enum idem_problem p)
{
	return p < IDEM_P__MAX ? problems[p].slug : "internal-error";
}

const char *
idem_problem_title(enum idem_problem p)
{
	return p < IDEM_P__MAX ? problems[p].title : "Internal server error";
}

int
idem_problem_status(enum idem_problem p)
{
	return p < IDEM_P__MAX ? problems[p].status : 500;
}

const char *
idem_problem_base(const idem_app *app)
{
	return app != NULL && app->cfg.problem_base != NULL ?
	    app->cfg.problem_base : IDEM_PROBLEM_BASE;
}

int
idem_resp_problem(idem_req *req, enum idem_problem p, const char *fmt, ...)
{
	struct idem_buf	 b = { 0 };
	va_list		 ap;
	char		*d;
	int		 n, rc;

	if (p >= IDEM_P__MAX)
		p = IDEM_P_INTERNAL;
	va_start(ap, fmt);
	n = vasprintf(&d, fmt, ap);
	va_end(ap);
	if (n < 0)
		d = NULL;
	rc = idem_buf_addf(&b, "{\"type\":\"%s%s\",\"title\":",
	    idem_problem_base(req->app), problems[p].slug);
	rc |= idem_buf_add_jstr(&b, problems[p].title,
	    strlen(problems[p].title));
	rc |= idem_buf_addf(&b, ",\"status\":%d,\"detail\":",
	    problems[p].status);
	rc |= idem_buf_add_jstr(&b, d ? d : problems[p].title,
	    d ? (size_t)n : strlen(problems[p].title));
	/* The request id of the access log line, so a report finds it. */
	if (req->request_id[0] != '\0')
		rc |= idem_buf_addf(&b, ",\"instance\":\"%s\"",
		    req->request_id);
	rc |= idem_buf_addc(&b, '}');
	free(d);
	if (rc != 0) {
		idem_buf_free(&b);
		return -1;
	}
	rc = idem_resp_body(req, problems[p].status,
	    "application/problem+json", b.p, b.len);
	idem_buf_free(&b);
	if (rc == 0 && p == IDEM_P_KEY_IN_FLIGHT)
		rc = idem_resp_header(req, "Retry-After", "1");
	if (rc == 0 && p == IDEM_P_UNAVAILABLE)
		rc = idem_resp_header(req, "Retry-After", "1");
	/* The Idempotency-Key draft: the client can look the error up. */
	if (rc == 0 && (problems[p].status == 400 || problems[p].status == 422))
		rc = idem_problem_link(req, problems[p].slug);
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
	size_t		 p;
	int		 rc;

	(void)arg;
	for (p = 0; p < IDEM_P__MAX; p++)
		if (slug != NULL && strcmp(problems[p].slug, slug) == 0)
			break;
	if (p == IDEM_P__MAX)
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such problem type");
	rc = idem_buf_adds(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
	    "<meta charset=\"utf-8\"><title>");
	rc |= add_html(&b, problems[p].title);
	rc |= idem_buf_adds(&b, "</title></head>\n<body><h1>");
	rc |= add_html(&b, problems[p].title);
	rc |= idem_buf_addf(&b, "</h1>\n<p>Type <code>%s%s</code>, HTTP "
	    "status %d.</p>\n<p>", idem_problem_base(req->app),
	    problems[p].slug, problems[p].status);
	rc |= add_html(&b, problems[p].doc);
	rc |= idem_buf_adds(&b, "</p>\n</body></html>\n");
	if (rc == 0)
		rc = idem_resp_body(req, 200, "text/html; charset=utf-8", b.p,
		    b.len);
	idem_buf_free(&b);
	return rc;
}
