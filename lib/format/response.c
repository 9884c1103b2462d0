/*
 * response.c - what a handler (or the middleware, or a replay) answers:
 * status, media type, headers and body kept in the request, checked
 * against header injection, and assembled once as a CGI response for
 * request.c to send.  Knows nothing of routes, phases or the database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "private.h"

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
	/* A 204 has no body, so needs no media type (RFC 9110 15.3.5). */
	if (status < 100 || status > 599 || (status == 204 && len > 0) ||
	    (ctype == NULL && status != 204) ||
	    (ctype != NULL && strpbrk(ctype, "\r\n") != NULL))
		return -1;
	idem_resp_reset(req);
	if ((ctype != NULL && (req->ctype = strdup(ctype)) == NULL) ||
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
	case 410: return "Gone";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default:  return "Status";
	}
}

int
idem_resp_write(idem_req *req, struct idem_buf *out)
{
	struct idem_buf	*h = out;
	char		 n[IDEM_INT_LEN];
	size_t		 i;
	int		 rc;

	/* Piece by piece rather than printf: every response comes here. */
	rc = idem_buf_adds(h, "Status: ");
	rc |= idem_buf_add(h, n, idem_fmt_int(n, req->status));
	rc |= idem_buf_addc(h, ' ');
	rc |= idem_buf_adds(h, reason(req->status));
	/* A 204 carries neither (RFC 9110 8.6: no Content-Length there). */
	if (req->status != 204) {
		rc |= idem_buf_adds(h, "\r\nContent-Type: ");
		rc |= idem_buf_adds(h, req->ctype != NULL ? req->ctype :
		    "text/plain");
		rc |= idem_buf_adds(h, "\r\nContent-Length: ");
		rc |= idem_buf_add(h, n, idem_fmt_int(n,
		    (long long)req->resp.len));
	}
	rc |= idem_buf_adds(h, "\r\n");
	for (i = 0; i < req->nheaders; i++) {
		rc |= idem_buf_adds(h, req->hname[i]);
		rc |= idem_buf_adds(h, ": ");
		rc |= idem_buf_adds(h, req->hvalue[i]);
		rc |= idem_buf_adds(h, "\r\n");
	}
	if (req->replayed)
		rc |= idem_buf_adds(h, "Idempotent-Replayed: true\r\n");
	rc |= idem_buf_adds(h, "\r\n");
	if (req->resp.len > 0 && strcmp(req->method, "HEAD") != 0)
		rc |= idem_buf_add(h, req->resp.p, req->resp.len);
	return rc == 0 ? 0 : -1;
}
