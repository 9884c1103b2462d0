/*
 * ledger.c - the second libidem example: transfers between a tenant's
 * accounts in two committed phases, with a declared body, the JSON writer,
 * typed parameters and a stored 402 payment-declined when the source
 * account cannot pay.
 *
 *   POST /v1/transfers   {"from": "a", "to": "b", "amount": 5, "memo": ""}
 *                        phase "started": hold the amount (debit, held row)
 *                        phase "held":    settle (credit), answer 201
 *   GET  /healthz        public
 *
 * Build: cc $(pkg-config --cflags idem) ledger.c $(pkg-config --libs idem)
 * The tables are in ledger.sql; GET /openapi.json describes the API.
 * Test:  make test (ledger_test.c, with libidem_test: idem_test(3)).
 */
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
	{ .name = NULL } }, 0, NULL, 0, 0 };

/* The problem type of a refused transfer (idem_app_problem() below). */
static int	p_declined = -1;

/* Phase 1: take the amount from the source, or refuse the transfer. */
static int
hold(idem_req *req, void *arg)
{
	idem_args	*a = idem_args_new();
	PGresult	*r;
	int		 moved;

	(void)arg;
	if (strcmp(idem_req_str(req, "from"), idem_req_str(req, "to")) == 0)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "to: must differ from from") == 0 ? IDEM_PHASE_END : -1;
	idem_args_tenant(a, req);
	idem_args_member(a, req, "from");
	idem_args_member(a, req, "amount");
	r = idem_req_exec(req, "UPDATE accounts SET balance = balance - $3 "
	    "WHERE api_key_id = $1 AND name = $2 AND balance >= $3", a);
	if (r == NULL)
		return -1;
	moved = strcmp(PQcmdTuples(r), "1") == 0;
	PQclear(r);
	if (!moved)	/* a 402, stored: the retry gets the same answer */
		return idem_resp_problem(req, (enum idem_problem)p_declined,
		    "from: no such account, or not enough in it") == 0 ?
		    IDEM_PHASE_END : -1;
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

/* The application: its problem type and routes.  ledger_test.c tests
 * this very one. */
idem_app *
ledger_app(void)
{
	idem_app	*app;

	if ((app = idem_app_new("ledger")) == NULL)
		return NULL;
	if ((p_declined = idem_app_problem(app, "payment-declined", 402,
	    "Payment declined", "The card was declined; the answer is stored "
	    "for this key.")) == -1) {
		idem_app_free(app);
		return NULL;
	}
	idem_app_route(app, "POST", "/v1/transfers", IDEM_ROUTE_PHASED,
	    transfer_create, NULL);
	idem_app_route_body(app, "POST", "/v1/transfers", &transfer);
	idem_app_route(app, "GET", "/healthz", IDEM_ROUTE_PUBLIC, healthz,
	    NULL);
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
