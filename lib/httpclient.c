/*
 * httpclient.c - the outbound HTTP client of handlers (idem_http_*): one
 * call on libcurl within the request's time left, its answer in memory
 * and bounded, a per-thread easy handle so that a worker keeps its
 * connections alive between calls.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <yajl/yajl_tree.h>

#include "private.h"
#include "httpclient.h"

struct idem_http {
	char		*method;
	char		*url;
	struct curl_slist *headers;	/* "Name: value" lines */
	char		*content_type;
	char		*body;
	size_t		 body_len;
	int		 has_body;
	long long	 timeout_ms;
	size_t		 max_body;
	char		*ca_file;
	int		 failed;	/* a setter failed: send refuses */
};

struct idem_http_hdr {
	char	*name;
	char	*value;
};

struct idem_http_resp {
	long			 status;
	struct idem_http_hdr	*hdrs;
	size_t			 nhdrs;
	size_t			 hdr_bytes;
	struct idem_buf		 body;
	size_t			 max_body;
	int			 too_large;
	int			 json_parsed;
	yajl_val		 json;
};

static pthread_once_t	curl_once = PTHREAD_ONCE_INIT;
static pthread_key_t	curl_key;
static int		curl_ready;

static void
easy_cleanup(void *p)
{
	curl_easy_cleanup(p);
}

