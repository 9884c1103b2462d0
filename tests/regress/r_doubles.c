/*
 * r_doubles.c - libidem_test's test doubles, linked as a user's test
 * links them: the HTTP stub (idem_test_http) answering a handler's
 * idem_http calls as scripted (status, headers, body, a delay, no answer,
 * a closed connection, the default), recording each request (method,
 * target, headers, body, a chunked one decoded) with the caller's trace;
 * the outbox view (idem_test_events) of an event and its delivery, made
 * by a dispatcher's run (idem_test_deliver) to the stub; the
 * application's log lines sent to a callback or a file instead of stderr.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idem_test.h"
#include "tap.h"
#include "userconf.h"

#define TRACE		"0af7651916cd43dd8448eb211c80319c"
#define TRACEPARENT	"00-" TRACE "-b7ad6b7169203331-01"

static struct idem_test_http	*stub;

/* POST /call: one call to the stub; the outcome as text. */
static int
call(idem_req *req, void *arg)
{
	char		 url[128], out[512], err[256];
	idem_http	*h;
	idem_http_resp	*resp = NULL;
	enum idem_http_rc rc;
	const char	*x;

	(void)arg;
	snprintf(url, sizeof(url), "%s/svc/thing?q=1", idem_test_http_url(stub));
	if ((h = idem_http_new("POST", url)) == NULL ||
	    idem_http_header(h, "X-Case", "  spaced  ") == -1 ||
	    idem_http_body(h, "application/json", "{\"n\":1}", 7) == -1)
		return -1;
	idem_http_timeout_ms(h, 1000);
	rc = idem_http_send(h, req, &resp, err, sizeof(err));
	x = resp != NULL ? idem_http_resp_header(resp, "X-Reply") : NULL;
	snprintf(out, sizeof(out), "%s %d %s %s", idem_http_rc_name(rc),
	    resp != NULL ? idem_http_resp_status(resp) : 0, x ? x : "-",
	    resp != NULL ? idem_http_resp_body(resp, NULL) : "-");
	idem_http_resp_free(resp);
	idem_http_free(h);
	return idem_resp_body(req, 200, "text/plain", out, strlen(out));
}

/* POST /things (idempotent): an endpoint at the stub, an event. */
static int
things(idem_req *req, void *arg)
{
	const char *const	types[] = { "thing.done" };
	char			url[128], secret[128];
	int64_t			id;

	(void)arg;
	snprintf(url, sizeof(url), "%s/hook", idem_test_http_url(stub));
	if (idem_req_endpoint_create(req, url, types, 1, &id, secret,
	    sizeof(secret)) != IDEM_ENDPOINT_CREATED ||
	    idem_req_enqueue(req, "thing.done", "{\"n\":7}", 7, NULL, 0) == -1)
		return -1;
	return idem_resp_body(req, 201, "application/json", "{}", 2);
}

/* GET /log: a line of the handler's. */
static int
logs(idem_req *req, void *arg)
{
	(void)arg;
	idem_req_log(req, IDEM_LOG_WARN, "r_doubles: from the handler");
	return idem_resp_body(req, 200, "text/plain", "", 0);
}

static struct {
	char	text[8192];
	int	lines;
} got;

static void
collect(void *arg, const char *line, size_t len)
{
	(void)arg;
	got.lines++;
	strncat(got.text, line, len < sizeof(got.text) - strlen(got.text) - 1 ?
	    len : sizeof(got.text) - strlen(got.text) - 1);
}

/* One request through the harness; its body (static), or a bail out. */
static const char *
req(struct idem_test *t, const char *method, const char *path,
    const char *key, long long *ms)
{
	static char		 body[1024];
	struct idem_test_resp	*r;
	struct timespec		 a, b;
	char			 kh[96];
	const char		*hs[] = { "traceparent: " TRACEPARENT, kh, NULL };

	snprintf(kh, sizeof(kh), "Idempotency-Key: %s", key ? key : "none");
	if (key == NULL)
		hs[1] = NULL;
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (idem_test_request(t, method, path, hs, method[0] == 'P' ? "{}" :
	    NULL, &r) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		exit(1);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (ms != NULL)
		*ms = (b.tv_sec - a.tv_sec) * 1000LL +
		    (b.tv_nsec - a.tv_nsec) / 1000000;
	snprintf(body, sizeof(body), "%d %s", idem_test_status(r),
	    idem_test_body(r, NULL));
	idem_test_response_free(r);
	return body;
}

/* A chunked POST written by hand (idem_http sends Content-Length). */
static int
chunked_post(const char *url)
{
	static const char	 rq[] = "POST /chunked HTTP/1.1\r\nHost: x\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
	struct sockaddr_in	 sin;
	char			 buf[512];
	int			 fd, rc = -1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((unsigned short)atoi(strrchr(url, ':') + 1));
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    write(fd, rq, sizeof(rq) - 1) == (ssize_t)sizeof(rq) - 1 &&
	    read(fd, buf, sizeof(buf)) > 0)
		rc = 0;
	close(fd);
	return rc;
}

