/*
 * test_request.c - unit tests for the request boundary outside JSON: the
 * lifetime of idem_req_query() results, the escaping of the access log
 * line, the cache of confirmed API secrets (auth.c), and the CGI head of
 * a response (a 204 without Content-Type nor Content-Length).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yajl/yajl_tree.h>

#include "private.h"
#include "tap.h"

/* Each result stays what it was while others are asked for. */
static void
test_query_lifetime(void)
{
	idem_req	 req;
	const char	*a, *b, *c, *a2, *e;
	char		 q[] = "a=1&b=two%20words&c=%41%42&nul=x%00y&e=";

	memset(&req, 0, sizeof(req));
	req.query = q;
	a = idem_req_query(&req, "a");
	b = idem_req_query(&req, "b");
	c = idem_req_query(&req, "c");
	TAP_STREQ(a, "1", "a is still \"1\" after two more lookups");
	TAP_STREQ(b, "two words", "b is still decoded after another lookup");
	TAP_STREQ(c, "AB", "c decoded");
	a2 = idem_req_query(&req, "a");
	TAP_OK(a2 == a, "asking again returns the same string");
	TAP_OK(idem_req_query(&req, "missing") == NULL, "absent: NULL");
	TAP_STREQ(idem_req_query(&req, "nul"), "", "decoded NUL: refused, \"\"");
	e = idem_req_query(&req, "e");
	TAP_STREQ(e, "", "empty value: \"\"");
	TAP_STREQ(a, "1", "a is still \"1\" at the end");
	TAP_STREQ(b, "two words", "b is still decoded at the end");
	idem_req_query_free(&req);
	TAP_OK(req.qvals == NULL, "the request's results are freed");

	req.query = NULL;
	TAP_OK(idem_req_query(&req, "a") == NULL, "no query: NULL");
}

/* The line is JSON, and the method comes back as it was sent. */
static void
test_log_escaping(void)
{
	static const char *const methods[] = {
		"PO\"ST", "GE\\T", "A\nB", "\x01\x1f", "POST", "{\"x\":1}",
	};
	const char	*path[] = { "method", NULL };
	const char	*rid[] = { "request_id", NULL };
	const char	*tid[] = { "trace_id", NULL };
	idem_req	 req;
	struct idem_buf	 b;
	yajl_val	 doc, v;
	char		 yerr[128];
	size_t		 i;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		memset(&req, 0, sizeof(req));
		memset(&b, 0, sizeof(b));
		snprintf(req.method, sizeof(req.method), "%s", methods[i]);
		strcpy(req.request_id, "0123456789abcdef");
		strcpy(req.trace.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
		req.status = 400;
		req.outcome = IDEM_OUT_REJECTED;
		idem_log_request_line(&req, 1234, &b);
		TAP_OK(b.len > 0 && b.p[b.len - 1] == '\n' &&
		    memchr(b.p, '\n', b.len - 1) == NULL,
		    "method %zu: one line", i);
		idem_buf_nul(&b);
		doc = yajl_tree_parse(b.p, yerr, sizeof(yerr));
		TAP_OK(doc != NULL, "method %zu: the line is JSON (%s)", i,
		    doc == NULL ? yerr : "ok");
		v = doc != NULL ? yajl_tree_get(doc, path, yajl_t_string) :
		    NULL;
		TAP_STREQ(v != NULL ? YAJL_GET_STRING(v) : NULL, methods[i],
		    "method %zu: logged as sent", i);
		v = doc != NULL ? yajl_tree_get(doc, rid, yajl_t_string) : NULL;
		TAP_STREQ(v != NULL ? YAJL_GET_STRING(v) : NULL,
		    "0123456789abcdef", "method %zu: request_id", i);
		v = doc != NULL ? yajl_tree_get(doc, tid, yajl_t_string) : NULL;
		TAP_STREQ(v != NULL ? YAJL_GET_STRING(v) : NULL,
		    "4bf92f3577b34da6a3ce929d0e0e4736", "method %zu: trace_id", i);
		if (doc != NULL)
			yajl_tree_free(doc);
		idem_buf_free(&b);
	}
}

/* The numbers of a request line, written without printf, read back as
 * printf would have written them; the time as ISO 8601 UTC. */
