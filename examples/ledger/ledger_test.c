/*
 * ledger_test.c - the ledger example's tests, written with libidem_test:
 * each request goes through ledger's routes, both phases, the idempotency
 * middleware and a real PostgreSQL, in this process.  TAP on stdout, the
 * application's log lines in a file this test reads (idem_test_log_file).
 * The fraud service ([ledger] fraud_url) is libidem_test's HTTP stub
 * (idem_test_http(3)): it allows, unless told to refuse or drop a call;
 * the events the transfers enqueued are read with idem_test_events(3),
 * and delivered (idem_test_deliver) to a second stub, the endpoint the
 * tenant subscribed through the library's POST /v1/webhook_endpoints.
 *
 * Build: make test (cc -DLEDGER_NO_MAIN ledger.c ledger_test.c with
 *        pkg-config idem-test)
 * Run:   ./ledger_test [config]   the config file as ledger's -c takes it
 *        (none: libpq's PG* variables); the database holds libidem's
 *        schema and ledger.sql.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <idem_admin.h>	/* idem_db_open */
#include <idem_test.h>

idem_app	*ledger_app(void);	/* ledger.c */

static struct idem_test		*t;
static struct idem_test_http	*fraud, *hooks;
static PGconn			*db;
static int			 n, failed;

/* The trace the transfers are sent under (W3C traceparent). */
#define TRACE		"4bf92f3577b34da6a3ce929d0e0e4736"
#define TRACEPARENT	"00-" TRACE "-00f067aa0ba902b7-01"

static const char *const json_type[] = {
	"Content-Type: application/json", NULL };

static void
ok(int cond, const char *what)
{
	printf("%sok %d - %s\n", cond ? "" : "not ", ++n, what);
	failed += !cond;
}

/* POST /v1/transfers with an Idempotency-Key, or a bail out. */
static struct idem_test_resp *
transfer(const char *key, const char *body)
{
	struct idem_test_resp	*r;
	char			 h[128];
	const char		*hdr[] = { h, "traceparent: " TRACEPARENT, NULL };

	snprintf(h, sizeof(h), "Idempotency-Key: %s", key);
	if (idem_test_request(t, "POST", "/v1/transfers", hdr, body,
	    &r) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		exit(1);
	}
	return r;
}

