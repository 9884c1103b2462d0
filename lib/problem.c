/*
 * problem.c - the RFC 9457 problem types of idem, in one table, and the
 * function that turns one into an application/problem+json response.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

#define IDEM_PROBLEM_BASE "https://idem.dev/problems/"

static const struct {
	const char	*slug;
	const char	*title;
	int		 status;
} problems[IDEM_P__MAX] = {
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
	[IDEM_P_PAYMENT_REQUIRED] = { "payment-declined",
	    "Payment declined", 402 },
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
	    IDEM_PROBLEM_BASE, problems[p].slug);
	rc |= idem_buf_add_jstr(&b, problems[p].title,
	    strlen(problems[p].title));
	rc |= idem_buf_addf(&b, ",\"status\":%d,\"detail\":",
	    problems[p].status);
	rc |= idem_buf_add_jstr(&b, d ? d : problems[p].title,
	    d ? (size_t)n : strlen(problems[p].title));
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
	return rc;
}
