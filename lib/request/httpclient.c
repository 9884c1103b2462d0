/*
 * httpclient.c - the outbound HTTP client of handlers (idem_http_*): one
 * call on libcurl within the request's time left, its answer in memory
 * and bounded, a per-thread handle so that a worker keeps its
 * connections alive between calls.  A call made for a request that holds
 * a lease runs only while the lease is proven (idem_req_lease_check()):
 * not started without it, and cut (its connection closed) the moment it
 * is no longer proven, so that no retry's call can overlap it.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
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
#include "fields.h"

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
	int		 allow_private;	/* 0: public destinations only */
	int		 failed;	/* a setter failed: send refuses */
	atomic_int	*cancel;	/* set: abandon the call (stopping) */
};

struct idem_http_resp {
	long			 status;
	struct idem_fields	 hdrs;
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

/* A thread's handles: the transfer runs on the multi handle (whose
 * connection cache outlives a call) so that this file keeps the loop. */
struct curl_thread {
	CURL	*easy;
	CURLM	*multi;
};

/* The longest wait between two looks at a call's lease. */
#define LEASE_LOOK_MS	1000

static void
easy_cleanup(void *p)
{
	struct curl_thread	*t = p;

	curl_easy_cleanup(t->easy);
	curl_multi_cleanup(t->multi);
	free(t);
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

/* This thread's handles: their connection cache outlives a call. */
static struct curl_thread *
thread_handle(void)
{
	struct curl_thread	*t;

	if (pthread_once(&curl_once, curl_setup) != 0 || !curl_ready)
		return NULL;
	if ((t = pthread_getspecific(curl_key)) != NULL) {
		/* Options back to defaults; connections, DNS and TLS
		 * sessions are kept. */
		curl_easy_reset(t->easy);
		return t;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	if ((t->easy = curl_easy_init()) == NULL ||
	    (t->multi = curl_multi_init()) == NULL ||
	    pthread_setspecific(curl_key, t) != 0) {
		easy_cleanup(t);
		return NULL;
	}
	return t;
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

/* Are the first bits of a those of p? */
static int
prefix_is(const unsigned char *a, const unsigned char *p, unsigned bits)
{
	unsigned	n = bits / 8, r = bits % 8;

	if (memcmp(a, p, n) != 0)
		return 0;
	return r == 0 || ((a[n] ^ p[n]) & (0xff << (8 - r)) & 0xff) == 0;
}

struct prefix {
	unsigned char	p[16];
	unsigned	bits;
};

/* IPv4 blocks that are not global unicast (IANA's special-purpose
 * registry, RFC 6890 and its updates). */
static const struct prefix v4_refused[] = {
	{ { 0 }, 8 },			/* "this network", 0.0.0.0 */
	{ { 10 }, 8 },			/* RFC 1918 */
	{ { 100, 64 }, 10 },		/* shared address space (CGNAT) */
	{ { 127 }, 8 },			/* loopback */
	{ { 169, 254 }, 16 },		/* link-local (cloud metadata) */
	{ { 172, 16 }, 12 },		/* RFC 1918 */
	{ { 192, 0, 0 }, 24 },		/* IETF protocol assignments */
	{ { 192, 0, 2 }, 24 },		/* TEST-NET-1 */
	{ { 192, 88, 99 }, 24 },	/* 6to4 relay anycast (deprecated) */
	{ { 192, 168 }, 16 },		/* RFC 1918 */
	{ { 198, 18 }, 15 },		/* benchmarking */
	{ { 198, 51, 100 }, 24 },	/* TEST-NET-2 */
	{ { 203, 0, 113 }, 24 },	/* TEST-NET-3 */
	{ { 224 }, 4 },			/* multicast */
	{ { 240 }, 4 },			/* reserved, and the broadcast */
};

/* IPv6 blocks inside 2000::/3 (global unicast) that are not global. */
static const struct prefix v6_refused[] = {
	{ { 0x20, 0x01 }, 23 },		/* IETF protocol assignments, Teredo */
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32 },	/* documentation */
	{ { 0x3f, 0xff }, 20 },		/* documentation (RFC 9637) */
};

static int
v4_public(const unsigned char a[4])
{
	size_t	i;

	for (i = 0; i < sizeof(v4_refused) / sizeof(v4_refused[0]); i++)
		if (prefix_is(a, v4_refused[i].p, v4_refused[i].bits))
			return 0;
	return 1;
}

int
idem_http_addr_public(const struct sockaddr *sa)
{
	static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const unsigned char nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
	static const unsigned char global[1] = { 0x20 };
	static const unsigned char sixtofour[2] = { 0x20, 0x02 };
	const unsigned char	*a;
	size_t			 i;

	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET)
		return v4_public((const unsigned char *)
		    &((const struct sockaddr_in *)(const void *)sa)->sin_addr);
	if (sa->sa_family != AF_INET6)
		return 0;
	a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
	/* The IPv4 address inside decides where the packets go. */
	if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
		return v4_public(a + 12);
	/* Outside 2000::/3 nothing is global unicast today: ::, ::1,
	 * IPv4-compatible, fc00::/7, fe80::/10, fec0::/10, ff00::/8, the
	 * discard and local NAT64 prefixes. */
	if (!prefix_is(a, global, 3))
		return 0;
	if (prefix_is(a, sixtofour, 16))
		return v4_public(a + 2);
	for (i = 0; i < sizeof(v6_refused) / sizeof(v6_refused[0]); i++)
		if (prefix_is(a, v6_refused[i].p, v6_refused[i].bits))
			return 0;
	return 1;
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
		[IDEM_HTTP_REFUSED] = "refused",
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
	h->allow_private = 1;
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

void
idem_http_allow_private(idem_http *h, int on)
{
	if (h != NULL)
		h->allow_private = on != 0;
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
	const char		*end;

	n *= size;
	r->hdr_bytes += n;
	if (r->hdr_bytes > IDEM_HTTP_HEADERS_MAX) {
		r->too_large = 1;
		return 0;
	}
	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		idem_fields_free(&r->hdrs);
		return n;
	}
	end = p + n;
	while (end > p && (end[-1] == '\r' || end[-1] == '\n'))
		end--;
	/* The blank line, or a folded line: not a field, ignored. */
	if (idem_fields_add_line(&r->hdrs, p, (size_t)(end - p)) ==
	    IDEM_FIELDS_NO_MEMORY)
		return 0;
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
	return r == NULL ? NULL : idem_fields_get(&r->hdrs, name);
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
	idem_fields_free(&r->hdrs);
	idem_buf_free(&r->body);
	if (r->json != NULL)
		yajl_tree_free(r->json);
	free(r);
}

/* --- the call ---------------------------------------------------------------- */



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

/* The calling request's trace with a span id of this call's own
 * (tracectx.c), unless the caller set a traceparent. */
static int
add_traceparent(const idem_http *h, const idem_req *req,
    struct curl_slist **lines)
{
	char			 tp[IDEM_TRACEPARENT_LEN + 1], line[80];
	const struct curl_slist	*s;
	struct curl_slist	*t;

	for (s = h->headers; s != NULL; s = s->next)
		if (strncasecmp(s->data, "traceparent:", 12) == 0)
			return 0;
	if (idem_trace_child(req, tp) == -1)
		return 0;
	snprintf(line, sizeof(line), "traceparent: %s", tp);
	if ((t = curl_slist_append(*lines, line)) == NULL)
		return -1;
	*lines = t;
	return 0;
}

/* Does a handler of req run under a deadline?  Only idempotent routes
 * have one (the middleware starts its clock). */
static int
has_deadline(const idem_req *req)
{
	return req != NULL && req->route != NULL && (req->route->flags &
	    (IDEM_ROUTE_IDEMPOTENT | IDEM_ROUTE_PHASED)) != 0;
}

/* What the destination checks saw during one call. */
struct guard {
	int	refused;
	char	addr[INET6_ADDRSTRLEN];	/* the last address refused */
};

static void
guard_refuse(struct guard *g, const struct sockaddr *sa)
{
	const void	*a = sa->sa_family == AF_INET6 ?
	    (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->
	    sin6_addr : (const void *)&((const struct sockaddr_in *)
	    (const void *)sa)->sin_addr;

	g->refused = 1;
	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    inet_ntop(sa->sa_family, a, g->addr, sizeof(g->addr)) == NULL)
		snprintf(g->addr, sizeof(g->addr), "(family %d)",
		    sa->sa_family);
}

/* Each address a new connection is opened to, after name resolution:
 * a refused one gets no socket, so no packet leaves for it (curl goes
 * on with the host's other addresses, if any). */
static curl_socket_t
guard_open(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct guard	*g = arg;

	if (purpose != CURLSOCKTYPE_IPCXN ||
	    !idem_http_addr_public(&a->addr)) {
		guard_refuse(g, &a->addr);
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* Before the request is sent, on a new or a kept-alive connection: one
 * that an earlier call with private addresses allowed left open to such
 * an address is not reused for this one. */
static int
guard_prereq(void *arg, char *primary_ip, char *local_ip, int primary_port,
    int local_port)
{
	struct guard		*g = arg;
	struct sockaddr_storage	 ss;
	struct sockaddr_in	*s4 = (struct sockaddr_in *)(void *)&ss;
	struct sockaddr_in6	*s6 = (struct sockaddr_in6 *)(void *)&ss;

	(void)local_ip;
	(void)primary_port;
	(void)local_port;
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, primary_ip, &s4->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, primary_ip, &s6->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	if (idem_http_addr_public((struct sockaddr *)&ss))
		return CURL_PREREQFUNC_OK;
	g->refused = 1;
	snprintf(g->addr, sizeof(g->addr), "%s", primary_ip);
	return CURL_PREREQFUNC_ABORT;
}

void
idem_http_cancel_on(idem_http *h, atomic_int *flag)
{
	if (h != NULL)
		h->cancel = flag;
}

/* libcurl's progress callback, about once a second even while nothing
 * moves: non-zero abandons the transfer. */
static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
    curl_off_t ultotal, curl_off_t ulnow)
{
	atomic_int	*flag = arg;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return flag != NULL && atomic_load(flag) ? 1 : 0;
}

/* The method, and the body when there is one; non-zero: refused. */
static int
set_method(CURL *c, const idem_http *h)
{
	int	bad = 0;

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
	return bad;
}

/* Only public addresses, checked by g where the connection is made;
 * non-zero: refused. */
static int
set_guard(CURL *c, struct guard *g)
{
	int	bad = 0;

	bad |= curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION,
	    guard_open) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, g) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_PREREQFUNCTION,
	    guard_prereq) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_PREREQDATA, g) != CURLE_OK;
	/* A proxy would resolve and connect in our place, unchecked
	 * (and an environment's http_proxy may well be local). */
	bad |= curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK;
	return bad;
}