/* The balance of the test's own account, -1 if it has none. */
static long long
balance(const char *account)
{
	char		 tenant[24];
	const char	*p[] = { tenant, account };
	PGresult	*r;
	long long	 b = -1;

	snprintf(tenant, sizeof(tenant), "%lld",
	    (long long)idem_test_tenant(t));
	r = PQexecParams(db, "SELECT balance FROM accounts WHERE "
	    "api_key_id = $1 AND name = $2", 2, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		b = atoll(PQgetvalue(r, 0, 0));
	PQclear(r);
	return b;
}

/* The last call the fraud service got: its header name, or "". */
static const char *
fraud_last(const char *name)
{
	size_t		 calls = idem_test_http_count(fraud);
	const char	*v = calls > 0 ? idem_test_http_header(fraud,
			    calls - 1, name) : NULL;

	return v != NULL ? v : "";
}

/*
 * The test's config: the given file (or none) without its log_level, plus
 * [ledger] fraud_url, written to a temporary file; its name, or NULL.
 */
static char *
config_with_fraud(const char *config, const char *url)
{
	static char	 path[] = "/tmp/ledger_test.XXXXXX";
	char		 buf[4096];
	FILE		*in, *out;
	int		 fd;

	if ((fd = mkstemp(path)) == -1 || (out = fdopen(fd, "w")) == NULL)
		return NULL;
	if (config != NULL) {
		if ((in = fopen(config, "r")) == NULL) {
			fclose(out);
			return NULL;
		}
		/* Less than info would hide the log line tested below. */
		while (fgets(buf, sizeof(buf), in) != NULL)
			if (strncmp(buf + strspn(buf, " \t"), "log_level",
			    9) != 0)
				fputs(buf, out);
		fclose(in);
	}
	/* allow_private: the webhook endpoint is a stub on 127.0.0.1. */
	fprintf(out, "\n[ledger]\nfraud_url = %s/check\nfraud_timeout = 2s\n"
	    "\n[webhooks]\nallow_private = on\n", url);
	return fclose(out) == 0 ? path : NULL;
}

/* GET path, or a bail out. */
static struct idem_test_resp *
get(const char *path)
{
	struct idem_test_resp	*r;

	if (idem_test_request(t, "GET", path, NULL, NULL, &r) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		exit(1);
	}
	return r;
}

static int
replayed(const struct idem_test_resp *r)
{
	const char	*v = idem_test_header(r, "Idempotent-Replayed");

	return v != NULL && strcmp(v, "true") == 0;
}

static int
same(const struct idem_test_resp *a, const struct idem_test_resp *b)
{
	size_t	alen, blen;

	idem_test_body(a, &alen);
	idem_test_body(b, &blen);
	return idem_test_status(a) == idem_test_status(b) && alen == blen &&
	    memcmp(idem_test_body(a, NULL), idem_test_body(b, NULL), alen) == 0;
}

/*
 * The application's own 409 (transfer-conflict): a problem like the
 * library's (instance, Link, its page), stored and replayed, told from
 * idempotency-key-in-flight by its type (no Retry-After), and listed
 * beside it under the route's 409 in /openapi.json.
 */
static void
app_conflict_checks(void)
{
	struct idem_test_resp	*a, *b;
	const char		*body, *link, *inst;
	long long		 before = balance("alice");
	char			 move[128];

	a = transfer("conflict-1", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 1, \"expect_balance\": 999}");
	body = idem_test_body(a, NULL);
	link = idem_test_header(a, "Link");
	inst = strstr(body, "\"instance\":\"");
	ok(idem_test_problem(a, 409, "\"type\":\"/problems/transfer-conflict\"") &&
	    idem_test_header(a, "Retry-After") == NULL &&
	    idem_test_header(a, "Idempotency-Key-Expires") != NULL &&
	    !replayed(a), "a stale expect_balance -> 409 transfer-conflict, "
	    "stored (Idempotency-Key-Expires), no Retry-After");
	ok(link != NULL && strcmp(link, "</problems/transfer-conflict>; "
	    "rel=\"describedby\"") == 0 && inst != NULL &&
	    strspn(inst + 12, "0123456789abcdef") == 16 && inst[28] == '"',
	    "... with its Link and its request id as instance");
	b = transfer("conflict-1", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 1, \"expect_balance\": 999}");
	ok(same(a, b) && replayed(b) && balance("alice") == before,
	    "... the same key replays it (Idempotent-Replayed: true), no "
	    "money moved");
	idem_test_response_free(b);
	idem_test_response_free(a);
	snprintf(move, sizeof(move), "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 1, \"expect_balance\": %lld}", before);
	a = transfer("conflict-2", move);
	ok(idem_test_status(a) == 201 && balance("alice") == before - 1,
	    "the balance expected -> 201, moved");
	idem_test_response_free(a);
	a = get("/problems/transfer-conflict");
	ok(idem_test_status(a) == 200 && strstr(idem_test_body(a, NULL),
	    "HTTP status 409") != NULL, "GET /problems/transfer-conflict -> "
	    "its page");
	idem_test_response_free(a);
	a = get("/openapi.json");
	body = idem_test_body(a, NULL);
	body = body != NULL ? strstr(body, "\"409\":{") : NULL;
	ok(body != NULL && strstr(body, "\"enum\":[\"/problems/"
	    "idempotency-key-in-flight\",\"/problems/transfer-conflict\"]") !=
	    NULL, "/openapi.json: POST /v1/transfers' 409 lists both types");
	idem_test_response_free(a);
}

static const char move30[] = "{\"from\": \"alice\", \"to\": \"bob\", "
    "\"amount\": 30}";

/*
 * The fraud service (it allows whatever it is not told about), the
 * config naming it, the log file, the harness, alice's 100: the config's
 * name, or NULL after a bail out.
 */
static char *
setup(const char *given, FILE **logf, idem_app **app)
{
	char		*config;
	char		 err[256], sql[160];
	PGresult	*r;

	/* The fraud service: it allows whatever it is not told about. */
	if ((fraud = idem_test_http_new(err, sizeof(err))) == NULL ||
	    idem_test_http_default(fraud, &(struct idem_test_http_answer){
	    .status = 200, .headers = json_type, .body = "{\"allow\":true}" })
	    == -1 || (config = config_with_fraud(given,
	    idem_test_http_url(fraud))) == NULL ||
	    (hooks = idem_test_http_new(err, sizeof(err))) == NULL ||
	    idem_test_http_default(hooks, &(struct idem_test_http_answer){
	    .status = 204 }) == -1) {
		printf("Bail out! the fraud service or the config\n");
		return NULL;
	}
	/* The application's log lines go to a file this test reads. */
	if ((*logf = tmpfile()) == NULL) {
		printf("Bail out! a log file\n");
		return NULL;
	}
	idem_test_log_file(*logf);
	if ((*app = ledger_app()) == NULL ||
	    (t = idem_test_new(*app, config, err, sizeof(err))) == NULL ||
	    (db = idem_db_open(config, NULL, err, sizeof(err))) == NULL) {
		printf("Bail out! %s\n", *app ? err : "ledger_app");
		return NULL;
	}
	/* The harness's tenant starts with 100 in alice. */
	snprintf(sql, sizeof(sql), "INSERT INTO accounts VALUES (%lld, "
	    "'alice', 100)", (long long)idem_test_tenant(t));
	r = PQexec(db, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		printf("Bail out! %s", PQerrorMessage(db));
		return NULL;
	}
	PQclear(r);
	return config;
}

/* Transfers: both phases, the replay, a reused key, validation, a 402. */
static void
check_transfers(void)
{
	struct idem_test_resp	*a, *b;

	a = transfer("move-1", move30);
	ok(idem_test_status(a) == 201 &&
	    strstr(idem_test_body(a, NULL), "\"status\":\"settled\"") != NULL &&
	    !replayed(a), "a transfer -> 201 settled, both phases run");
	ok(balance("alice") == 70 && balance("bob") == 30,
	    "alice 70, bob 30");
	b = transfer("move-1", move30);
	ok(same(a, b) && replayed(b),
	    "the same transfer again -> the stored 201, byte for byte, "
	    "Idempotent-Replayed: true");
	ok(balance("alice") == 70 && balance("bob") == 30,
	    "... and no money moved twice");
	idem_test_response_free(b);
	idem_test_response_free(a);

	a = transfer("move-1", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 31}");
	ok(idem_test_problem(a, 422, "idempotency-key-reused"),
	    "the same key with another amount -> 422 problem");
	idem_test_response_free(a);

	a = transfer("move-2", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 0}");
	ok(idem_test_problem(a, 400, "validation-error") &&
	    strstr(idem_test_body(a, NULL), "/amount") != NULL,
	    "amount 0 -> 400 problem naming /amount");
	idem_test_response_free(a);

	/* A refusal the handler makes is stored like a success. */
	a = transfer("move-3", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 1000}");
	ok(idem_test_problem(a, 402, "payment-declined"),
	    "more than alice has -> 402 payment-declined");
	b = transfer("move-3", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 1000}");
	ok(same(a, b) && replayed(b), "... replayed as stored");
	ok(balance("alice") == 70, "alice still has 70");
	idem_test_response_free(b);
	idem_test_response_free(a);
}

/* The fraud check through the stub: allowed, refused, dropped. */
static void
check_fraud(void)
{
	struct idem_test_resp	*a, *b;
	char			 key1[128];
	size_t			 calls;

	/* The fraud check: asked once per transfer, under a derived key,
	 * within the transfer's trace. */
	calls = idem_test_http_count(fraud);
	ok(calls == 2 && strcmp(idem_test_http_method(fraud, 0), "POST") == 0 &&
	    strcmp(idem_test_http_path(fraud, 0), "/check") == 0 &&
	    strstr(idem_test_http_body(fraud, 0, NULL), "\"amount\":30") !=
	    NULL, "the fraud service was asked once per executed transfer: "
	    "POST /check with the amount");
	snprintf(key1, sizeof(key1), "%s", fraud_last("Idempotency-Key"));
	ok(key1[0] != '\0' && strstr(key1, "move-") == NULL,
	    "... under a derived Idempotency-Key");
	ok(strncmp(fraud_last("traceparent"), "00-" TRACE "-", 36) == 0 &&
	    strcmp(fraud_last("traceparent"), TRACEPARENT) != 0,
	    "... with the transfer's trace id and a span id of its own "
	    "(traceparent)");
	idem_test_http_push(fraud, &(struct idem_test_http_answer){
	    .status = 200, .headers = json_type, .body = "{\"allow\":false}" });
	a = transfer("move-4", "{\"from\": \"alice\", \"to\": \"mallory\", "
	    "\"amount\": 5}");
	ok(idem_test_problem(a, 403, "transfer-refused") &&
	    strstr(idem_test_http_body(fraud, calls, NULL), "\"mallory\"") !=
	    NULL, "a transfer the fraud check refuses -> 403 transfer-refused");
	b = transfer("move-4", "{\"from\": \"alice\", \"to\": \"mallory\", "
	    "\"amount\": 5}");
	ok(same(a, b) && replayed(b) && idem_test_http_count(fraud) ==
	    calls + 1,
	    "... replayed as stored, the fraud service not asked again");
	ok(balance("alice") == 70 && balance("mallory") == -1,
	    "... and no money moved");
	idem_test_response_free(b);
	idem_test_response_free(a);

	idem_test_http_push(fraud, &(struct idem_test_http_answer){
	    .action = IDEM_TEST_HTTP_CLOSE });
	a = transfer("move-5", move30);
	snprintf(key1, sizeof(key1), "%s", fraud_last("Idempotency-Key"));
	ok(idem_test_problem(a, 503, "service-unavailable") && !replayed(a) &&
	    balance("alice") == 70,
	    "the fraud service drops the call -> 503, no money moved");
	idem_test_response_free(a);
	a = transfer("move-5", move30);
	ok(idem_test_status(a) == 201 && !replayed(a) &&
	    balance("alice") == 40 &&
	    strcmp(key1, fraud_last("Idempotency-Key")) == 0,
	    "... the retry with the same key executes (nothing was stored), "
	    "asking again under the same derived key");
	idem_test_response_free(a);
}

/* The tenant subscribes the hooks stub to transfer.settled. */
static void
subscribe(void)
{
	struct idem_test_resp	*r;
	char			 body[256];
	const char		*hdr[] = { "Idempotency-Key: hooks-1", NULL };

	snprintf(body, sizeof(body), "{\"url\": \"%s/hook\", \"events\": "
	    "[\"transfer.settled\"]}", idem_test_http_url(hooks));
	if (idem_test_request(t, "POST", "/v1/webhook_endpoints", hdr, body,
	    &r) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		exit(1);
	}
	ok(idem_test_status(r) == 201 && strstr(idem_test_body(r, NULL),
	    "\"secret\":\"whsec_") != NULL, "POST /v1/webhook_endpoints "
	    "(the library's route) -> 201 with the endpoint's secret");
	idem_test_response_free(r);
}

/* The two events delivered to the endpoint: their ids, their trace. */
static void
check_deliveries(struct idem_test_events *ev)
{
	const char	*id, *tp, *sig;
	size_t		 i;
	int		 good = 1;

	ok(idem_test_deliver(t, 10) == 2 && idem_test_http_count(hooks) == 2,
	    "the dispatcher's pass delivers both to the endpoint (204)");
	for (i = 0; i < 2; i++) {
		id = idem_test_http_header(hooks, i, "webhook-id");
		tp = idem_test_http_header(hooks, i, "traceparent");
		sig = idem_test_http_header(hooks, i, "webhook-signature");
		good = good && id != NULL && sig != NULL && tp != NULL &&
		    strcmp(idem_test_http_path(hooks, i), "/hook") == 0 &&
		    strcmp(id, idem_test_event_id(ev, i)) == 0 &&
		    strncmp(tp, "00-" TRACE "-", 36) == 0;
	}
	ok(good, "... signed, each under its event's id, in the transfer's "
	    "trace");
}

static void
check_outbox(void)
{
	struct idem_test_events	*ev;

	/* The outbox: one transfer.settled per settled transfer, in the
	 * transfer's trace, a delivery each to the subscribed endpoint. */
	if (idem_test_events(t, &ev) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		exit(1);
	}
	ok(idem_test_events_count(ev) == 2 &&
	    strcmp(idem_test_event_type(ev, 0), "transfer.settled") == 0 &&
	    strcmp(idem_test_event_type(ev, 1), "transfer.settled") == 0 &&
	    strstr(idem_test_event_body(ev, 1), "\"status\":\"settled\"") !=
	    NULL && idem_test_event_deliveries(ev, 0) == 1 &&
	    idem_test_event_deliveries(ev, 1) == 1,
	    "two settled transfers enqueued a transfer.settled each, with "
	    "the transfer as data");
	ok(idem_test_event_traceparent(ev, 0) != NULL &&
	    strncmp(idem_test_event_traceparent(ev, 0), "00-" TRACE "-", 36) ==
	    0, "... each stored with the transfer's trace");
	check_deliveries(ev);
	idem_test_events_free(ev);
}

/* The list (declared query parameters) and a problem's page. */
static void
check_list(void)
{
	struct idem_test_resp	*a;

	/* Declared query parameters and the list helper. */
	a = get("/v1/transfers?limit=1");
	ok(idem_test_status(a) == 200 &&
	    strstr(idem_test_body(a, NULL), "\"has_more\":true") != NULL &&
	    strstr(idem_test_body(a, NULL), "\"amount\":30") != NULL &&
	    strstr(idem_test_body(a, NULL), "\"status\":\"settled\"") != NULL,
	    "GET /v1/transfers?limit=1 -> the newest transfer, has_more");
	idem_test_response_free(a);
	a = get("/v1/transfers?limit=0");
	ok(idem_test_problem(a, 400, "validation-error") &&
	    strstr(idem_test_body(a, NULL), "\"parameter\":\"limit\"") != NULL,
	    "GET /v1/transfers?limit=0 -> 400 naming the parameter");
	idem_test_response_free(a);

	if (idem_test_request(t, "GET", "/problems/payment-declined", NULL,
	    NULL, &a) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		exit(1);
	}
	ok(idem_test_status(a) == 200 &&
	    strstr(idem_test_body(a, NULL), "<h1>Payment declined</h1>") !=
	    NULL, "GET /problems/payment-declined -> its HTML page");
	idem_test_response_free(a);
}

/* The handler's log lines, in the test's file, carry the request's id
 * and trace. */
static void
check_log(FILE *logf)
{
	char	line[2048];
	int	found = 0;

	rewind(logf);
	while (fgets(line, sizeof(line), logf) != NULL)
		if (strstr(line, "refused by the fraud check") &&
		    strstr(line, "\"request_id\":\"") &&
		    strstr(line, "\"trace_id\":\"" TRACE "\""))
			found = 1;
	ok(found, "the refusal is logged (idem_req_log), with its "
	    "request id and trace id, in the test's log file");
}

int
main(int argc, char *argv[])
{
	char		*config;
	FILE		*logf;
	idem_app	*app;

	if ((config = setup(argc > 1 ? argv[1] : NULL, &logf, &app)) == NULL)
		return 1;
	subscribe();
	check_transfers();
	check_fraud();
	check_outbox();
	check_list();
	check_log(logf);
	app_conflict_checks();
	PQfinish(db);
	idem_test_free(t);
	idem_app_free(app);
	idem_test_http_free(fraud);
	idem_test_http_free(hooks);
	unlink(config);
	printf("1..%d\n", n);
	return failed == 0 ? 0 : 1;
}
