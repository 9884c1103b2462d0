/*
 * ledger_test.c - the ledger example's tests, written with libidem_test:
 * each request goes through ledger's routes, both phases, the idempotency
 * middleware and a real PostgreSQL, in this process.  TAP on stdout.
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

#include <idem_test.h>

idem_app	*ledger_app(void);	/* ledger.c */

static struct idem_test	*t;
static PGconn		*db;
static int		 n, failed;

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
	const char		*hdr[] = { h, NULL };

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

static int
is_problem(const struct idem_test_resp *r, int status, const char *type)
{
	const char	*ct = idem_test_header(r, "Content-Type");

	return idem_test_status(r) == status && ct != NULL &&
	    strcmp(ct, "application/problem+json") == 0 &&
	    strstr(idem_test_body(r, NULL), type) != NULL;
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

int
main(int argc, char *argv[])
{
	const char		*config = argc > 1 ? argv[1] : NULL;
	const char		*move30 = "{\"from\": \"alice\", \"to\": \"bob\", "
				    "\"amount\": 30}";
	struct idem_test_resp	*a, *b;
	idem_app		*app;
	char			 err[256], sql[160];
	PGresult		*r;

	if ((app = ledger_app()) == NULL ||
	    (t = idem_test_new(app, config, err, sizeof(err))) == NULL ||
	    (db = idem_db_open(config, NULL, err, sizeof(err))) == NULL) {
		printf("Bail out! %s\n", app ? err : "ledger_app");
		return 1;
	}
	/* The harness's tenant starts with 100 in alice. */
	snprintf(sql, sizeof(sql), "INSERT INTO accounts VALUES (%lld, "
	    "'alice', 100)", (long long)idem_test_tenant(t));
	r = PQexec(db, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		printf("Bail out! %s", PQerrorMessage(db));
		return 1;
	}
	PQclear(r);

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
	ok(is_problem(a, 422, "idempotency-key-reused"),
	    "the same key with another amount -> 422 problem");
	idem_test_response_free(a);

	a = transfer("move-2", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 0}");
	ok(is_problem(a, 400, "validation-error") &&
	    strstr(idem_test_body(a, NULL), "/amount") != NULL,
	    "amount 0 -> 400 problem naming /amount");
	idem_test_response_free(a);

	/* A refusal the handler makes is stored like a success. */
	a = transfer("move-3", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 1000}");
	ok(is_problem(a, 402, "payment-declined"),
	    "more than alice has -> 402 payment-declined");
	b = transfer("move-3", "{\"from\": \"alice\", \"to\": \"bob\", "
	    "\"amount\": 1000}");
	ok(same(a, b) && replayed(b), "... replayed as stored");
	ok(balance("alice") == 70, "alice still has 70");
	idem_test_response_free(b);
	idem_test_response_free(a);

	if (idem_test_request(t, "GET", "/problems/payment-declined", NULL,
	    NULL, &a) == -1) {
		printf("Bail out! %s\n", idem_test_error(t));
		return 1;
	}
	ok(idem_test_status(a) == 200 &&
	    strstr(idem_test_body(a, NULL), "<h1>Payment declined</h1>") !=
	    NULL, "GET /problems/payment-declined -> its HTML page");
	idem_test_response_free(a);

	PQfinish(db);
	idem_test_free(t);
	idem_app_free(app);
	printf("1..%d\n", n);
	return failed == 0 ? 0 : 1;
}