static int
set_options(CURL *c, const idem_http *h, struct curl_slist *lines,
    idem_http_resp *r, long long ms, char *errbuf, struct guard *g)
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
	/* Never followed: a redirect would be a call to another address
	 * than the one checked, with the body sent again. */
	bad |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK;
	if (!h->allow_private)
		bad |= set_guard(c, g);
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
	/* Set on every call: the thread's handle is reused by the next. */
	bad |= curl_easy_setopt(c, CURLOPT_NOPROGRESS, h->cancel == NULL ?
	    1L : 0L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) !=
	    CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_XFERINFODATA, h->cancel) !=
	    CURLE_OK;
	bad |= set_method(c, h);
	return bad ? -1 : 0;
}

/*
 * Run the transfer, looking at req's lease before it starts, whenever
 * anything happens and at the instant the lease would end: unproven, the
 * transfer is not started or is abandoned (its connection closed), and
 * errbuf says so.
 */
static CURLcode
perform(struct curl_thread *t, idem_req *req, char *errbuf)
{
	CURLcode	 cc = CURLE_OK;
	CURLMsg		*m;
	long long	 left_ms;
	int		 running = 1, queued, cut = 0;

	if (req != NULL && idem_req_lease_check(req) != IDEM_LEASE_SURE) {
		snprintf(errbuf, CURL_ERROR_SIZE, "not sent: the request's "
		    "lease is no longer proven");
		return CURLE_OPERATION_TIMEDOUT;
	}
	if (curl_multi_add_handle(t->multi, t->easy) != CURLM_OK)
		return CURLE_FAILED_INIT;
	for (;;) {
		if (curl_multi_perform(t->multi, &running) != CURLM_OK) {
			cc = CURLE_FAILED_INIT;
			break;
		}
		if (!running)
			break;
		if (req != NULL &&
		    idem_req_lease_check(req) != IDEM_LEASE_SURE) {
			cut = 1;
			cc = CURLE_OPERATION_TIMEDOUT;
			snprintf(errbuf, CURL_ERROR_SIZE, "cut: the request's "
			    "lease is no longer proven");
			break;
		}
		left_ms = req != NULL ? idem_req_lease_left_us(req) / 1000 + 1 :
		    LEASE_LOOK_MS;
		if (left_ms < 0)
			left_ms = 0;
		curl_multi_poll(t->multi, NULL, 0, left_ms < LEASE_LOOK_MS ?
		    (int)left_ms : LEASE_LOOK_MS, NULL);
	}
	while ((m = curl_multi_info_read(t->multi, &queued)) != NULL)
		if (!cut && m->msg == CURLMSG_DONE && m->easy_handle == t->easy)
			cc = m->data.result;
	curl_multi_remove_handle(t->multi, t->easy);
	return cc;
}

