/*
 * ledger.c - the second libidem example: transfers between a tenant's
 * accounts in two committed phases, with a declared body, the JSON writer,
 * typed parameters, a fraud check over HTTP (idem_http(3)) before any
 * money moves, a stored 402 payment-declined when the source account
 * cannot pay, a stored 409 transfer-conflict of its own when the source's
 * balance is not the one the client expected, a log line per refusal, and
 * a paginated list.
 *
 *   POST /v1/transfers   {"from": "a", "to": "b", "amount": 5, "memo": "",
 *                         "expect_balance": 100}
 *                        phase "started": ask [ledger] fraud_url, if set;
 *                                         hold the amount (debit, held row)
 *                        phase "held":    settle (credit), enqueue
 *                                         transfer.settled, answer 201
 *   GET  /v1/transfers   ?limit=1..100&starting_after=ID, newest first
 *   GET  /healthz        public
 *   /v1/webhook_endpoints the library's (idem_app_webhook_routes(3)):
 *                        where transfer.settled is delivered, signed
 *
 * The fraud check: POST fraud_url {"from", "to", "amount"} with the
 * request's derived key as Idempotency-Key, within [ledger] fraud_timeout
 * (default 2s) and the request's time left; {"allow": false} refuses the
 * transfer (403 transfer-refused, stored); no answer is a 503 (nothing
 * stored: the retry asks again, under the same derived key).
 *
 * expect_balance (optional) is the source's balance the client saw: if it
 * changed meanwhile, 409 transfer-conflict, stored like the 402.  A client
 * tells it from 409 idempotency-key-in-flight by the type (and that one
 * carries Retry-After, is not stored, and the same key may be retried).
 *
 * Build: cc $(pkg-config --cflags idem) ledger.c $(pkg-config --libs idem)
 * The tables are in ledger.sql; GET /openapi.json describes the API.
 * Test:  make test (ledger_test.c, with libidem_test: idem_test(3)).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idem.h>

static const struct idem_body transfer = { (const struct idem_member[]){
	{ .name = "from", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 40, .pattern = "^[a-z0-9_]+$" },
	{ .name = "to", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 40, .pattern = "^[a-z0-9_]+$" },
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 1000000000, .doc = "in minor units" },
	{ .name = "memo", .type = IDEM_T_STRING, .max = 140 },
	{ .name = "expect_balance", .type = IDEM_T_INTEGER, .max =
	  IDEM_INT_EXACT_MAX, .doc = "the source's balance the client saw; "
	  "another is 409 transfer-conflict" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

/* A transfer as answered and as transfer.settled's data. */
static const struct idem_body transfer_view = { (const struct idem_member[]){
	{ .name = "id", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED },
	{ .name = "object", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED },
	{ .name = "from", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED },
	{ .name = "to", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED },
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED },
	{ .name = "memo", .type = IDEM_T_STRING },
	{ .name = "status", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED },
	{ .name = NULL } }, 0, NULL, 0, 0 };

/* The problem types of a refused transfer (idem_app_problem() below). */
static int	p_declined = -1, p_refused = -1, p_conflict = -1;
static const char *const transfer_problems[] = { "payment-declined",
	"transfer-refused", "transfer-conflict", NULL };

/*
 * With expect_balance: the source's balance, locked until the phase
 * commits, against it.  0 as expected (or not asked), 1 answered with the
 * 409 (the handler's answer, stored), -1 a failure.
 */
static int
balance_conflict(idem_req *req)
{
	long long	 expected = idem_req_int(req, "expect_balance", -1), have;
	idem_args	*a;
	PGresult	*r;

	if (expected == -1)
		return 0;
	a = idem_args_new();
	idem_args_tenant(a, req);
	idem_args_member(a, req, "from");
	if ((r = idem_req_exec(req, "SELECT balance FROM accounts WHERE "
	    "api_key_id = $1 AND name = $2 FOR UPDATE", a)) == NULL)
		return -1;
	have = PQntuples(r) == 1 ? atoll(PQgetvalue(r, 0, 0)) : 0;
	PQclear(r);
	if (have == expected)
		return 0;
	idem_req_log(req, IDEM_LOG_INFO, "transfer from %s: balance %lld, "
	    "%lld expected", idem_req_str(req, "from"), have, expected);
	return idem_resp_problem(req, (enum idem_problem)p_conflict,
	    "from: its balance is %lld, not the %lld expected", have,
	    expected) == 0 ? 1 : -1;
}

/*
 * Ask the fraud service about this transfer: 1 allowed, 0 refused, -1 no
 * usable answer.  No transaction is open meanwhile (idem_req_phase_pause)
 * and the call ends within the request's time left.
 */