static void
stub_tests(struct idem_test *t)
{
	const char *const	 hdr[] = { "X-Reply: yes", NULL };
	const char *const	 bad[] = { "no colon", NULL };
	long long		 ms;
	size_t			 n;

	TAP_OK(strncmp(idem_test_http_url(stub), "http://127.0.0.1:", 17) == 0,
	    "the stub's URL: %s", idem_test_http_url(stub));
	TAP_STREQ(req(t, "POST", "/call", NULL, NULL),
	    "200 status 500 - idem_test_http: no answer scripted\n",
	    "nothing scripted: the default, a 500 saying so");
	TAP_OK(idem_test_http_push(stub, &(struct idem_test_http_answer){
	    .status = 42 }) == -1 && idem_test_http_push(stub,
	    &(struct idem_test_http_answer){ .status = 200, .headers = bad }) ==
	    -1, "a bad status or header line is refused");
	idem_test_http_push(stub, &(struct idem_test_http_answer){
	    .status = 201, .headers = hdr, .body = "made" });
	TAP_STREQ(req(t, "POST", "/call", NULL, NULL), "200 ok 201 yes made",
	    "scripted: its status, header and body");
	n = idem_test_http_count(stub);
	TAP_OK(n == 2 && strcmp(idem_test_http_method(stub, 1), "POST") == 0 &&
	    strcmp(idem_test_http_path(stub, 1), "/svc/thing?q=1") == 0 &&
	    strcmp(idem_test_http_body(stub, 1, NULL), "{\"n\":1}") == 0,
	    "recorded: the method, the target with its query, the body");
	TAP_STREQ(idem_test_http_header(stub, 1, "x-case"), "spaced",
	    "a header asked in any case, blanks around its value cut");
	TAP_OK(idem_test_http_header(stub, 1, "traceparent") != NULL &&
	    strncmp(idem_test_http_header(stub, 1, "traceparent"),
	    "00-" TRACE "-", 36) == 0 && strcmp(idem_test_http_header(stub, 1,
	    "traceparent"), TRACEPARENT) != 0,
	    "the call carries the request's trace id, a span of its own");
	TAP_OK(idem_test_http_method(stub, 2) == NULL &&
	    idem_test_http_header(stub, 1, "X-None") == NULL,
	    "out of range, or no such header: NULL");

	idem_test_http_push(stub, &(struct idem_test_http_answer){
	    .status = 200, .body = "late", .delay_ms = 300 });
	TAP_STREQ(req(t, "POST", "/call", NULL, &ms), "200 ok 200 - late",
	    "a delayed answer arrives");
	TAP_OK(ms >= 300, "... after its delay (%lld ms)", ms);
	idem_test_http_push(stub, &(struct idem_test_http_answer){
	    .action = IDEM_TEST_HTTP_SILENT });
	TAP_STREQ(req(t, "POST", "/call", NULL, &ms), "200 timeout 0 - -",
	    "no answer: the client's timeout");
	TAP_OK(ms >= 1000 && idem_test_http_count(stub) == 4,
	    "... after 1 s (%lld ms), the request recorded", ms);
	idem_test_http_push(stub, &(struct idem_test_http_answer){
	    .action = IDEM_TEST_HTTP_CLOSE });
	TAP_OK(strncmp(req(t, "POST", "/call", NULL, NULL), "200 status", 10)
	    != 0 && strncmp(req(t, "POST", "/call", NULL, NULL),
	    "200 status 500", 14) == 0, "a closed connection: no answer; the "
	    "queue empty again, the default");
	TAP_OK(chunked_post(idem_test_http_url(stub)) == 0 &&
	    idem_test_http_wait(stub, 7, 5000) == 0 &&
	    strcmp(idem_test_http_body(stub, 6, &n), "abcde") == 0 && n == 5,
	    "a chunked body, decoded, awaited with idem_test_http_wait");
	TAP_OK(idem_test_http_wait(stub, 8, 100) == -1,
	    "waiting for a request that does not come: -1");
}

