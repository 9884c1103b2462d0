/*
 * http.c - the request as a handler reads it: the accessors (method, path,
 * parameters, the decoded query, headers from their CGI parameters, body,
 * tenant) and the pure parsers of what the web server sends (lengths,
 * media types, address lists).  Calls
 * nothing of the runtime, so auth.c, problem.c and the handler helpers can
 * use it without the request's life cycle (request.c).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "private.h"

#define HEADER_MAX_LEN	8192
#define QUERY_MAX_LEN	4096
#define CTYPE_MAX_LEN	256

const char *
idem_req_header(const idem_req *req, const char *name)
{
	char		 env[128];
	size_t		 i, o = 0;
	const char	*v;

	/* A request the completer runs again has no headers. */
	if (req->in == NULL)
		return NULL;
	if (strcasecmp(name, "Content-Type") == 0)
		return idem_fcgi_param(req->in, "CONTENT_TYPE");
	if (strcasecmp(name, "Content-Length") == 0)
		return idem_fcgi_param(req->in, "CONTENT_LENGTH");
	if (strlen(name) + 6 > sizeof(env))
		return NULL;
	memcpy(env, "HTTP_", 5);
	o = 5;
	for (i = 0; name[i] != '\0'; i++)
		env[o++] = name[i] == '-' ? '_' :
		    (char)toupper((unsigned char)name[i]);
	env[o] = '\0';
	v = idem_fcgi_param(req->in, env);
	if (v != NULL && strlen(v) > HEADER_MAX_LEN)
		return NULL;
	return v;
}

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

const char *
idem_req_id(const idem_req *req)
{
	return req->request_id;
}

const idem_app *
idem_req_app(const idem_req *req)
{
	return req->app;
}

/* --- parsers ------------------------------------------------------------ */

/* Absent or empty is 0; anything but 1..20 digits is an error. */
int
idem_http_content_length(const char *s, unsigned long long *n)
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

int
idem_http_is_json(const char *ct)
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
