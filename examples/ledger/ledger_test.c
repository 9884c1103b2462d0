/*
 * ledger_test.c - the ledger example's tests, written with libidem_test:
 * each request goes through ledger's routes, both phases, the idempotency
 * middleware and a real PostgreSQL, in this process.  TAP on stdout.  A
 * thread of this file plays the fraud service ([ledger] fraud_url): it
 * refuses transfers to "mallory" and, while told to, drops calls.
 *
 * Build: make test (cc -DLEDGER_NO_MAIN ledger.c ledger_test.c with
 *        pkg-config idem-test)
 * Run:   ./ledger_test [config]   the config file as ledger's -c takes it
 *        (none: libpq's PG* variables); the database holds libidem's
 *        schema and ledger.sql.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <idem_admin.h>	/* idem_db_open */
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

/* --- the fraud service ---------------------------------------------- */

static struct {
	pthread_mutex_t	 mu;
	int		 fd;		/* listening */
	int		 calls;		/* requests read */
	int		 drop;		/* close without answering */
	char		 key[128];	/* the last Idempotency-Key */
} fraud = { PTHREAD_MUTEX_INITIALIZER, -1, 0, 0, "" };

/* One call per connection: read it, answer {"allow": ...}, close. */
static void *
fraud_main(void *arg)
{
	char	 buf[8192], *k, *e;
	size_t	 len;
	ssize_t	 got;
	int	 c, refuse;

	(void)arg;
	while ((c = accept(fraud.fd, NULL, NULL)) != -1) {
		len = 0;
		/* Headers and the small body arrive before the client waits. */
		while (len < sizeof(buf) - 1 && (got = read(c, buf + len,
		    sizeof(buf) - 1 - len)) > 0) {
			len += (size_t)got;
			buf[len] = '\0';
			if ((e = strstr(buf, "\r\n\r\n")) != NULL &&
			    strchr(e, '}') != NULL)
				break;
		}
		buf[len] = '\0';
		pthread_mutex_lock(&fraud.mu);
		fraud.calls++;
		if ((k = strstr(buf, "\nIdempotency-Key: ")) != NULL) {
			k += strlen("\nIdempotency-Key: ");
			snprintf(fraud.key, sizeof(fraud.key), "%.*s",
			    (int)strcspn(k, "\r\n"), k);
		}
		refuse = strstr(buf, "\"to\":\"mallory\"") != NULL;
		if (!fraud.drop)
			dprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: "
			    "application/json\r\nContent-Length: %d\r\n"
			    "Connection: close\r\n\r\n{\"allow\":%s}",
			    refuse ? 15 : 14, refuse ? "false" : "true");
		pthread_mutex_unlock(&fraud.mu);
		close(c);
	}
	return NULL;
}

/* Start it; its port, or -1. */
static int
fraud_start(void)
{
	struct sockaddr_in	 sin;
	socklen_t		 sl = sizeof(sin);
	pthread_t		 th;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fraud.fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    bind(fraud.fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fraud.fd, 8) == -1 ||
	    getsockname(fraud.fd, (struct sockaddr *)&sin, &sl) == -1 ||
	    pthread_create(&th, NULL, fraud_main, NULL) != 0)
		return -1;
	pthread_detach(th);
	return ntohs(sin.sin_port);
}

static int
fraud_calls(char *key, size_t len)
{
	int	n;

	pthread_mutex_lock(&fraud.mu);
	n = fraud.calls;
	if (key != NULL)
		snprintf(key, len, "%s", fraud.key);
	pthread_mutex_unlock(&fraud.mu);
	return n;
}

static void
fraud_drop(int on)
{
	pthread_mutex_lock(&fraud.mu);
	fraud.drop = on;
	pthread_mutex_unlock(&fraud.mu);
}

/*
 * The test's config: the given file (or none) without its log_level, plus
 * [ledger] fraud_url, written to a temporary file; its name, or NULL.
 */
