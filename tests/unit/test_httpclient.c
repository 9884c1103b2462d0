/*
 * test_httpclient.c - the outbound HTTP client (idem_http_*): its pure
 * decisions from tables, then real calls to a Python HTTP server on
 * loopback (tests/unit/httpd.py), plain and over TLS with a self-signed
 * certificate made here with openssl; destinations refused when private
 * addresses are not allowed, and redirects not followed.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "internal.h"
#include "httpclient.h"
#include "tap.h"

struct server {
	pid_t	pid;
	int	in;	/* its stdin: closing it ends the server */
	int	port;
};

/* Start httpd.py (with args), wait for its "port N" line. */
static int
server_start(struct server *s, const char *tls_cert, const char *tls_key)
{
	char	 script[1024], line[64];
	int	 to[2], from[2];
	FILE	*f;
	const char *srcdir = getenv("srcdir");

	snprintf(script, sizeof(script), "%s/tests/unit/httpd.py",
	    srcdir != NULL ? srcdir : ".");
	if (pipe(to) == -1 || pipe(from) == -1)
		return -1;
	if ((s->pid = fork()) == -1)
		return -1;
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		if (tls_cert != NULL)
			execlp("python3", "python3", script, "--tls", tls_cert,
			    tls_key, (char *)NULL);
		else
			execlp("python3", "python3", script, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	s->in = to[1];
	if ((f = fdopen(from[0], "r")) == NULL)
		return -1;
	if (fgets(line, sizeof(line), f) == NULL ||
	    sscanf(line, "port %d", &s->port) != 1) {
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

static void
server_stop(struct server *s)
{
	close(s->in);
	waitpid(s->pid, NULL, 0);
}

/* One call; the answer's rc, *resp set as idem_http_send() sets it. */
static enum idem_http_rc
call(const char *method, const char *url, idem_http_resp **resp)
{
	idem_http		*h = idem_http_new(method, url);
	enum idem_http_rc	 rc;

	rc = idem_http_send(h, NULL, resp, NULL, 0);
	idem_http_free(h);
	return rc;
}

static long long
json_int(yajl_val doc, const char *name)
{
	const char	*path[] = { name, NULL };
	yajl_val	 v = yajl_tree_get(doc, path, yajl_t_number);

	return v != NULL && YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : -1;
}

static const char *
json_str(yajl_val doc, const char *name)
{
	const char	*path[] = { name, NULL };
	yajl_val	 v = yajl_tree_get(doc, path, yajl_t_string);

	return v != NULL ? YAJL_GET_STRING(v) : NULL;
}

/* Which destinations a call with private addresses refused may reach. */
static const struct {
	const char	*addr;
	int		 want;	/* 1: public */
} addrs[] = {
	{ "8.8.8.8", 1 },
	{ "1.1.1.1", 1 },
	{ "93.184.215.14", 1 },
	{ "0.0.0.0", 0 },
	{ "0.1.2.3", 0 },
	{ "1.0.0.0", 1 },
	{ "9.255.255.255", 1 },
	{ "10.0.0.1", 0 },
	{ "10.255.255.255", 0 },
	{ "11.0.0.0", 1 },
	{ "100.63.255.255", 1 },
	{ "100.64.0.0", 0 },
	{ "100.127.255.255", 0 },
	{ "100.128.0.0", 1 },
	{ "126.255.255.255", 1 },
	{ "127.0.0.1", 0 },
	{ "127.255.255.254", 0 },
	{ "128.0.0.0", 1 },
	{ "169.254.169.254", 0 },	/* cloud metadata */
	{ "169.253.255.255", 1 },
	{ "169.255.0.0", 1 },
	{ "172.15.255.255", 1 },
	{ "172.16.0.0", 0 },
	{ "172.31.255.255", 0 },
	{ "172.32.0.0", 1 },
	{ "192.0.0.8", 0 },
	{ "192.0.2.1", 0 },
	{ "192.0.3.1", 1 },
	{ "192.88.99.1", 0 },
	{ "192.167.255.255", 1 },
	{ "192.168.0.1", 0 },
	{ "192.168.255.255", 0 },
	{ "192.169.0.0", 1 },
	{ "198.17.255.255", 1 },
	{ "198.18.0.1", 0 },
	{ "198.19.255.255", 0 },
	{ "198.20.0.0", 1 },
	{ "198.51.100.7", 0 },
	{ "203.0.113.9", 0 },
	{ "223.255.255.255", 1 },
	{ "224.0.0.1", 0 },
	{ "239.255.255.250", 0 },
	{ "240.0.0.1", 0 },
	{ "255.255.255.255", 0 },
	{ "2606:4700:4700::1111", 1 },
	{ "2a00:1450:4001:80b::200e", 1 },
	{ "::", 0 },
	{ "::1", 0 },
	{ "::8.8.8.8", 0 },		/* IPv4-compatible, deprecated */
	{ "::ffff:127.0.0.1", 0 },
	{ "::ffff:10.1.2.3", 0 },
	{ "::ffff:169.254.169.254", 0 },
	{ "::ffff:8.8.8.8", 1 },
	{ "64:ff9b::8.8.8.8", 1 },	/* NAT64 of a public address */
	{ "64:ff9b::192.168.1.1", 0 },
	{ "64:ff9b::127.0.0.1", 0 },
	{ "64:ff9b:1::8.8.8.8", 0 },	/* local-use NAT64 */
	{ "100::1", 0 },		/* discard */
	{ "2001::1", 0 },		/* Teredo */
	{ "2001:1ff:ffff::1", 0 },	/* end of 2001::/23 */
	{ "2001:200::1", 1 },
	{ "2001:db8::1", 0 },
	{ "2002:0808:0808::1", 1 },	/* 6to4 of 8.8.8.8 */
	{ "2002:c0a8:0101::1", 0 },	/* 6to4 of 192.168.1.1 */
	{ "2002:7f00:0001::1", 0 },	/* 6to4 of 127.0.0.1 */
	{ "3fff::1", 0 },		/* documentation (RFC 9637) */
	{ "3fff:1000::1", 1 },
	{ "4000::1", 0 },		/* outside 2000::/3 */
	{ "fc00::1", 0 },
	{ "fd12:3456::1", 0 },
	{ "fe80::1", 0 },
	{ "febf::1", 0 },
	{ "fec0::1", 0 },		/* site-local, deprecated */
	{ "ff02::1", 0 },
	{ "ff0e::1", 0 },
	{ "1fff:ffff::1", 0 },
};

static void
test_addrs(void)
{
	struct sockaddr_storage	 ss;
	struct sockaddr_in	*s4 = (struct sockaddr_in *)(void *)&ss;
	struct sockaddr_in6	*s6 = (struct sockaddr_in6 *)(void *)&ss;
	size_t			 i;

	for (i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		memset(&ss, 0, sizeof(ss));
		if (inet_pton(AF_INET, addrs[i].addr, &s4->sin_addr) == 1)
			ss.ss_family = AF_INET;
		else if (inet_pton(AF_INET6, addrs[i].addr,
		    &s6->sin6_addr) == 1)
			ss.ss_family = AF_INET6;
		TAP_OK(ss.ss_family != 0 && idem_http_addr_public(
		    (struct sockaddr *)&ss) == addrs[i].want,
		    "addr_public(%s) = %d", addrs[i].addr, addrs[i].want);
	}
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNIX;
	TAP_OK(idem_http_addr_public((struct sockaddr *)&ss) == 0,
	    "addr_public of another family = 0");
	TAP_OK(idem_http_addr_public(NULL) == 0, "addr_public(NULL) = 0");
}

static void
test_decisions(void)
{
	static const struct {
		int		 code, too_large;
		long		 status;
		enum idem_http_rc want;
	} cls[] = {
		{ CURLE_OK, 0, 200, IDEM_HTTP_OK },
		{ CURLE_OK, 0, 204, IDEM_HTTP_OK },
		{ CURLE_OK, 0, 299, IDEM_HTTP_OK },
		{ CURLE_OK, 0, 302, IDEM_HTTP_STATUS },
		{ CURLE_OK, 0, 422, IDEM_HTTP_STATUS },
		{ CURLE_OK, 0, 503, IDEM_HTTP_STATUS },
		{ CURLE_OK, 0, 0, IDEM_HTTP_BROKEN },
		{ CURLE_COULDNT_CONNECT, 0, 0, IDEM_HTTP_CONNECT },
		{ CURLE_COULDNT_RESOLVE_HOST, 0, 0, IDEM_HTTP_CONNECT },
		{ CURLE_OPERATION_TIMEDOUT, 0, 0, IDEM_HTTP_TIMEOUT },
		{ CURLE_PEER_FAILED_VERIFICATION, 0, 0, IDEM_HTTP_TLS },
		{ CURLE_SSL_CONNECT_ERROR, 0, 0, IDEM_HTTP_TLS },
		{ CURLE_SSL_CACERT_BADFILE, 0, 0, IDEM_HTTP_TLS },
		{ CURLE_WRITE_ERROR, 1, 200, IDEM_HTTP_TOO_LARGE },
		{ CURLE_FILESIZE_EXCEEDED, 0, 200, IDEM_HTTP_TOO_LARGE },
		{ CURLE_GOT_NOTHING, 0, 0, IDEM_HTTP_BROKEN },
		{ CURLE_RECV_ERROR, 0, 0, IDEM_HTTP_BROKEN },
		{ CURLE_WEIRD_SERVER_REPLY, 0, 0, IDEM_HTTP_BROKEN },
		{ CURLE_PARTIAL_FILE, 0, 200, IDEM_HTTP_BROKEN },
		{ CURLE_URL_MALFORMAT, 0, 0, IDEM_HTTP_FAIL },
		{ CURLE_UNSUPPORTED_PROTOCOL, 0, 0, IDEM_HTTP_FAIL },
		{ CURLE_OUT_OF_MEMORY, 0, 0, IDEM_HTTP_FAIL },
	};
	static const struct {
		long long	cap;
		int		deadline;
		long long	left, want;
	} bud[] = {
		{ 5000, 0, 0, 5000 },		/* no deadline: the cap */
		{ 5000, 1, 1200, 1200 },	/* the time left is less */
		{ 5000, 1, 9000, 5000 },	/* the cap is less */
		{ 5000, 1, 0, 0 },		/* no time left: no call */
		{ 5000, 1, -3, 0 },
		{ 0, 0, 0, 0 },			/* no cap: no call */
		{ -1, 1, 100, 0 },
	};
	static const struct {
		const char	*name, *value;
		int		 want;
	} hdr[] = {
		{ "Idempotency-Key", "abc", 1 },
		{ "X-Empty", "", 1 },
		{ "", "v", 0 },
		{ "Bad Name", "v", 0 },
		{ "Bad:Name", "v", 0 },
		{ "X-A", "v\r\nX-Smuggled: 1", 0 },
		{ "X-A", "v\nw", 0 },
		{ "X-A\t", "v", 0 },
		{ NULL, "v", 0 },
		{ "X-A", NULL, 0 },
	};
	size_t	i;

	for (i = 0; i < sizeof(cls) / sizeof(cls[0]); i++)
		TAP_STREQ(idem_http_rc_name(idem_http_classify(cls[i].code,
		    cls[i].too_large, cls[i].status)),
		    idem_http_rc_name(cls[i].want),
		    "classify(curl %d, too_large %d, status %ld)", cls[i].code,
		    cls[i].too_large, cls[i].status);
	for (i = 0; i < sizeof(bud) / sizeof(bud[0]); i++)
		TAP_OK(idem_http_budget_ms(bud[i].cap, bud[i].deadline,
		    bud[i].left) == bud[i].want,
		    "budget(cap %lld, deadline %d, left %lld) = %lld",
		    bud[i].cap, bud[i].deadline, bud[i].left, bud[i].want);
	for (i = 0; i < sizeof(hdr) / sizeof(hdr[0]); i++)
		TAP_OK(idem_http_header_ok(hdr[i].name, hdr[i].value) ==
		    hdr[i].want, "header_ok(%s) = %d", hdr[i].name != NULL ?
		    hdr[i].name : "NULL", hdr[i].want);
	TAP_STREQ(idem_http_rc_name((enum idem_http_rc)99), "unknown",
	    "rc_name of a value out of the enum");
	TAP_STREQ(idem_http_rc_name(IDEM_HTTP_REFUSED), "refused",
	    "rc_name(IDEM_HTTP_REFUSED)");
	test_addrs();
}

static void
test_plain(const struct server *s)
{
	char			 base[64], url[128], err[256];
	idem_http_resp		*r = NULL;
	idem_http		*h;
	idem_json		*j;
	yajl_val		 doc, body;
	enum idem_http_rc	 rc;
	const char		*b;
	size_t			 len;
	long long		 t0, ms;
	int			 i;

	snprintf(base, sizeof(base), "http://127.0.0.1:%d", s->port);

	/* Reuse first, on a server nobody else has talked to yet: two
	 * calls, then the count, on one connection. */
	for (i = 0; i < 2; i++) {
		snprintf(url, sizeof(url), "%s/hello", base);
		rc = call("GET", url, &r);
		TAP_OK(rc == IDEM_HTTP_OK, "GET /hello #%d: ok", i + 1);
		idem_http_resp_free(r);
	}
	snprintf(url, sizeof(url), "%s/connections", base);
	rc = call("GET", url, &r);
	TAP_OK(rc == IDEM_HTTP_OK && json_int(idem_http_resp_json(r),
	    "connections") == 1, "three calls from one thread: the server "
	    "accepted 1 connection");
	idem_http_resp_free(r);

	/* Status, headers, body, JSON. */
	snprintf(url, sizeof(url), "%s/hello", base);
	rc = call("GET", url, &r);
	TAP_OK(rc == IDEM_HTTP_OK, "GET /hello: IDEM_HTTP_OK");
	TAP_OK(idem_http_resp_status(r) == 200, "GET /hello: status 200");
	TAP_STREQ(idem_http_resp_header(r, "x-test"), "yes",
	    "header X-Test, looked up in lower case");
	TAP_STREQ(idem_http_resp_header(r, "Content-Type"),
	    "application/json", "header Content-Type");
	TAP_OK(idem_http_resp_header(r, "X-Absent") == NULL,
	    "an absent header is NULL");
	b = idem_http_resp_body(r, &len);
	TAP_OK(len == 26 && strcmp(b, "{\"hello\": \"world\", \"n\": 3}") == 0,
	    "body, NUL-terminated, with its length");
	doc = idem_http_resp_json(r);
	TAP_OK(json_int(doc, "n") == 3, "body parsed: n = 3");
	TAP_STREQ(json_str(doc, "hello"), "world", "body parsed: hello");
	TAP_OK(idem_http_resp_json(r) == doc, "parsed once");
	idem_http_resp_free(r);

	/* A JSON body from the writer, a header of ours. */
	j = idem_json_new();
	idem_json_object(j);
	idem_json_kint(j, "amount", 1250);
	idem_json_kstr(j, "currency", "EUR");
	idem_json_object_end(j);
	snprintf(url, sizeof(url), "%s/echo", base);
	h = idem_http_new("POST", url);
	TAP_OK(idem_http_json(h, j) == 0, "idem_http_json of a finished "
	    "writer");
	TAP_OK(idem_http_header(h, "X-Custom", "ours") == 0, "a header");
	idem_json_free(j);
	rc = idem_http_send(h, NULL, &r, err, sizeof(err));
	TAP_OK(rc == IDEM_HTTP_OK && idem_http_resp_status(r) == 201,
	    "POST /echo: 201 (%s)", err);
	doc = idem_http_resp_json(r);
	TAP_STREQ(json_str(doc, "method"), "POST", "server saw POST");
	TAP_STREQ(json_str(doc, "content_type"), "application/json",
	    "server saw Content-Type: application/json");
	TAP_STREQ(json_str(doc, "x_custom"), "ours", "server saw X-Custom");
	{
		const char	*p[] = { "body", NULL };

		body = yajl_tree_get(doc, p, yajl_t_object);
	}
	TAP_OK(json_int(body, "amount") == 1250 && json_str(body,
	    "currency") != NULL && strcmp(json_str(body, "currency"), "EUR")
	    == 0, "server got the writer's document");
	idem_http_resp_free(r);
	idem_http_free(h);

	/* An open writer is no body. */
	j = idem_json_new();
	idem_json_object(j);
	h = idem_http_new("POST", url);
	TAP_OK(idem_http_json(h, j) == -1, "idem_http_json of an open "
	    "writer: -1");
	TAP_OK(idem_http_send(h, NULL, &r, NULL, 0) == IDEM_HTTP_FAIL &&
	    r == NULL, "and the request is not sent (IDEM_HTTP_FAIL)");
	idem_json_free(j);
	idem_http_free(h);

	/* A header that would smuggle a second one is refused. */
	h = idem_http_new("GET", url);
	TAP_OK(idem_http_header(h, "X-A", "v\r\nX-B: w") == -1,
	    "a header value with CR LF: -1");
	TAP_OK(idem_http_send(h, NULL, &r, NULL, 0) == IDEM_HTTP_FAIL,
	    "and the request is not sent");
	idem_http_free(h);

	/* Another status: the answer is there, the rc says it. */
	snprintf(url, sizeof(url), "%s/status/422", base);
	rc = call("GET", url, &r);
	TAP_OK(rc == IDEM_HTTP_STATUS && r != NULL &&
	    idem_http_resp_status(r) == 422 &&
	    json_int(idem_http_resp_json(r), "status") == 422,
	    "422: IDEM_HTTP_STATUS with the answer");
	idem_http_resp_free(r);

	/* A timeout within the time given (no request: the handle's own,
	 * as a call outside any request has). */
	snprintf(url, sizeof(url), "%s/slow", base);
	h = idem_http_new("GET", url);
	idem_http_timeout_ms(h, 300);
	t0 = idem_now_us();
	rc = idem_http_send(h, NULL, &r, err, sizeof(err));
	ms = (idem_now_us() - t0) / 1000;
	TAP_OK(rc == IDEM_HTTP_TIMEOUT && r == NULL, "a 5 s answer with "
	    "300 ms: IDEM_HTTP_TIMEOUT (%s)", err);
	TAP_OK(ms >= 280 && ms < 1500, "given up after %lld ms (300 ms "
	    "allowed)", ms);
	TAP_OK(strncmp(err, "timeout: GET ", 13) == 0, "err names the kind "
	    "and the call");
	idem_http_free(h);

	/* Bounded answers, announced and not. */
	snprintf(url, sizeof(url), "%s/big/1000", base);
	h = idem_http_new("GET", url);
	idem_http_max_body(h, 1000);
	rc = idem_http_send(h, NULL, &r, NULL, 0);
	TAP_OK(rc == IDEM_HTTP_OK && (idem_http_resp_body(r, &len), len ==
	    1000), "1000 bytes with a bound of 1000: ok");
	idem_http_resp_free(r);
	idem_http_free(h);
	for (i = 0; i < 2; i++) {
		snprintf(url, sizeof(url), "%s/%s/5000", base,
		    i == 0 ? "big" : "chunked");
		h = idem_http_new("GET", url);
		idem_http_max_body(h, 1000);
		rc = idem_http_send(h, NULL, &r, NULL, 0);
		TAP_OK(rc == IDEM_HTTP_TOO_LARGE && r == NULL, "5000 bytes "
		    "(%s) with a bound of 1000: IDEM_HTTP_TOO_LARGE",
		    i == 0 ? "Content-Length" : "chunked");
		idem_http_free(h);
	}
	snprintf(url, sizeof(url), "%s/big/%u", base,
	    IDEM_HTTP_BODY_MAX_DEFAULT + 1);
	TAP_OK(call("GET", url, &r) == IDEM_HTTP_TOO_LARGE,
	    "1 MiB + 1 with the default bound: IDEM_HTTP_TOO_LARGE");

	/* Not http(s). */
	TAP_OK(call("GET", "file:///etc/passwd", &r) == IDEM_HTTP_FAIL,
	    "a file:// URL: IDEM_HTTP_FAIL");
}

/* One GET on a thread of its own: a thread's first call has no kept-alive
 * connection, so it opens one (or is refused opening it). */
struct job {
	const char		*url;
	int			 allow;		/* -1: the default */
	enum idem_http_rc	 rc;
	long			 status;
	char			 err[256];
	long long		 connections, requests;
};

static void
job_run(struct job *jb)
{
	idem_http	*h = idem_http_new("GET", jb->url);
	idem_http_resp	*r = NULL;

	if (jb->allow != -1)
		idem_http_allow_private(h, jb->allow);
	jb->rc = idem_http_send(h, NULL, &r, jb->err, sizeof(jb->err));
	jb->status = idem_http_resp_status(r);
	jb->connections = json_int(idem_http_resp_json(r), "connections");
	jb->requests = json_int(idem_http_resp_json(r), "requests");
	idem_http_resp_free(r);
	idem_http_free(h);
}

static void *
job_thread(void *arg)
{
	job_run(arg);
	return NULL;
}

static void
job_fresh(struct job *jb)
{
	pthread_t	t;

	if (pthread_create(&t, NULL, job_thread, jb) != 0) {
		jb->rc = IDEM_HTTP_FAIL;
		return;
	}
	pthread_join(t, NULL);
}

/* What the server has seen: (connections, requests), on a fresh thread
 * (its own connection is counted, its request not). */
static void
seen(const char *base, long long *conns, long long *reqs)
{
	char		url[128];
	struct job	jb = { url, -1, 0, 0, "", -1, -1 };

	snprintf(url, sizeof(url), "%s/connections", base);
	job_fresh(&jb);
	*conns = jb.connections;
	*reqs = jb.requests;
}

static void
test_private(const struct server *s)
{
	char		 base[64], lbase[64], u1[128], u2[128], u3[128];
	struct job	 jb;
	long long	 c0, r0, c1, r1;
	idem_http	*h;
	idem_http_resp	*r = NULL;
	const char	*b;

	snprintf(base, sizeof(base), "http://127.0.0.1:%d", s->port);
	snprintf(lbase, sizeof(lbase), "http://localhost:%d", s->port);
	snprintf(u1, sizeof(u1), "%s/hello", base);
	snprintf(u2, sizeof(u2), "%s/hello", lbase);

	/* Refused: an address, then a name resolving to loopback; the
	 * server accepts no connection and reads no request. */
	seen(base, &c0, &r0);
	jb = (struct job){ u1, 0, 0, 0, "", -1, -1 };
	job_fresh(&jb);
	TAP_OK(jb.rc == IDEM_HTTP_REFUSED && jb.status == 0,
	    "allow_private off, 127.0.0.1: IDEM_HTTP_REFUSED (%s)", jb.err);
	TAP_OK(strncmp(jb.err, "refused: GET ", 13) == 0 &&
	    strstr(jb.err, "127.0.0.1 is not a public address") != NULL,
	    "err names the call and the address");
	jb = (struct job){ u2, 0, 0, 0, "", -1, -1 };
	job_fresh(&jb);
	TAP_OK(jb.rc == IDEM_HTTP_REFUSED,
	    "allow_private off, localhost: IDEM_HTTP_REFUSED (%s)", jb.err);
	seen(base, &c1, &r1);
	TAP_OK(c0 > 0 && c1 == c0 + 1 && r1 == r0, "the server saw no "
	    "connection and no request (connections %lld -> %lld, only the "
	    "count's own; requests %lld -> %lld)", c0, c1, r0, r1);

	/* Allowed: the default, and on after off. */
	jb = (struct job){ u1, -1, 0, 0, "", -1, -1 };
	job_fresh(&jb);
	TAP_OK(jb.rc == IDEM_HTTP_OK && jb.status == 200,
	    "by default, 127.0.0.1: 200 (%s)", jb.err);
	h = idem_http_new("GET", u2);
	idem_http_allow_private(h, 0);
	idem_http_allow_private(h, 1);
	TAP_OK(idem_http_send(h, NULL, &r, NULL, 0) == IDEM_HTTP_OK &&
	    idem_http_resp_status(r) == 200, "allow_private on again, "
	    "localhost: 200");
	idem_http_resp_free(r);
	idem_http_free(h);

	/* A connection kept alive by an allowed call is not reused by a
	 * refused one: nothing is sent on it. */
	seen(base, &c0, &r0);
	jb = (struct job){ u1, 1, 0, 0, "", -1, -1 };
	job_run(&jb);				/* this thread: kept alive */
	TAP_OK(jb.rc == IDEM_HTTP_OK, "allowed call, connection kept");
	jb = (struct job){ u1, 0, 0, 0, "", -1, -1 };
	job_run(&jb);
	TAP_OK(jb.rc == IDEM_HTTP_REFUSED, "refused call on the same thread: "
	    "IDEM_HTTP_REFUSED (%s)", jb.err);
	seen(base, &c1, &r1);
	TAP_OK(r1 == r0 + 1, "the server read 1 request, the allowed one "
	    "(%lld -> %lld)", r0, r1);

	/* A redirect is answered as it is, not followed. */
	snprintf(u3, sizeof(u3), "%s/redirect", base);
	seen(base, &c0, &r0);
	h = idem_http_new("GET", u3);
	TAP_OK(idem_http_send(h, NULL, &r, NULL, 0) == IDEM_HTTP_STATUS &&
	    idem_http_resp_status(r) == 302, "a 302: IDEM_HTTP_STATUS, 302");
	TAP_STREQ(idem_http_resp_header(r, "Location"), "/hello",
	    "its Location is there");
	b = idem_http_resp_body(r, NULL);
	TAP_OK(b != NULL && strstr(b, "redirect") != NULL &&
	    strstr(b, "hello") == NULL, "the body is the 302's");
	idem_http_resp_free(r);
	idem_http_free(h);
	seen(base, &c1, &r1);
	TAP_OK(r1 == r0 + 1, "the server read 1 request: /hello was not "
	    "asked for (%lld -> %lld)", r0, r1);

}

static void
test_refused(void)
{
	struct sockaddr_in	 sa;
	socklen_t		 sl = sizeof(sa);
	idem_http		*h;
	idem_http_resp		*r = NULL;
	char			 url[64], err[256];
	int			 fd;

	/* A port bound and not listening: nobody else takes it, and a
	 * connection to it is refused. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == -1) {
		TAP_OK(0, "a port for the refused connection");
		return;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x",
	    ntohs(sa.sin_port));
	h = idem_http_new("POST", url);
	idem_http_body(h, "text/plain", "x", 1);
	TAP_OK(idem_http_send(h, NULL, &r, err, sizeof(err)) ==
	    IDEM_HTTP_CONNECT && r == NULL, "connection refused: "
	    "IDEM_HTTP_CONNECT (%s)", err);
	idem_http_free(h);
	close(fd);
}

static void
test_tls(const char *dir)
{
	struct server	 s;
	char		 cmd[2048], cert[512], key[512], url[128], err[256];
	idem_http	*h;
	idem_http_resp	*r = NULL;

	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(cmd, sizeof(cmd), "openssl req -x509 -newkey ec -pkeyopt "
	    "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 "
	    "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s "
	    ">/dev/null 2>&1", key, cert);
	if (system(cmd) != 0 || server_start(&s, cert, key) == -1) {
		TAP_OK(0, "a self-signed certificate and a TLS server");
		return;
	}
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/hello", s.port);
	h = idem_http_new("GET", url);
	TAP_OK(idem_http_send(h, NULL, &r, err, sizeof(err)) ==
	    IDEM_HTTP_TLS && r == NULL, "self-signed certificate, verified "
	    "by default: IDEM_HTTP_TLS (%s)", err);
	TAP_OK(idem_http_ca_file(h, cert) == 0, "idem_http_ca_file");
	TAP_OK(idem_http_send(h, NULL, &r, err, sizeof(err)) == IDEM_HTTP_OK &&
	    idem_http_resp_status(r) == 200, "the same certificate as the "
	    "CA: 200 over TLS (%s)", err);
	idem_http_resp_free(r);
	idem_http_free(h);
	server_stop(&s);
	unlink(cert);
	unlink(key);
}

int
main(void)
{
	struct server	s;
	char		dir[256];

	signal(SIGPIPE, SIG_IGN);
	test_decisions();
	if (server_start(&s, NULL, NULL) == -1) {
		TAP_OK(0, "start tests/unit/httpd.py");
		return TAP_DONE();
	}
	test_plain(&s);
	test_private(&s);
	server_stop(&s);
	test_refused();
	snprintf(dir, sizeof(dir), "%s/idem-httpclient-XXXXXX",
	    getenv("TMPDIR") != NULL ? getenv("TMPDIR") : P_tmpdir);
	if (mkdtemp(dir) == NULL)
		TAP_OK(0, "a temp dir");
	else {
		test_tls(dir);
		rmdir(dir);
	}
	return TAP_DONE();
}