static void
test_log_numbers(void)
{
	static const struct {
		int		 status;
		long long	 us;
		unsigned	 trips;
		int64_t		 tenant;
		const char	*want[3];
	} t[] = {
		{ 201, 1234, 2, 7, { "\"status\":201,", "\"duration_ms\":1.234,",
		    "\"db_round_trips\":2,\"tenant\":7}" } },
		{ 400, 5, 0, 0, { "\"status\":400,", "\"duration_ms\":0.005,",
		    "\"outcome\":\"rejected\"}" } },
		{ 503, 0, 1, 0, { "\"status\":503,", "\"duration_ms\":0.000,",
		    "\"db_round_trips\":1}" } },
		{ 200, 999999, 10, 9007199254740993LL, { "\"duration_ms\":999.999,",
		    "\"db_round_trips\":10,",
		    "\"tenant\":9007199254740993}" } },
		{ 409, 1000000, 0, 1, { "\"duration_ms\":1000.000,",
		    "\"status\":409,", "\"tenant\":1}" } },
	};
	const char	*tp[] = { "time", NULL };
	const char	*ts;
	idem_req	 req;
	struct idem_buf	 b;
	yajl_val	 doc, v;
	struct tm	 now;
	time_t		 clock;
	size_t		 i, j;
	int		 y, mo, d, h, mi, se, ms, n;
	char		 z;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memset(&req, 0, sizeof(req));
		memset(&b, 0, sizeof(b));
		strcpy(req.method, "POST");
		strcpy(req.request_id, "0123456789abcdef");
		req.status = t[i].status;
		req.round_trips = t[i].trips;
		req.tenant = t[i].tenant;
		req.outcome = IDEM_OUT_REJECTED;
		clock = time(NULL);
		idem_log_request_line(&req, t[i].us, &b);
		idem_buf_nul(&b);
		for (j = 0; j < 3; j++)
			TAP_OK(strstr(b.p, t[i].want[j]) != NULL, "line %zu "
			    "has %s: %s", i, t[i].want[j], b.p);
		doc = yajl_tree_parse(b.p, NULL, 0);
		v = doc != NULL ? yajl_tree_get(doc, tp, yajl_t_string) : NULL;
		ts = v != NULL ? YAJL_GET_STRING(v) : NULL;
		n = ts == NULL ? 0 : sscanf(ts,
		    "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &se,
		    &ms, &z);
		gmtime_r(&clock, &now);
		TAP_OK(n == 8 && z == 'Z' && strlen(ts) == 24 &&
		    y == now.tm_year + 1900 && mo >= 1 && mo <= 12 &&
		    ms >= 0 && ms <= 999, "line %zu: time %s", i,
		    ts != NULL ? ts : "(none)");
		if (doc != NULL)
			yajl_tree_free(doc);
		idem_buf_free(&b);
	}
}

/* idem_fmt_int writes what snprintf "%lld" writes. */
static void
test_fmt_int(void)
{
	static const long long	 v[] = { 0, 7, -7, 10, 1234, -100000,
	    9007199254740993LL, LLONG_MAX, LLONG_MIN };
	char			 got[IDEM_INT_LEN], want[32];
	size_t			 i, n;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		n = idem_fmt_int(got, v[i]);
		snprintf(want, sizeof(want), "%lld", v[i]);
		TAP_OK(strcmp(got, want) == 0 && n == strlen(want),
		    "idem_fmt_int(%s) -> %s", want, got);
	}
}

/* What one slot says about a secret's hash at a given time. */
static void
test_authc_state(void)
{
	static const unsigned char	 h1[32] = { 1, 2, 3 }, h2[32] = { 9 };
	static const struct {
		const unsigned char	*slot_hash;
		int64_t			 tenant;
		long long		 expires, now;
		const unsigned char	*asked;
		enum idem_authc_state	 want;
		const char		*what;
	} t[] = {
		{ h1, 0, 0, 0, h1, IDEM_AUTHC_ABSENT, "empty slot" },
		{ h1, 0, 5000, 10, h1, IDEM_AUTHC_ABSENT,
		    "no tenant: empty, whatever the time" },
		{ h1, 7, 5000, 10, h1, IDEM_AUTHC_FRESH, "same hash, in time" },
		{ h1, 7, 5000, 4999, h1, IDEM_AUTHC_FRESH, "1 ms before" },
		{ h1, 7, 5000, 5000, h1, IDEM_AUTHC_STALE, "at the expiry" },
		{ h1, 7, 5000, 90000, h1, IDEM_AUTHC_STALE, "long after" },
		{ h1, 7, 5000, 10, h2, IDEM_AUTHC_ABSENT, "another secret's" },
		{ h2, 7, 5000, 10, h1, IDEM_AUTHC_ABSENT, "another's, reversed" },
	};
	struct idem_authc_entry	 e;
	size_t			 i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memcpy(e.hash, t[i].slot_hash, 32);
		e.tenant = t[i].tenant;
		e.expires_ms = t[i].expires;
		TAP_OK(idem_authc_state(&e, t[i].asked, t[i].now) == t[i].want,
		    "authc state: %s", t[i].what);
	}
}

