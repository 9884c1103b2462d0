/*
 * r_harness.c - libidem_test (idem_test(3)) itself, linked as a user's
 * test links it: the 404 problem of an unknown route with its headers
 * retrievable in any case, request headers and the query string as the
 * handler sees them, bodies larger than a FastCGI record and than the
 * socket's buffer both ways, the 413 refused on its announced length, the
 * harness's key as the handler's tenant, a wrong key's 401, threads
 * sharing one harness, and the harness's own errors (a bad header line,
 * a refused configuration).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idem_test.h"
#include "tap.h"
#include "userconf.h"

#define BIG	(300 * 1024)	/* over a record (64 KiB) and a socket buffer */
/* The harness's configuration: the conninfo, then more lines. */
#define CONF	"[server]\nthreads = 2\nlog_level = error\n[database]\n" \
	"conninfo = %s\npool_size = 2\n%s"

/* How often echo ran: the 413 below must not reach it. */
static int echo_calls;

static int
echo(idem_req *req, void *arg)
{
	const char	*b, *h = idem_req_header(req, "X-Test"),
			*q = idem_req_query(req, "q");
	size_t		 len;

	(void)arg;
	__atomic_add_fetch(&echo_calls, 1, __ATOMIC_SEQ_CST);
	b = idem_req_body(req, &len);
	/* The body first: idem_resp_body() starts the response afresh. */
	if (idem_resp_body(req, 200, "text/plain", b, len) == -1)
		return -1;
	return idem_resp_header(req, "X-Seen", h ? h : "(none)") |
	    idem_resp_header(req, "X-Query", q ? q : "(none)");
}

static int
me(idem_req *req, void *arg)
{
	char	buf[32];

	(void)arg;
	snprintf(buf, sizeof(buf), "%lld", (long long)idem_req_tenant(req));
	return idem_resp_body(req, 200, "text/plain", buf, strlen(buf));
}

/* Several threads on one harness, as a test of a race would use it. */
#define RACERS	4
#define ROUNDS	10

static void *
racer(void *arg)
{
	struct idem_test	*t = arg;
	struct idem_test_resp	*r;
	long			 good = 0;
	int			 i;

	for (i = 0; i < ROUNDS; i++) {
		if (idem_test_request(t, "GET", "/me", NULL, NULL, &r) == 0 &&
		    idem_test_status(r) == 200)
			good++;
		idem_test_response_free(r);
	}
	return (void *)good;
}

