/*
 * hello_test.c - the hello example's tests, written with libidem_test:
 * each request goes through hello's routes, the idempotency middleware
 * and a real PostgreSQL, in this process.  TAP on stdout.
 *
 * Build: make test (cc -DHELLO_NO_MAIN hello.c hello_test.c with
 *        pkg-config idem-test)
 * Run:   ./hello_test [config]   the config file as hello's -c takes it
 *        (none: libpq's PG* variables); the database holds libidem's
 *        schema and hello.sql.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idem_test.h>

idem_app	*hello_app(void);	/* hello.c */

static int	n, failed;

static void
ok(int cond, const char *what)
{
	printf("%sok %d - %s\n", cond ? "" : "not ", ++n, what);
	failed += !cond;
}

/* A request, or a bail out: nothing after it could pass. */
static struct idem_test_resp *
req(struct idem_test *t, const char *method, const char *path,
    const char *const hdr[], const char *body)
{
	struct idem_test_resp	*r;

	if (idem_test_request(t, method, path, hdr, body, &r) == -1) {
		printf("Bail out! %s %s: %s\n", method, path,
		    idem_test_error(t));
		exit(1);
	}
	return r;
}

int
main(int argc, char *argv[])
{
	const char *const	 k1[] = { "Idempotency-Key: greet-1", NULL };
	const char *const	 anon[] = { "Authorization:", NULL };
	struct idem_test_resp	*a, *b;
	struct idem_test	*t;
	idem_app		*app;
	const char		*id;
	char			 err[256], path[64];
	size_t			 alen, blen;

	if ((app = hello_app()) == NULL ||
	    (t = idem_test_new(app, argc > 1 ? argv[1] : NULL, err,
	    sizeof(err))) == NULL) {
		printf("Bail out! %s\n", app ? err : "hello_app");
		return 1;
	}

	a = req(t, "GET", "/healthz", NULL, NULL);
	ok(idem_test_status(a) == 200 &&
	    strcmp(idem_test_body(a, NULL), "{\"status\":\"ok\"}") == 0,
	    "GET /healthz -> 200 {\"status\":\"ok\"}");
	idem_test_response_free(a);

	/* The first POST runs the handler; the second, same key and body,
	 * is the stored answer, byte for byte. */
	a = req(t, "POST", "/v1/greetings", k1, "{\"name\": \"Ada\"}");
	ok(idem_test_status(a) == 201 &&
	    strstr(idem_test_body(a, NULL), "\"Hello, Ada!\"") != NULL &&
	    idem_test_header(a, "Idempotent-Replayed") == NULL,
	    "POST /v1/greetings -> 201 Hello, Ada!, not a replay");
	b = req(t, "POST", "/v1/greetings", k1, "{\"name\": \"Ada\"}");
	idem_test_body(a, &alen);
	idem_test_body(b, &blen);
	ok(idem_test_status(b) == 201 && alen == blen &&
	    memcmp(idem_test_body(a, NULL), idem_test_body(b, NULL),
	    alen) == 0, "the same POST again -> the same 201, byte for byte");
	ok(idem_test_header(b, "Idempotent-Replayed") != NULL &&
	    strcmp(idem_test_header(b, "Idempotent-Replayed"), "true") == 0,
	    "... with Idempotent-Replayed: true");
	idem_test_response_free(b);

	b = req(t, "POST", "/v1/greetings", k1, "{\"name\": \"Bob\"}");
	ok(idem_test_problem(b, 422, "idempotency-key-reused"),
	    "the same key with another body -> 422 problem");
	idem_test_response_free(b);

	/* What the POST created is there to read. */
	id = strstr(idem_test_body(a, NULL), "\"id\":");
	snprintf(path, sizeof(path), "/v1/greetings/%lld",
	    id ? atoll(id + 5) : 0);
	b = req(t, "GET", path, NULL, NULL);
	ok(idem_test_status(b) == 200 &&
	    strstr(idem_test_body(b, NULL), "\"Hello, Ada!\"") != NULL,
	    "GET /v1/greetings/:id of the created one -> 200");
	idem_test_response_free(b);
	idem_test_response_free(a);

	a = req(t, "POST", "/v1/greetings",
	    (const char *const[]){ "Idempotency-Key: greet-2", NULL },
	    "{\"name\": \"\"}");
	ok(idem_test_problem(a, 400, "validation-error"), "an empty name -> 400 problem");
	idem_test_response_free(a);

	a = req(t, "POST", "/v1/greetings", anon, "{\"name\": \"Ada\"}");
	ok(idem_test_problem(a, 401, "unauthorized"),
	    "no credentials -> 401 problem");
	idem_test_response_free(a);

	a = req(t, "GET", "/v1/nothing-here", NULL, NULL);
	ok(idem_test_problem(a, 404, "not-found"), "an unknown path -> 404 problem");
	idem_test_response_free(a);

	idem_test_free(t);
	idem_app_free(app);
	printf("1..%d\n", n);
	return failed == 0 ? 0 : 1;
}