static char *
config_with_fraud(const char *config, int port)
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
	fprintf(out, "\n[ledger]\nfraud_url = http://127.0.0.1:%d/check\n"
	    "fraud_timeout = 2s\n", port);
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
	ok(is_problem(a, 409, "\"type\":\"/problems/transfer-conflict\"") &&
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

int
main(int argc, char *argv[])
{
	const char		*given = argc > 1 ? argv[1] : NULL;
	char			*config, key1[128], key2[128];
	int			 port, calls;
	FILE			*logf;
	const char		*move30 = "{\"from\": \"alice\", \"to\": \"bob\", "
				    "\"amount\": 30}";
	struct idem_test_resp	*a, *b;
	idem_app		*app;
	char			 err[256], sql[160];
	PGresult		*r;

	if ((port = fraud_start()) == -1 ||
	    (config = config_with_fraud(given, port)) == NULL) {
		printf("Bail out! the fraud service or the config\n");
		return 1;
	}
	/* The handlers' log lines (stderr) go to a file this test reads. */
	if ((logf = tmpfile()) == NULL || dup2(fileno(logf), 2) == -1) {
		printf("Bail out! stderr to a file\n");
		return 1;
	}
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

	/* The fraud check: asked once per transfer, under a derived key. */
	calls = fraud_calls(key1, sizeof(key1));
	ok(calls == 2 && key1[0] != '\0' && strstr(key1, "move-") == NULL,
	    "the fraud service was asked once per executed transfer, under a "
	    "derived Idempotency-Key");
	a = transfer("move-4", "{\"from\": \"alice\", \"to\": \"mallory\", "
	    "\"amount\": 5}");
	ok(is_problem(a, 403, "transfer-refused"),
	    "a transfer the fraud check refuses -> 403 transfer-refused");
	b = transfer("move-4", "{\"from\": \"alice\", \"to\": \"mallory\", "
	    "\"amount\": 5}");
	ok(same(a, b) && replayed(b) && fraud_calls(NULL, 0) == calls + 1,
	    "... replayed as stored, the fraud service not asked again");
	ok(balance("alice") == 70 && balance("mallory") == -1,
	    "... and no money moved");
	idem_test_response_free(b);
	idem_test_response_free(a);

	fraud_drop(1);
	a = transfer("move-5", move30);
	fraud_calls(key1, sizeof(key1));
	ok(is_problem(a, 503, "service-unavailable") && !replayed(a) &&
	    balance("alice") == 70,
	    "the fraud service drops the call -> 503, no money moved");
	idem_test_response_free(a);
	fraud_drop(0);
	a = transfer("move-5", move30);
	fraud_calls(key2, sizeof(key2));
	ok(idem_test_status(a) == 201 && !replayed(a) &&
	    balance("alice") == 40 && strcmp(key1, key2) == 0,
	    "... the retry with the same key executes (nothing was stored), "
	    "asking again under the same derived key");
	idem_test_response_free(a);

	/* Declared query parameters and the list helper. */
	a = get("/v1/transfers?limit=1");
	ok(idem_test_status(a) == 200 &&
	    strstr(idem_test_body(a, NULL), "\"has_more\":true") != NULL &&
	    strstr(idem_test_body(a, NULL), "\"amount\":30") != NULL &&
	    strstr(idem_test_body(a, NULL), "\"status\":\"settled\"") != NULL,
	    "GET /v1/transfers?limit=1 -> the newest transfer, has_more");
	idem_test_response_free(a);
	a = get("/v1/transfers?limit=0");
	ok(is_problem(a, 400, "validation-error") &&
	    strstr(idem_test_body(a, NULL), "\"parameter\":\"limit\"") != NULL,
	    "GET /v1/transfers?limit=0 -> 400 naming the parameter");
	idem_test_response_free(a);

	/* The handler's log lines carry the request id. */
	{
		char	line[2048];
		int	found = 0;

		fflush(stderr);
		rewind(logf);
		while (fgets(line, sizeof(line), logf) != NULL)
			if (strstr(line, "refused by the fraud check") &&
			    strstr(line, "\"request_id\":\""))
				found = 1;
		ok(found, "the refusal is logged (idem_req_log), with its "
		    "request id");
	}

	app_conflict_checks();

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
	unlink(config);
	printf("1..%d\n", n);
	return failed == 0 ? 0 : 1;
}