static int
fraud_check(idem_req *req, const char *url)
{
	const char	*allow[] = { "allow", NULL };
	const idem_app	*app = idem_req_app(req);
	long long	 timeout_ms = 2000;
	idem_http_resp	*resp = NULL;
	idem_http	*h = NULL;
	idem_json	*j;
	yajl_val	 v;
	char		 err[256];
	int		 rc = -1;

	idem_app_config_duration_ms(app, "ledger", "fraud_timeout",
	    &timeout_ms);
	if (idem_req_phase_pause(req) == -1 || (j = idem_json_new()) == NULL)
		return -1;
	idem_json_object(j);
	idem_json_kstr(j, "from", idem_req_str(req, "from"));
	idem_json_kstr(j, "to", idem_req_str(req, "to"));
	idem_json_kint(j, "amount", idem_req_int(req, "amount", 0));
	idem_json_object_end(j);
	if ((h = idem_http_new("POST", url)) != NULL &&
	    idem_http_json(h, j) == 0 &&
	    idem_http_derived_key(h, req, "Idempotency-Key", "screen") == 0) {
		idem_http_timeout_ms(h, timeout_ms);
		idem_http_max_body(h, 4096);
		if (idem_http_send(h, req, &resp, err, sizeof(err)) !=
		    IDEM_HTTP_OK || idem_http_resp_status(resp) != 200)
			idem_req_log(req, IDEM_LOG_WARN, "fraud check: %s",
			    resp != NULL ? "not a 200" : err);
		else if ((v = yajl_tree_get(idem_http_resp_json(resp), allow,
		    yajl_t_any)) != NULL && (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)))
			rc = YAJL_IS_TRUE(v);
	}
	idem_http_resp_free(resp);
	idem_http_free(h);
	idem_json_free(j);
	return rc;
}

/* Phase 1: the fraud check, then take the amount from the source, or
 * refuse the transfer. */
static int
hold(idem_req *req, void *arg)
{
	const char	*fraud_url;
	idem_args	*a;
	PGresult	*r;
	int		 moved, allowed, conflict;

	(void)arg;
	if (strcmp(idem_req_str(req, "from"), idem_req_str(req, "to")) == 0)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "to: must differ from from") == 0 ? IDEM_PHASE_END : -1;
	fraud_url = idem_app_config(idem_req_app(req), "ledger", "fraud_url");
	if (fraud_url != NULL &&
	    (allowed = fraud_check(req, fraud_url)) != 1) {
		if (allowed == -1)	/* not stored: the retry asks again */
			return idem_resp_problem(req, IDEM_P_UNAVAILABLE,
			    "the fraud check did not answer; retry later") ==
			    0 ? IDEM_PHASE_END : -1;
		idem_req_log(req, IDEM_LOG_INFO, "transfer %s -> %s refused "
		    "by the fraud check", idem_req_str(req, "from"),
		    idem_req_str(req, "to"));
		return idem_resp_problem(req, (enum idem_problem)p_refused,
		    "the fraud check refused this transfer") == 0 ?
		    IDEM_PHASE_END : -1;
	}
	if ((conflict = balance_conflict(req)) != 0)
		return conflict == 1 ? IDEM_PHASE_END : -1;
	a = idem_args_new();
	idem_args_tenant(a, req);
	idem_args_member(a, req, "from");
	idem_args_member(a, req, "amount");
	r = idem_req_exec(req, "UPDATE accounts SET balance = balance - $3 "
	    "WHERE api_key_id = $1 AND name = $2 AND balance >= $3", a);
	if (r == NULL)
		return -1;
	moved = strcmp(PQcmdTuples(r), "1") == 0;
	PQclear(r);
	if (!moved) {	/* a 402, stored: the retry gets the same answer */
		idem_req_log(req, IDEM_LOG_INFO, "transfer from %s declined",
		    idem_req_str(req, "from"));
		return idem_resp_problem(req, (enum idem_problem)p_declined,
		    "from: no such account, or not enough in it") == 0 ?
		    IDEM_PHASE_END : -1;
	}
	a = idem_args_new();
	idem_args_tenant(a, req);
	idem_args_int(a, (long long)idem_req_record_id(req));
	idem_args_member(a, req, "from");
	idem_args_member(a, req, "to");
	idem_args_member(a, req, "amount");
	idem_args_member(a, req, "memo");
	/* Committed with the point "held": a resumed request settles it. */
	return idem_req_defer_args(req, "INSERT INTO transfers (api_key_id, "
	    "idem_key_id, source, target, amount, memo, status) VALUES ($1, "
	    "$2, $3, $4, $5, $6, 'held')", a) == 0 ? IDEM_PHASE_NEXT : -1;
}