/* A call's state from its options to its answer: the send of one call
 * and each call of a batch. */
struct http_call {
	CURL			*easy;
	idem_http		*h;
	struct curl_slist	*lines;
	idem_http_resp		*r;
	struct guard		 g;
	char			 errbuf[CURL_ERROR_SIZE];
	void			*tag;		/* the batch's caller's */
};

/* Set c's options for h on c->easy: IDEM_HTTP_OK, or the rc and err. */
static enum idem_http_rc
call_prepare(struct http_call *c, idem_http *h, idem_req *req, char *err,
    size_t errlen)
{
	long long	ms;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (h == NULL || h->failed) {
		idem_errf(err, errlen, "fail: the request was not built");
		return IDEM_HTTP_FAIL;
	}
	ms = idem_http_budget_ms(h->timeout_ms, has_deadline(req),
	    has_deadline(req) ? idem_req_time_left_ms(req) : 0);
	if (ms == 0) {
		idem_errf(err, errlen, "timeout: no time left for %s %s", h->method,
		    h->url);
		return IDEM_HTTP_TIMEOUT;
	}
	c->h = h;
	c->g.refused = 0;
	c->g.addr[0] = '\0';
	c->errbuf[0] = '\0';
	if ((c->lines = header_lines(h)) == NULL ||
	    add_traceparent(h, req, &c->lines) == -1 ||
	    (c->r = calloc(1, sizeof(*c->r))) == NULL) {
		curl_slist_free_all(c->lines);
		c->lines = NULL;
		idem_errf(err, errlen, "fail: out of memory");
		return IDEM_HTTP_FAIL;
	}
	c->r->max_body = h->max_body;
	if (set_options(c->easy, h, c->lines, c->r, ms, c->errbuf, &c->g) ==
	    -1) {
		curl_slist_free_all(c->lines);
		c->lines = NULL;
		idem_http_resp_free(c->r);
		c->r = NULL;
		idem_errf(err, errlen, "fail: libcurl refused an option");
		return IDEM_HTTP_FAIL;
	}
	return IDEM_HTTP_OK;
}