static void
events_tests(struct idem_test *t)
{
	struct idem_test_events	*ev;
	char			 url[128];
	size_t			 n;

	TAP_OK(strncmp(req(t, "POST", "/things", "thing-1", NULL), "201", 3)
	    == 0, "an endpoint and an event made");
	if (idem_test_events(t, &ev) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		exit(1);
	}
	snprintf(url, sizeof(url), "%s/hook", idem_test_http_url(stub));
	TAP_OK(idem_test_events_count(ev) == 1 &&
	    strcmp(idem_test_event_type(ev, 0), "thing.done") == 0 &&
	    strncmp(idem_test_event_id(ev, 0), "evt_", 4) == 0 &&
	    strstr(idem_test_event_body(ev, 0), "\"data\":{\"n\":7}") != NULL,
	    "idem_test_events: the event, its type, id and body");
	TAP_OK(strncmp(idem_test_event_traceparent(ev, 0), "00-" TRACE "-",
	    36) == 0, "... its traceparent, the request's trace");
	TAP_OK(idem_test_event_deliveries(ev, 0) == 1 &&
	    strcmp(idem_test_delivery_url(ev, 0, 0), url) == 0 &&
	    strcmp(idem_test_delivery_state(ev, 0, 0), "pending") == 0 &&
	    idem_test_delivery_attempts(ev, 0, 0) == 0 &&
	    idem_test_delivery_status(ev, 0, 0) == 0,
	    "... its delivery to the endpoint, pending, no attempt yet");
	TAP_OK(idem_test_event_type(ev, 1) == NULL &&
	    idem_test_delivery_state(ev, 0, 1) == NULL,
	    "out of range: NULL");

	/* The dispatcher's run: the stub receives the webhook. */
	n = idem_test_http_count(stub);
	idem_test_http_push(stub, &(struct idem_test_http_answer){
	    .status = 204 });
	TAP_OK(idem_test_deliver(t, 0) == 1 && idem_test_http_count(stub) ==
	    n + 1 && strcmp(idem_test_http_path(stub, n), "/hook") == 0,
	    "idem_test_deliver: one delivery, POSTed to the stub's /hook");
	TAP_STREQ(idem_test_http_header(stub, n, "webhook-id"),
	    idem_test_event_id(ev, 0), "... under the event's id");
	TAP_STREQ(idem_test_http_header(stub, n, "traceparent"),
	    idem_test_event_traceparent(ev, 0),
	    "... with the event's traceparent");
	TAP_OK(strcmp(idem_test_http_body(stub, n, NULL),
	    idem_test_event_body(ev, 0)) == 0, "... and its body");
	idem_test_events_free(ev);
	if (idem_test_events(t, &ev) == -1)
		exit(1);
	TAP_OK(strcmp(idem_test_delivery_state(ev, 0, 0), "delivered") == 0 &&
	    idem_test_delivery_attempts(ev, 0, 0) == 1 &&
	    idem_test_delivery_status(ev, 0, 0) == 204,
	    "... recorded delivered: 1 attempt, 204");
	idem_test_events_free(ev);
	TAP_OK(idem_test_deliver(t, 0) == 0 && idem_test_http_count(stub) ==
	    n + 1, "nothing due: nothing delivered");
	req(t, "POST", "/things", "thing-1", NULL);
	if (idem_test_events(t, &ev) == -1)
		exit(1);
	TAP_OK(idem_test_events_count(ev) == 1,
	    "the request replayed: still one event");
	idem_test_events_free(ev);
}

static void
log_tests(struct idem_test *t)
{
	FILE	*f = tmpfile();
	char	 line[2048];
	int	 found = 0;
	long	 size;

	idem_test_log_callback(collect, NULL);
	req(t, "GET", "/log", NULL, NULL);
	TAP_OK(strstr(got.text, "r_doubles: from the handler") != NULL &&
	    strstr(got.text, "\"trace_id\":\"" TRACE "\"") != NULL &&
	    got.lines >= 1, "log lines to a callback, line by line (%d), "
	    "with the trace id", got.lines);
	idem_test_log_file(f);
	req(t, "GET", "/log", NULL, NULL);
	rewind(f);
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		found += strstr(line, "r_doubles: from the handler") != NULL;
	TAP_OK(found == 1, "... or to a file (%d lines of the handler's)",
	    found);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	idem_test_log_file(NULL);
	got.lines = 0;
	req(t, "GET", "/log", NULL, NULL);
	fseek(f, 0, SEEK_END);
	TAP_OK(got.lines == 0 && ftell(f) == size, "... or nowhere");
	idem_test_log_file(stderr);
	if (f != NULL)
		fclose(f);
}

int
main(void)
{
	const char		*conninfo = userconf_conninfo();
	struct idem_test	*t;
	idem_app		*app;
	char			 conf[256], err[256];

	userconf_write(conf, sizeof(conf), "doubles", "[server]\nthreads = 2\n"
	    "log_level = info\n[database]\nconninfo = %s\npool_size = 2\n"
	    "[webhooks]\nallow_private = on\n", conninfo);
	if ((stub = idem_test_http_new(err, sizeof(err))) == NULL) {
		printf("Bail out! idem_test_http_new: %s\n", err);
		return 1;
	}
	if ((app = idem_app_new("r_doubles")) == NULL)
		return 1;
	idem_app_route(app, "POST", "/call", IDEM_ROUTE_PUBLIC, call, NULL);
	idem_app_route(app, "POST", "/things", IDEM_ROUTE_IDEMPOTENT, things,
	    NULL);
	idem_app_route(app, "GET", "/log", IDEM_ROUTE_PUBLIC, logs, NULL);
	if ((t = idem_test_new(app, conf, err, sizeof(err))) == NULL) {
		printf("Bail out! idem_test_new: %s\n", err);
		return 1;
	}
	stub_tests(t);
	events_tests(t);
	log_tests(t);
	idem_test_free(t);
	idem_app_free(app);
	idem_test_http_free(stub);
	unlink(conf);
	return TAP_DONE();
}