static void
curl_setup(void)
{
	/* Once per process, before any handle: not thread-safe before
	 * libcurl 7.84, so never on two workers at once. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK &&
	    pthread_key_create(&curl_key, easy_cleanup) == 0)
		curl_ready = 1;
}

/* This thread's easy handle: its connection cache outlives a call. */
static CURL *
thread_handle(void)
{
	CURL	*c;

	if (pthread_once(&curl_once, curl_setup) != 0 || !curl_ready)
		return NULL;
	if ((c = pthread_getspecific(curl_key)) != NULL) {
		/* Options back to defaults; connections, DNS and TLS
		 * sessions are kept. */
		curl_easy_reset(c);
		return c;
	}
	if ((c = curl_easy_init()) == NULL)
		return NULL;
	if (pthread_setspecific(curl_key, c) != 0) {
		curl_easy_cleanup(c);
		return NULL;
	}
	return c;
}

/* --- decisions ----------------------------------------------------------- */

enum idem_http_rc
idem_http_classify(int curl_code, int too_large, long status)
{
	if (too_large)
		return IDEM_HTTP_TOO_LARGE;
	switch ((CURLcode)curl_code) {
	case CURLE_OK:
		if (status >= 200 && status <= 299)
			return IDEM_HTTP_OK;
		return status >= 100 ? IDEM_HTTP_STATUS : IDEM_HTTP_BROKEN;
	case CURLE_FILESIZE_EXCEEDED:
		return IDEM_HTTP_TOO_LARGE;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
		return IDEM_HTTP_CONNECT;
	case CURLE_OPERATION_TIMEDOUT:
		return IDEM_HTTP_TIMEOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_CLIENTCERT:
	case CURLE_USE_SSL_FAILED:
		return IDEM_HTTP_TLS;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_BAD_CONTENT_ENCODING:
		return IDEM_HTTP_BROKEN;
	default:
		return IDEM_HTTP_FAIL;
	}
}

long long
idem_http_budget_ms(long long cap_ms, int has_deadline, long long left_ms)
{
	long long	ms = cap_ms > 0 ? cap_ms : 0;

	if (has_deadline && left_ms < ms)
		ms = left_ms > 0 ? left_ms : 0;
	return ms;
}

int
idem_http_header_ok(const char *name, const char *value)
{
	const char	*p;

	if (name == NULL || value == NULL || *name == '\0')
		return 0;
	for (p = name; *p != '\0'; p++)
		if (*p <= ' ' || *p == ':' || *p == 0x7f)
			return 0;
	/* A CR or LF would end the line: a second header, smuggled. */
	return strpbrk(value, "\r\n") == NULL;
}

const char *
idem_http_rc_name(enum idem_http_rc rc)
{
	static const char *const names[] = {
		[IDEM_HTTP_OK] = "ok",
		[IDEM_HTTP_STATUS] = "status",
		[IDEM_HTTP_CONNECT] = "connect",
		[IDEM_HTTP_TIMEOUT] = "timeout",
		[IDEM_HTTP_TLS] = "tls",
		[IDEM_HTTP_TOO_LARGE] = "too_large",
		[IDEM_HTTP_BROKEN] = "broken",
		[IDEM_HTTP_FAIL] = "fail",
	};

	if ((unsigned)rc >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[rc];
}

/* --- the request ----------------------------------------------------------- */

idem_http *
idem_http_new(const char *method, const char *url)
{
	idem_http	*h;

	if (method == NULL || url == NULL || *method == '\0' ||
	    strpbrk(method, " \t\r\n") != NULL)
		return NULL;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	h->method = strdup(method);
	h->url = strdup(url);
	h->timeout_ms = IDEM_HTTP_TIMEOUT_DEFAULT_MS;
	h->max_body = IDEM_HTTP_BODY_MAX_DEFAULT;
	if (h->method == NULL || h->url == NULL) {
		idem_http_free(h);
		return NULL;
	}
	return h;
}

void
idem_http_free(idem_http *h)
{
	if (h == NULL)
		return;
	curl_slist_free_all(h->headers);
	free(h->method);
	free(h->url);
	free(h->content_type);
	free(h->body);
	free(h->ca_file);
	free(h);
}

int
idem_http_header(idem_http *h, const char *name, const char *value)
{
	struct curl_slist	*l;
	char			*line;

	if (h == NULL)
		return -1;
	if (!idem_http_header_ok(name, value) ||
	    asprintf(&line, "%s: %s", name, value) == -1) {
		h->failed = 1;
		return -1;
	}
	l = curl_slist_append(h->headers, line);
	free(line);
	if (l == NULL) {
		h->failed = 1;
		return -1;
	}
	h->headers = l;
	return 0;
}

int
idem_http_derived_key(idem_http *h, const idem_req *req, const char *name,
    const char *phase)
{
	char	key[64];

	if (h == NULL || req == NULL ||
	    idem_req_derived_key(req, phase, key, sizeof(key)) == -1) {
		if (h != NULL)
			h->failed = 1;
		return -1;
	}
	return idem_http_header(h, name, key);
}

int
idem_http_body(idem_http *h, const char *content_type, const void *body,
    size_t len)
{
	char	*ct, *b;

	if (h == NULL)
		return -1;
	if (content_type == NULL || strpbrk(content_type, "\r\n") != NULL ||
	    (body == NULL && len > 0)) {
		h->failed = 1;
		return -1;
	}
	ct = strdup(content_type);
	b = malloc(len + 1);
	if (ct == NULL || b == NULL) {
		free(ct);
		free(b);
		h->failed = 1;
		return -1;
	}
	if (len > 0)
		memcpy(b, body, len);
	b[len] = '\0';
	free(h->content_type);
	free(h->body);
	h->content_type = ct;
	h->body = b;
	h->body_len = len;
	h->has_body = 1;
	return 0;
}

int
idem_http_json(idem_http *h, const idem_json *j)
{
	const char	*buf;
	size_t		 len;

	if ((buf = idem_json_buf(j, &len)) == NULL) {
		if (h != NULL)
			h->failed = 1;
		return -1;
	}
	return idem_http_body(h, "application/json", buf, len);
}

void
idem_http_timeout_ms(idem_http *h, long long ms)
{
	if (h != NULL)
		h->timeout_ms = ms;
}

void
idem_http_max_body(idem_http *h, size_t bytes)
{
	if (h != NULL)
		h->max_body = bytes;
}

int
idem_http_ca_file(idem_http *h, const char *path)
{
	char	*p;

	if (h == NULL)
		return -1;
	if (path == NULL || (p = strdup(path)) == NULL) {
		h->failed = 1;
		return -1;
	}
	free(h->ca_file);
	h->ca_file = p;
	return 0;
}

/* --- the answer ------------------------------------------------------------ */

static void
resp_clear_headers(idem_http_resp *r)
{
	size_t	i;

	for (i = 0; i < r->nhdrs; i++) {
		free(r->hdrs[i].name);
		free(r->hdrs[i].value);
	}
	free(r->hdrs);
	r->hdrs = NULL;
	r->nhdrs = 0;
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	idem_http_resp	*r = arg;

	n *= size;
	if (r->body.len + n > r->max_body) {
		r->too_large = 1;
		return 0;	/* curl stops the transfer */
	}
	return idem_buf_add(&r->body, p, n) == 0 ? n : 0;
}

/* One header line ("Name: value\r\n"), or a status line that starts the
 * headers of a new answer (after a 1xx). */
static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	idem_http_resp		*r = arg;
	struct idem_http_hdr	*g;
	const char		*colon, *v, *end;

	n *= size;
	r->hdr_bytes += n;
	if (r->hdr_bytes > IDEM_HTTP_HEADERS_MAX) {
		r->too_large = 1;
		return 0;
	}
	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		resp_clear_headers(r);
		return n;
	}
	end = p + n;
	while (end > p && (end[-1] == '\r' || end[-1] == '\n'))
		end--;
	if ((colon = memchr(p, ':', (size_t)(end - p))) == NULL ||
	    colon == p)
		return n;	/* the blank line, or a folded line: ignored */
	for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if ((g = reallocarray(r->hdrs, r->nhdrs + 1, sizeof(*g))) == NULL)
		return 0;
	r->hdrs = g;
	g = &r->hdrs[r->nhdrs];
	g->name = strndup(p, (size_t)(colon - p));
	g->value = strndup(v, (size_t)(end - v));
	if (g->name == NULL || g->value == NULL) {
		free(g->name);
		free(g->value);
		return 0;
	}
	r->nhdrs++;
	return n;
}

