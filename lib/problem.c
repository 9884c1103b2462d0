/*
 * problem.c - the RFC 9457 problem types of idem, in one table, those an
 * application adds (idem_app_problem()), and the function that turns one
 * into an application/problem+json response.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

#define IDEM_PROBLEM_BASE "https://idem.dev/problems/"

struct problem {
	const char	*slug;
	const char	*title;
	int		 status;
};

static const struct problem problems[IDEM_P__MAX] = {
	[IDEM_P_KEY_MISSING] = { "idempotency-key-missing",
	    "Idempotency-Key header required", 400 },
	[IDEM_P_KEY_INVALID] = { "idempotency-key-invalid",
	    "Idempotency-Key header is malformed", 400 },
	[IDEM_P_KEY_IN_FLIGHT] = { "idempotency-key-in-flight",
	    "A request with this Idempotency-Key is in progress", 409 },
	[IDEM_P_KEY_REUSED] = { "idempotency-key-reused",
	    "Idempotency-Key was used for a different request", 422 },
	[IDEM_P_INVALID_JSON] = { "invalid-json",
	    "Request body is not valid JSON", 400 },
	[IDEM_P_VALIDATION] = { "validation-error",
	    "Request is invalid", 400 },
	[IDEM_P_TOO_LARGE] = { "payload-too-large",
	    "Request body too large", 413 },
	[IDEM_P_MEDIA_TYPE] = { "unsupported-media-type",
	    "Unsupported media type", 415 },
	[IDEM_P_UNAUTHORIZED] = { "unauthorized",
	    "Missing or invalid credentials", 401 },
	[IDEM_P_NOT_FOUND] = { "not-found", "Not found", 404 },
	[IDEM_P_METHOD] = { "method-not-allowed",
	    "Method not allowed", 405 },
	[IDEM_P_UNAVAILABLE] = { "service-unavailable",
	    "Service temporarily unavailable", 503 },
	[IDEM_P_INTERNAL] = { "internal-error",
	    "Internal server error", 500 },
};

int
idem_app_problem(idem_app *app, const char *slug, int status,
    const char *title)
{
	struct idem_problem_type	*t;
	size_t				 i;

	/* The slug ends a URI and the title is a JSON string: keep both
	 * plain, and a status a client may act on (4xx/5xx). */
	if (app == NULL || slug == NULL || title == NULL || *slug == '\0' ||
	    *title == '\0' || strspn(slug, "abcdefghijklmnopqrstuvwxyz"
	    "0123456789-") != strlen(slug) || strlen(slug) > 64 ||
	    strlen(title) > 128 || strpbrk(title, "\r\n") != NULL ||
	    status < 400 || status > 599 ||
	    app->nproblems == IDEM_APP_PROBLEMS_MAX)
		return -1;
	for (i = 0; i < IDEM_P__MAX; i++)
		if (strcmp(problems[i].slug, slug) == 0)
			return -1;
	for (i = 0; i < app->nproblems; i++)
		if (strcmp(app->problems[i].slug, slug) == 0)
			return -1;
	t = &app->problems[app->nproblems];
	if ((t->slug = strdup(slug)) == NULL ||
	    (t->title = strdup(title)) == NULL) {
		free(t->slug);
		t->slug = NULL;
		return -1;
	}
	t->status = status;
	return IDEM_P__MAX + (int)app->nproblems++;
}

void
idem_app_problems_free(idem_app *app)
{
	size_t	i;

	for (i = 0; i < app->nproblems; i++) {
		free(app->problems[i].slug);
		free(app->problems[i].title);
	}
	app->nproblems = 0;
}

/* The library's type p, or the application's; internal-error if neither. */
static struct problem
problem_of(const idem_req *req, int p)
{
	struct problem	 t = problems[IDEM_P_INTERNAL];
	size_t		 i;

	if (p >= 0 && p < IDEM_P__MAX)
		return problems[p];
	i = (size_t)(p - IDEM_P__MAX);
	if (p >= IDEM_P__MAX && req->app != NULL &&
	    i < req->app->nproblems) {
		t.slug = req->app->problems[i].slug;
		t.title = req->app->problems[i].title;
		t.status = req->app->problems[i].status;
	}
	return t;
}

int
idem_resp_problem(idem_req *req, enum idem_problem p, const char *fmt, ...)
{
	struct idem_buf	 b = { 0 };
	struct problem	 t = problem_of(req, (int)p);
	va_list		 ap;
	char		*d;
	int		 n, rc;

	va_start(ap, fmt);
	n = vasprintf(&d, fmt, ap);
	va_end(ap);
	if (n < 0)
		d = NULL;
	rc = idem_buf_addf(&b, "{\"type\":\"%s%s\",\"title\":",
	    IDEM_PROBLEM_BASE, t.slug);
	rc |= idem_buf_add_jstr(&b, t.title,
	    strlen(t.title));
	rc |= idem_buf_addf(&b, ",\"status\":%d,\"detail\":",
	    t.status);
	rc |= idem_buf_add_jstr(&b, d ? d : t.title,
	    d ? (size_t)n : strlen(t.title));
	rc |= idem_buf_addc(&b, '}');
	free(d);
	if (rc != 0) {
		idem_buf_free(&b);
		return -1;
	}
	rc = idem_resp_body(req, t.status,
	    "application/problem+json", b.p, b.len);
	idem_buf_free(&b);
	if (rc == 0 && p == IDEM_P_KEY_IN_FLIGHT)
		rc = idem_resp_header(req, "Retry-After", "1");
	if (rc == 0 && p == IDEM_P_UNAVAILABLE)
		rc = idem_resp_header(req, "Retry-After", "1");
	return rc;
}