/* Phase 2: credit the target; the transfer as the answer. */
static int
settle(idem_req *req, void *arg)
{
	idem_args	*a = idem_args_new();
	idem_json	*j;
	PGresult	*r;
	const char	*body;
	size_t		 len;

	(void)arg;
	idem_args_tenant(a, req);
	idem_args_int(a, (long long)idem_req_record_id(req));
	r = idem_req_exec(req, "WITH t AS (UPDATE transfers SET status = "
	    "'settled' WHERE api_key_id = $1 AND idem_key_id = $2 RETURNING "
	    "*), c AS (INSERT INTO accounts SELECT api_key_id, target, amount "
	    "FROM t ON CONFLICT (api_key_id, name) DO UPDATE SET balance = "
	    "accounts.balance + excluded.balance) SELECT id, 'transfer' AS "
	    "object, source AS \"from\", target AS \"to\", amount, memo, "
	    "status FROM t",
	    a);
	if (r == NULL || PQntuples(r) != 1) {
		PQclear(r);
		return -1;
	}
	j = idem_json_new();
	idem_json_pg_row(j, r, 0);
	PQclear(r);
	/* The settled transfer as an event: it commits with the credit. */
	if ((body = idem_json_buf(j, &len)) == NULL ||
	    idem_req_enqueue(req, "transfer.settled", body, len, NULL, 0) ==
	    -1) {
		idem_json_free(j);
		return -1;
	}
	return idem_json_send(j, req, 201) == 0 ? IDEM_PHASE_END : -1;
}

static const struct idem_phase transfer_phases[] = {
	{ "started", hold },
	{ "held", settle },
	{ NULL, NULL },
};

static int
transfer_create(idem_req *req, void *arg)
{
	return idem_req_phases(req, transfer_phases, arg);
}

/* GET /v1/transfers: newest first, a page at a time. */
static const struct idem_param list_params[] = {
	{ .name = "limit", .type = IDEM_T_INTEGER, .min = 1, .max = 100,
	  .def = "10", .doc = "how many transfers, 1 to 100" },
	{ .name = "starting_after", .type = IDEM_T_INTEGER, .min = 1,
	  .max = 9007199254740991LL, .doc = "the last transfer id of the "
	  "previous page: the next page starts after it" },
	{ .name = NULL } };

static int
transfer_list(idem_req *req, void *arg)
{
	(void)arg;
	/* No cursor check: any id pages from there. */
	return idem_resp_page(req, NULL, "SELECT id, 'transfer' AS object, "
	    "source AS \"from\", target AS \"to\", amount, memo, status FROM "
	    "transfers WHERE api_key_id = $1 AND ($2::bigint IS NULL OR id < "
	    "$2::bigint) ORDER BY id DESC LIMIT $3::int",
	    idem_req_qparam(req, "starting_after"),
	    (long)idem_req_qparam_int(req, "limit", 10), "transfer");
}

static int
healthz(idem_req *req, void *arg)
{
	idem_json	*j = idem_json_new();

	(void)arg;
	idem_json_object(j);
	idem_json_kstr(j, "status", "ok");
	idem_json_object_end(j);
	return idem_json_send(j, req, 200);
}

/* The application: its problem types and routes.  ledger_test.c tests
 * this very one.  A declaration refused: its reason on stderr, NULL. */
idem_app *
ledger_app(void)
{
	idem_app	*app;

	if ((app = idem_app_new("ledger")) == NULL)
		return NULL;
	p_declined = idem_app_problem(app, "payment-declined", 402,
	    "Payment declined", "The card was declined; the answer is stored "
	    "for this key.");
	p_refused = idem_app_problem(app, "transfer-refused", 403,
	    "Transfer refused", "The fraud check refused the transfer; the "
	    "answer is stored for this key.");
	/* The application's own 409: not idempotency-key-in-flight (no
	 * Retry-After; stored, so the same key replays it). */
	p_conflict = idem_app_problem(app, "transfer-conflict", 409,
	    "Transfer conflicts with the account", "The source account's "
	    "balance is not the one the transfer expected; the answer is "
	    "stored for this key: read the balance again and send a new "
	    "transfer with a new key.");
	idem_app_config_key(app, "ledger", "fraud_url");
	idem_app_config_key_type(app, "ledger", "fraud_timeout",
	    IDEM_CONFIG_DURATION);
	idem_app_route(app, "POST", "/v1/transfers", IDEM_ROUTE_PHASED,
	    transfer_create, NULL);
	idem_app_route_body(app, "POST", "/v1/transfers", &transfer);
	idem_app_route_problems(app, "POST", "/v1/transfers",
	    transfer_problems);
	idem_app_route(app, "GET", "/v1/transfers", 0, transfer_list, NULL);
	idem_app_route_query(app, "GET", "/v1/transfers", list_params);
	idem_app_route(app, "GET", "/healthz", IDEM_ROUTE_PUBLIC, healthz,
	    NULL);
	/* The event settle() enqueues, and the library's routes where a
	 * tenant subscribes to it (POST /v1/webhook_endpoints, ...). */
	idem_app_webhook(app, "transfer.settled", "A transfer was settled",
	    &transfer_view);
	idem_app_webhook_routes(app, NULL);
	/* The first refusal, if any, says which call and why. */
	if (idem_app_error(app)[0] != '\0') {
		fprintf(stderr, "ledger: %s\n", idem_app_error(app));
		idem_app_free(app);
		return NULL;
	}
	return app;
}

#ifndef LEDGER_NO_MAIN	/* ledger_test.c has a main() of its own */
int
main(int argc, char *argv[])
{
	idem_app	*app;
	int		 rc;

	if ((app = ledger_app()) == NULL)
		return 1;
	rc = idem_app_main(app, argc, argv);
	idem_app_free(app);
	return rc;
}
#endif