int
idem_http_resp_status(const idem_http_resp *r)
{
	return r != NULL ? (int)r->status : 0;
}

const char *
idem_http_resp_header(const idem_http_resp *r, const char *name)
{
	size_t	i;

	if (r == NULL || name == NULL)
		return NULL;
	for (i = 0; i < r->nhdrs; i++)
		if (strcasecmp(r->hdrs[i].name, name) == 0)
			return r->hdrs[i].value;
	return NULL;
}

const char *
idem_http_resp_body(const idem_http_resp *r, size_t *len)
{
	if (r == NULL)
		return NULL;
	if (len != NULL)
		*len = r->body.len;
	return r->body.p != NULL ? r->body.p : "";
}

yajl_val
idem_http_resp_json(idem_http_resp *r)
{
	if (r == NULL)
		return NULL;
	if (!r->json_parsed) {
		r->json_parsed = 1;
		/* yajl reads up to a NUL: a body with one is not JSON. */
		if (r->body.p != NULL && strlen(r->body.p) == r->body.len)
			r->json = yajl_tree_parse(r->body.p, NULL, 0);
	}
	return r->json;
}

void
idem_http_resp_free(idem_http_resp *r)
{
	if (r == NULL)
		return;
	resp_clear_headers(r);
	idem_buf_free(&r->body);
	if (r->json != NULL)
		yajl_tree_free(r->json);
	free(r);
}

/* --- the call ---------------------------------------------------------------- */