/* c's transfer ended with cc: what it means, the answer in *resp (with
 * IDEM_HTTP_OK and IDEM_HTTP_STATUS) and err. */
static enum idem_http_rc
call_finish(struct http_call *c, CURLcode cc, idem_http_resp **resp,
    char *err, size_t errlen)
{
	idem_http		*h = c->h;
	idem_http_resp		*r = c->r;
	enum idem_http_rc	 rc;

	c->r = NULL;
	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &r->status);
	/* The handle outlives this call: nothing of it may point here. */
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(c->easy, CURLOPT_OPENSOCKETDATA, NULL);
	curl_easy_setopt(c->easy, CURLOPT_PREREQDATA, NULL);
	curl_slist_free_all(c->lines);
	c->lines = NULL;
	if (c->g.refused && cc != CURLE_OK) {
		idem_errf(err, errlen, "refused: %s %s: %s is not a public address",
		    h->method, h->url, c->g.addr);
		idem_http_resp_free(r);
		return IDEM_HTTP_REFUSED;
	}
	rc = idem_http_classify((int)cc, r->too_large, r->status);
	if (rc == IDEM_HTTP_OK || rc == IDEM_HTTP_STATUS) {
		if (idem_buf_nul(&r->body) == -1) {
			idem_http_resp_free(r);
			idem_errf(err, errlen, "fail: out of memory");
			return IDEM_HTTP_FAIL;
		}
		if (rc == IDEM_HTTP_STATUS)
			idem_errf(err, errlen, "status: %s %s answered %ld",
			    h->method, h->url, r->status);
		*resp = r;
		return rc;
	}
	idem_errf(err, errlen, "%s: %s %s: %s", idem_http_rc_name(rc),
		    h->method, h->url, rc == IDEM_HTTP_TOO_LARGE ?
		    "the answer is larger than allowed" : c->errbuf[0] != '\0' ?
		    c->errbuf : curl_easy_strerror(cc));
	idem_http_resp_free(r);
	return rc;
}

