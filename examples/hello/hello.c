/*
 * hello.c - a complete libidem program.
 *
 *   POST /v1/greetings      idempotent: {"name": "Ada"} -> 201, stored
 *   GET  /v1/greetings/:id  an authenticated read
 *   GET  /healthz           public
 *
 * Build: cc $(pkg-config --cflags idem) hello.c $(pkg-config --libs idem)
 * Run:   ./hello -c hello.ini -l 127.0.0.1:9000   (or let the web server
 *        spawn it); the greetings table is in hello.sql.
 * Test:  make test (hello_test.c, with libidem_test: idem_test(3)).
 */
#include <idem.h>

/* The body of POST /v1/greetings; anything else is a 400 naming it. */
static const struct idem_body greeting = { (const struct idem_member[]){
	{ .name = "name", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 64, .pattern = "^[A-Za-z0-9 .'-]+$" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

/* {"id": ..., "message": "Hello, <name>!"} from the row (id, message). */
static int
send_greeting(idem_req *req, int status, PGresult *r)
{
	idem_json	*j = idem_json_new();

	idem_json_pg_row(j, r, 0);
	PQclear(r);
	return idem_json_send(j, req, status);
}

/*
 * Runs inside the transaction that holds the Idempotency-Key record: the
 * INSERT and the stored response commit together, or not at all.
 */
static int
greeting_create(idem_req *req, void *arg)
{
	idem_args	*a = idem_args_new();
	PGresult	*r;

	(void)arg;
	/* The body is valid already: idem_app_route_body() below. */
	idem_args_tenant(a, req);
	idem_args_member(a, req, "name");
	r = idem_req_exec(req, "INSERT INTO greetings (api_key_id, name) "
	    "VALUES ($1, $2) RETURNING id, 'Hello, ' || name || '!' AS message",
	    a);
	if (r == NULL)
		return -1;		/* 500; everything is rolled back */
	return send_greeting(req, 201, r);	/* a retry gets it replayed */
}

static int
greeting_get(idem_req *req, void *arg)
{
	idem_args	*a = idem_args_new();
	PGresult	*r;

	(void)arg;
	idem_args_str(a, idem_req_param(req, "id"));
	idem_args_tenant(a, req);
	/* Not idempotent: a pooled connection in autocommit. */
	r = idem_req_exec(req, "SELECT id, 'Hello, ' || name || '!' AS message "
	    "FROM greetings WHERE id::text = $1 AND api_key_id = $2", a);
	if (r == NULL)
		return -1;		/* 503 when no connection came in time */
	if (PQntuples(r) == 0) {
		PQclear(r);
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such greeting");
	}
	return send_greeting(req, 200, r);
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

/* The application: its routes.  hello_test.c tests this very one. */
idem_app *
hello_app(void)
{
	idem_app	*app;

	if ((app = idem_app_new("hello")) == NULL)
		return NULL;
	idem_app_route(app, "POST", "/v1/greetings", IDEM_ROUTE_IDEMPOTENT,
	    greeting_create, NULL);
	idem_app_route_body(app, "POST", "/v1/greetings", &greeting);
	idem_app_route(app, "GET", "/v1/greetings/:id", 0, greeting_get,
	    NULL);
	idem_app_route(app, "GET", "/healthz", IDEM_ROUTE_PUBLIC, healthz,
	    NULL);
	return app;
}

#ifndef HELLO_NO_MAIN	/* hello_test.c has a main() of its own */
int
main(int argc, char *argv[])
{
	idem_app	*app;
	int		 rc;

	if ((app = hello_app()) == NULL)
		return 1;
	/* -c FILE, -l ADDR, -t N; serves until SIGTERM, then drains. */
	rc = idem_app_main(app, argc, argv);
	idem_app_free(app);
	return rc;
}
#endif