/* put / get / forget through the cache itself. */
static void
test_authc_cache(void)
{
	unsigned char		 h[32], other[32];
	struct idem_authc	*c;
	long long		 t0 = 1000000;

	memset(h, 0xab, sizeof(h));
	memcpy(other, h, sizeof(other));
	other[31] ^= 1;		/* same slot, another secret */
	if ((c = idem_authc_new()) == NULL) {
		TAP_OK(0, "idem_authc_new");
		return;
	}
	TAP_OK(idem_authc_get(c, h, t0) == IDEM_AUTHC_ABSENT, "new: absent");
	idem_authc_put(c, h, 42, t0);
	TAP_OK(idem_authc_get(c, h, t0 + 1) == IDEM_AUTHC_FRESH,
	    "put: fresh");
	TAP_OK(idem_authc_get(c, h, t0 + IDEM_AUTH_CACHE_MS - 1) ==
	    IDEM_AUTHC_FRESH, "fresh until the expiry");
	TAP_OK(idem_authc_get(c, h, t0 + IDEM_AUTH_CACHE_MS) ==
	    IDEM_AUTHC_STALE, "stale IDEM_AUTH_CACHE_MS after confirmation");
	TAP_OK(idem_authc_get(c, other, t0 + 1) == IDEM_AUTHC_ABSENT,
	    "another secret in the same slot is not taken for it");
	/* An older confirmation does not shorten a newer one. */
	idem_authc_put(c, h, 42, t0 + 3000);
	idem_authc_put(c, h, 42, t0);
	TAP_OK(idem_authc_get(c, h, t0 + IDEM_AUTH_CACHE_MS + 10) ==
	    IDEM_AUTHC_FRESH, "the later confirmation's expiry wins");
	idem_authc_forget(c, other);
	TAP_OK(idem_authc_get(c, h, t0 + 1) == IDEM_AUTHC_FRESH,
	    "forgetting another secret leaves it");
	idem_authc_forget(c, h);
	TAP_OK(idem_authc_get(c, h, t0 + 1) == IDEM_AUTHC_ABSENT,
	    "forget: absent at once (revocation seen by flight 1)");
	idem_authc_put(c, h, 0, t0);
	TAP_OK(idem_authc_get(c, h, t0 + 1) == IDEM_AUTHC_ABSENT,
	    "tenant 0 is never cached");
	idem_authc_free(c);

	/* No cache (out of memory at start): always ask the database. */
	TAP_OK(idem_authc_get(NULL, h, t0) == IDEM_AUTHC_ABSENT,
	    "no cache: absent");
	idem_authc_put(NULL, h, 1, t0);
	idem_authc_forget(NULL, h);
}

/* What idem_resp_body() accepts, and the head idem_resp_write() makes. */
static void
test_resp_head(void)
{
	static const struct {
		int		 status;
		const char	*ctype, *body;
		int		 rc;
		const char	*head;	/* the CGI output, NULL when refused */
	} t[] = {
		{ 200, "application/json", "{}", 0, "Status: 200 OK\r\n"
		  "Content-Type: application/json\r\nContent-Length: 2\r\n"
		  "\r\n{}" },
		{ 204, NULL, "", 0, "Status: 204 No Content\r\n\r\n" },
		{ 204, "text/plain", "", 0, "Status: 204 No Content\r\n\r\n" },
		{ 204, NULL, "x", -1, NULL },
		{ 200, NULL, "", -1, NULL },
		{ 200, "a\r\nb", "", -1, NULL },
		{ 99, "text/plain", "", -1, NULL },
	};
	idem_req	 req;
	struct idem_buf	 b;
	size_t		 i;
	int		 rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memset(&req, 0, sizeof(req));
		strcpy(req.method, "GET");
		memset(&b, 0, sizeof(b));
		rc = idem_resp_body(&req, t[i].status, t[i].ctype, t[i].body,
		    strlen(t[i].body));
		TAP_OK(rc == t[i].rc, "idem_resp_body, case %lu (status %d, "
		    "%lu bytes): %d", (unsigned long)i, t[i].status,
		    (unsigned long)strlen(t[i].body), t[i].rc);
		if (t[i].head != NULL) {
			TAP_OK(idem_resp_write(&req, &b) == 0, "  written");
			TAP_STREQ(b.p != NULL ? b.p : "", t[i].head, "  head");
		}
		idem_buf_free(&b);
		idem_resp_reset(&req);
		idem_buf_free(&req.resp);
	}
}

int
main(void)
{
	test_resp_head();
	test_query_lifetime();
	test_log_escaping();
	test_log_numbers();
	test_fmt_int();
	test_authc_state();
	test_authc_cache();
	return TAP_DONE();
}