enum idem_http_rc
idem_http_send(idem_http *h, idem_req *req, idem_http_resp **resp,
    char *err, size_t errlen)
{
	struct http_call	 c;
	struct curl_thread	*t = NULL;
	enum idem_http_rc	 rc;
	CURLcode		 cc;

	if (resp != NULL)
		*resp = NULL;
	if (resp == NULL)
		h = NULL;	/* refused below: nowhere to put the answer */
	memset(&c, 0, sizeof(c));
	if (h != NULL && !h->failed) {
		if ((t = thread_handle()) == NULL) {
			idem_errf(err, errlen, "fail: out of memory");
			return IDEM_HTTP_FAIL;
		}
		c.easy = t->easy;
	}
	if ((rc = call_prepare(&c, h, req, err, errlen)) != IDEM_HTTP_OK)
		return rc;
	cc = perform(t, req, c.errbuf);
	return call_finish(&c, cc, resp, err, errlen);
}

/* --- several calls at once (the dispatcher) -------------------------------- */

struct idem_http_batch {
	CURLM			*multi;
	struct http_call	*calls;		/* [max] */
	size_t			 max, running;
};

idem_http_batch *
idem_http_batch_new(size_t max)
{
	idem_http_batch	*b;
	size_t		 i;

	if (pthread_once(&curl_once, curl_setup) != 0 || !curl_ready ||
	    max == 0 || (b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	b->max = max;
	if ((b->multi = curl_multi_init()) == NULL ||
	    (b->calls = calloc(max, sizeof(*b->calls))) == NULL) {
		idem_http_batch_free(b);
		return NULL;
	}
	for (i = 0; i < max; i++)
		if ((b->calls[i].easy = curl_easy_init()) == NULL) {
			idem_http_batch_free(b);
			return NULL;
		}
	return b;
}

/* Take call i off the multi handle: not running any more. */
static void
batch_remove(idem_http_batch *b, struct http_call *c)
{
	curl_multi_remove_handle(b->multi, c->easy);
	c->h = NULL;
	c->tag = NULL;
	b->running--;
}

void
idem_http_batch_free(idem_http_batch *b)
{
	size_t	i;

	if (b == NULL)
		return;
	for (i = 0; b->calls != NULL && i < b->max; i++) {
		if (b->calls[i].h != NULL)
			batch_remove(b, &b->calls[i]);
		curl_slist_free_all(b->calls[i].lines);
		idem_http_resp_free(b->calls[i].r);
		if (b->calls[i].easy != NULL)
			curl_easy_cleanup(b->calls[i].easy);
	}
	free(b->calls);
	if (b->multi != NULL)
		curl_multi_cleanup(b->multi);
	free(b);
}

size_t
idem_http_batch_running(const idem_http_batch *b)
{
	return b != NULL ? b->running : 0;
}

enum idem_http_rc
idem_http_batch_add(idem_http_batch *b, idem_http *h, void *tag, char *err,
    size_t errlen)
{
	struct http_call	*c = NULL;
	enum idem_http_rc	 rc;
	size_t			 i;

	for (i = 0; b != NULL && i < b->max && c == NULL; i++)
		if (b->calls[i].h == NULL)
			c = &b->calls[i];
	if (c == NULL) {
		idem_errf(err, errlen, "fail: no free call in the batch");
		return IDEM_HTTP_FAIL;
	}
	curl_easy_reset(c->easy);
	if ((rc = call_prepare(c, h, NULL, err, errlen)) != IDEM_HTTP_OK) {
		c->h = NULL;
		return rc;
	}
	if (curl_multi_add_handle(b->multi, c->easy) != CURLM_OK) {
		curl_slist_free_all(c->lines);
		c->lines = NULL;
		idem_http_resp_free(c->r);
		c->r = NULL;
		c->h = NULL;
		idem_errf(err, errlen, "fail: libcurl refused the call");
		return IDEM_HTTP_FAIL;
	}
	c->tag = tag;
	b->running++;
	return IDEM_HTTP_OK;
}

void
idem_http_batch_wait(idem_http_batch *b, long ms)
{
	int	running;

	if (b == NULL || curl_multi_perform(b->multi, &running) != CURLM_OK)
		return;
	/* A call that ended already: no wait before it is collected. */
	if ((size_t)running < b->running)
		return;
	curl_multi_poll(b->multi, NULL, 0, ms > 0 ? (int)ms : 0, NULL);
	curl_multi_perform(b->multi, &running);
}

/* The call of b whose easy handle is e. */
static struct http_call *
batch_call(idem_http_batch *b, CURL *e)
{
	size_t	i;

	for (i = 0; i < b->max; i++)
		if (b->calls[i].easy == e && b->calls[i].h != NULL)
			return &b->calls[i];
	return NULL;
}

int
idem_http_batch_done(idem_http_batch *b, void **tag, enum idem_http_rc *rc,
    idem_http_resp **resp, char *err, size_t errlen)
{
	struct http_call	*c;
	CURLMsg			*m;
	int			 queued;

	*resp = NULL;
	while (b != NULL && (m = curl_multi_info_read(b->multi, &queued)) !=
	    NULL) {
		if (m->msg != CURLMSG_DONE ||
		    (c = batch_call(b, m->easy_handle)) == NULL)
			continue;
		*tag = c->tag;
		*rc = call_finish(c, m->data.result, resp, err, errlen);
		batch_remove(b, c);
		return 1;
	}
	return 0;
}

void *
idem_http_batch_abandon(idem_http_batch *b)
{
	void	*tag;
	size_t	 i;

	for (i = 0; b != NULL && i < b->max; i++) {
		if (b->calls[i].h == NULL)
			continue;
		tag = b->calls[i].tag;
		curl_slist_free_all(b->calls[i].lines);
		b->calls[i].lines = NULL;
		idem_http_resp_free(b->calls[i].r);
		b->calls[i].r = NULL;
		batch_remove(b, &b->calls[i]);
		return tag;
	}
	return NULL;
}