static void say(char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static void
say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The request's header lines, then ours: the body's type, and no
 * "Expect: 100-continue" (a second round trip for every large body). */
static struct curl_slist *
header_lines(const idem_http *h)
{
	struct curl_slist	*l = NULL, *t;
	const struct curl_slist	*s;
	char			*ct = NULL;

	for (s = h->headers; s != NULL; s = s->next) {
		if ((t = curl_slist_append(l, s->data)) == NULL)
			goto fail;
		l = t;
	}
	if (h->has_body) {
		if (asprintf(&ct, "Content-Type: %s", h->content_type) == -1) {
			ct = NULL;
			goto fail;
		}
		if ((t = curl_slist_append(l, ct)) == NULL)
			goto fail;
		l = t;
		free(ct);
		ct = NULL;
	}
	if ((t = curl_slist_append(l, "Expect:")) == NULL)
		goto fail;
	return t;
fail:
	free(ct);
	curl_slist_free_all(l);
	return NULL;
}

/* Does a handler of req run under a deadline?  Only idempotent routes
 * have one (the middleware starts its clock). */
static int
has_deadline(const idem_req *req)
{
	return req != NULL && req->route != NULL && (req->route->flags &
	    (IDEM_ROUTE_IDEMPOTENT | IDEM_ROUTE_PHASED)) != 0;
}

static int
set_options(CURL *c, const idem_http *h, struct curl_slist *lines,
    idem_http_resp *r, long long ms, char *errbuf)
{
	int	bad = 0;

	bad |= curl_easy_setopt(c, CURLOPT_URL, h->url) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") !=
	    CURLE_OK;
	/* Worker threads: no SIGALRM around name resolution. */
	bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ms) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)ms) !=
	    CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L) != CURLE_OK;
	if (h->ca_file != NULL)
		bad |= curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file) !=
		    CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_USERAGENT, "idem/" IDEM_VERSION) !=
	    CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, lines) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
	    (curl_off_t)h->max_body) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_WRITEDATA, r) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) !=
	    CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_HEADERDATA, r) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK;
	if (h->has_body) {
		bad |= curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)h->body_len) != CURLE_OK;
		bad |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, h->body) !=
		    CURLE_OK;
	} else if (strcmp(h->method, "HEAD") == 0)
		bad |= curl_easy_setopt(c, CURLOPT_NOBODY, 1L) != CURLE_OK;
	else
		bad |= curl_easy_setopt(c, CURLOPT_HTTPGET, 1L) != CURLE_OK;
	if (strcmp(h->method, h->has_body ? "POST" : "GET") != 0 &&
	    strcmp(h->method, "HEAD") != 0)
		bad |= curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, h->method) !=
		    CURLE_OK;
	return bad ? -1 : 0;
}

enum idem_http_rc
idem_http_send(idem_http *h, idem_req *req, idem_http_resp **resp,
    char *err, size_t errlen)
{
	char			 errbuf[CURL_ERROR_SIZE];
	struct curl_slist	*lines = NULL;
	idem_http_resp		*r = NULL;
	enum idem_http_rc	 rc;
	CURLcode		 cc;
	CURL			*c;
	long long		 ms;

	if (resp != NULL)
		*resp = NULL;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (h == NULL || resp == NULL || h->failed) {
		say(err, errlen, "fail: the request was not built");
		return IDEM_HTTP_FAIL;
	}
	ms = idem_http_budget_ms(h->timeout_ms, has_deadline(req),
	    has_deadline(req) ? idem_req_time_left_ms(req) : 0);
	if (ms == 0) {
		say(err, errlen, "timeout: no time left for %s %s", h->method,
		    h->url);
		return IDEM_HTTP_TIMEOUT;
	}
	if ((c = thread_handle()) == NULL || (lines = header_lines(h)) ==
	    NULL || (r = calloc(1, sizeof(*r))) == NULL) {
		curl_slist_free_all(lines);
		say(err, errlen, "fail: out of memory");
		return IDEM_HTTP_FAIL;
	}
	r->max_body = h->max_body;
	errbuf[0] = '\0';
	if (set_options(c, h, lines, r, ms, errbuf) == -1) {
		curl_slist_free_all(lines);
		idem_http_resp_free(r);
		say(err, errlen, "fail: libcurl refused an option");
		return IDEM_HTTP_FAIL;
	}
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	/* The handle outlives this call: nothing of it may point here. */
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(lines);
	rc = idem_http_classify((int)cc, r->too_large, r->status);
	if (rc == IDEM_HTTP_OK || rc == IDEM_HTTP_STATUS) {
		if (idem_buf_nul(&r->body) == -1) {
			idem_http_resp_free(r);
			say(err, errlen, "fail: out of memory");
			return IDEM_HTTP_FAIL;
		}
		if (rc == IDEM_HTTP_STATUS)
			say(err, errlen, "status: %s %s answered %ld",
			    h->method, h->url, r->status);
		*resp = r;
		return rc;
	}
	say(err, errlen, "%s: %s %s: %s", idem_http_rc_name(rc),
		    h->method, h->url, rc == IDEM_HTTP_TOO_LARGE ?
		    "the answer is larger than allowed" : errbuf[0] != '\0' ?
		    errbuf : curl_easy_strerror(cc));
	idem_http_resp_free(r);
	return rc;
}