int
main(void)
{
	const char		*conninfo = userconf_conninfo();
	struct idem_test	*t;
	struct idem_test_resp	*r;
	idem_app		*app, *bad;
	char			 conf[256], badconf[256], err[256], tenant[32];
	char			 auth[128];
	char			*big;
	int			 calls;
	const char		*b;
	size_t			 len;

	userconf_write(conf, sizeof(conf), "harness", CONF, conninfo, "");
	userconf_write(badconf, sizeof(badconf), "harness", CONF, conninfo,
	    "[nosuch]\nkey = 1\n");

	/* A configuration the program would refuse, the harness refuses. */
	if ((bad = idem_app_new("r_harness")) == NULL)
		return 1;
	err[0] = '\0';
	TAP_OK(idem_test_new(bad, badconf, err, sizeof(err)) == NULL &&
	    strstr(err, "configuration is refused") != NULL,
	    "a refused configuration: NULL, the reason in err (%s)", err);
	idem_app_free(bad);

	if ((app = idem_app_new("r_harness")) == NULL)
		return 1;
	idem_app_route(app, "POST", "/echo", IDEM_ROUTE_PUBLIC, echo, NULL);
	idem_app_route(app, "GET", "/me", 0, me, NULL);
	if ((t = idem_test_new(app, conf, err, sizeof(err))) == NULL) {
		printf("Bail out! idem_test_new: %s\n", err);
		return 1;
	}

	if (idem_test_request(t, "GET", "/nope", NULL, NULL, &r) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		return 1;
	}
	TAP_OK(idem_test_status(r) == 404, "an unknown route -> 404 (%d)",
	    idem_test_status(r));
	TAP_STREQ(idem_test_header(r, "content-type"),
	    "application/problem+json", "its Content-Type, asked in lower case");
	TAP_OK(idem_test_header(r, "Status") != NULL &&
	    strncmp(idem_test_header(r, "Status"), "404", 3) == 0,
	    "its Status line is a header too");
	TAP_OK(idem_test_header(r, "X-Absent") == NULL,
	    "an absent header is NULL");
	b = idem_test_body(r, &len);
	TAP_OK(b != NULL && len == strlen(b) &&
	    strstr(b, "\"type\":\"/problems/not-found\"") != NULL,
	    "its body is the not-found problem, len the body's");
	idem_test_response_free(r);

	/* Both ways larger than a record and than the socket's buffer. */
	if ((big = malloc(BIG + 1)) == NULL)
		return 1;
	for (len = 0; len < BIG; len++)
		big[len] = (char)('a' + len % 26);
	big[BIG] = '\0';
	r = NULL;
	TAP_OK(idem_test_request(t, "POST", "/echo?q=x%20y", (const char *const[])
	    { "X-Test: hello there", "Content-Type: text/plain", NULL }, big,
	    &r) == 0 && idem_test_status(r) == 200,
	    "POST of %d bytes -> 200", BIG);
	b = r ? idem_test_body(r, &len) : NULL;
	TAP_OK(b != NULL && len == BIG && memcmp(b, big, BIG) == 0,
	    "... its body echoed whole (%zu bytes)", r ? len : 0);
	TAP_STREQ(r ? idem_test_header(r, "X-Seen") : NULL, "hello there",
	    "a request header reaches the handler");
	TAP_STREQ(r ? idem_test_header(r, "X-Query") : NULL, "x y",
	    "the query string reaches the handler");
	idem_test_response_free(r);

	/* Over max_body (1 MiB): refused on its announced length, before
	 * the body is looked at: the problem says the limit, and the handler
	 * never runs. */
	free(big);
	if ((big = malloc(2 * 1024 * 1024 + 1)) == NULL)
		return 1;
	memset(big, 'z', 2 * 1024 * 1024);
	big[2 * 1024 * 1024] = '\0';
	r = NULL;
	calls = __atomic_load_n(&echo_calls, __ATOMIC_SEQ_CST);
	TAP_OK(idem_test_request(t, "POST", "/echo", NULL, big, &r) == 0 &&
	    idem_test_status(r) == 413, "a body over max_body -> 413 (%d)",
	    r ? idem_test_status(r) : -1);
	b = r ? idem_test_body(r, NULL) : NULL;
	TAP_OK(b != NULL &&
	    strstr(b, "\"type\":\"/problems/payload-too-large\"") != NULL &&
	    strstr(b, "request body is larger than 1048576 bytes") != NULL &&
	    __atomic_load_n(&echo_calls, __ATOMIC_SEQ_CST) == calls,
	    "... refused on its Content-Length (the detail names the limit), "
	    "the handler not run: %s", b ? b : "(no body)");
	idem_test_response_free(r);
	free(big);

	snprintf(tenant, sizeof(tenant), "%lld",
	    (long long)idem_test_tenant(t));
	r = NULL;
	TAP_OK(idem_test_request(t, "GET", "/me", NULL, NULL, &r) == 0 &&
	    idem_test_status(r) == 200 &&
	    strcmp(idem_test_body(r, NULL), tenant) == 0,
	    "the harness's key authenticates: the handler's tenant is "
	    "idem_test_tenant()");
	idem_test_response_free(r);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
	    idem_test_secret(t));
	r = NULL;
	TAP_OK(strncmp(idem_test_secret(t), "sk_", 3) == 0 &&
	    idem_test_request(t, "GET", "/me", (const char *const[])
	    { auth, NULL }, NULL, &r) == 0 && idem_test_status(r) == 200 &&
	    strcmp(idem_test_body(r, NULL), tenant) == 0,
	    "idem_test_secret() is the key's secret: sent by hand, it "
	    "authenticates as idem_test_tenant()");
	idem_test_response_free(r);

	r = NULL;
	TAP_OK(idem_test_request(t, "GET", "/me", (const char *const[])
	    { "Authorization: Bearer sk_wrong", NULL }, NULL, &r) == 0 &&
	    idem_test_status(r) == 401,
	    "an Authorization header replaces the harness's: 401");
	idem_test_response_free(r);

	{
		pthread_t	th[RACERS];
		void		*good;
		long		 total = 0;
		int		 i, started = 0;

		for (i = 0; i < RACERS; i++)
			if (pthread_create(&th[i], NULL, racer, t) == 0)
				started++;
		for (i = 0; i < started; i++)
			if (pthread_join(th[i], &good) == 0)
				total += (long)good;
		TAP_OK(started == RACERS && total == RACERS * ROUNDS,
		    "%d threads at once on one harness: %ld of %d answered 200",
		    RACERS, total, RACERS * ROUNDS);
	}

	r = (struct idem_test_resp *)1;
	TAP_OK(idem_test_request(t, "GET", "/me", (const char *const[])
	    { "no colon here", NULL }, NULL, &r) == -1 && r == NULL &&
	    strstr(idem_test_error(t), "not a header line") != NULL,
	    "a header line without a colon: -1, *resp NULL, the reason");

	idem_test_free(t);
	idem_app_free(app);
	unlink(conf);
	unlink(badconf);
	return TAP_DONE();
}
