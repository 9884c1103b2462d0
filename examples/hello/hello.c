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
 */
#include <stdio.h>
#include <string.h>

#include <idem.h>

/* 1 to 64 letters, digits, blanks, '-', '.' or '\'': safe inside JSON. */
static int
valid_name(const char *s)
{
	size_t	n = strlen(s);

	return n >= 1 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -.'") == n;
}

/*
 * Runs inside the transaction that holds the Idempotency-Key record: the
 * INSERT and the stored response commit together, or not at all.
 */
static int
greeting_create(idem_req *req, void *arg)
{
	const char	*path[] = { "name", NULL }, *vals[2];
	char		 tenant[24], json[256], loc[64];
	yajl_val	 name;
	PGresult	*r;
	int		 n;

	(void)arg;
	/* IDEM_ROUTE_IDEMPOTENT implies JSON: the body is parsed already. */
	name = yajl_tree_get(idem_req_json(req), path, yajl_t_string);
	if (name == NULL || !valid_name(YAJL_GET_STRING(name)))
		/* A 4xx is stored too: a retry gets the same answer. */
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "name must be 1 to 64 letters, digits or blanks");

	snprintf(tenant, sizeof(tenant), "%lld",
	    (long long)idem_req_tenant(req));
	vals[0] = tenant;
	vals[1] = YAJL_GET_STRING(name);
	r = PQexecParams(idem_req_db(req), "INSERT INTO greetings "
	    "(api_key_id, name) VALUES ($1, $2) RETURNING id", 2, NULL, vals,
	    NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		PQclear(r);
		return -1;		/* 500; everything is rolled back */
	}
	n = snprintf(json, sizeof(json), "{\"id\":%s,\"message\":\"Hello, "
	    "%s!\"}", PQgetvalue(r, 0, 0), vals[1]);
	snprintf(loc, sizeof(loc), "/v1/greetings/%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (idem_resp_json(req, 201, json, (size_t)n) == -1)
		return -1;
	return idem_resp_header(req, "Location", loc);	/* replayed too */
}

static int
greeting_get(idem_req *req, void *arg)
{
	const char	*vals[2];
	char		 tenant[24], json[256];
	PGresult	*r;
	int		 n;

	(void)arg;
	vals[0] = idem_req_param(req, "id");
	if (strlen(vals[0]) > 18 || strspn(vals[0], "0123456789") !=
	    strlen(vals[0]))
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such greeting");
	snprintf(tenant, sizeof(tenant), "%lld",
	    (long long)idem_req_tenant(req));
	vals[1] = tenant;
	/* Not idempotent: a pooled connection in autocommit. */
	if (idem_req_db(req) == NULL)
		return -1;		/* 503: no connection in time */
	r = PQexecParams(idem_req_db(req), "SELECT id, name FROM greetings "
	    "WHERE id = $1::bigint AND api_key_id = $2", 2, NULL, vals, NULL,
	    NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		PQclear(r);
		return -1;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such greeting");
	}
	n = snprintf(json, sizeof(json), "{\"id\":%s,\"message\":\"Hello, "
	    "%s!\"}", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
	PQclear(r);
	return idem_resp_json(req, 200, json, (size_t)n);
}

static int
healthz(idem_req *req, void *arg)
{
	static const char ok[] = "{\"status\":\"ok\"}";

	(void)arg;
	return idem_resp_json(req, 200, ok, sizeof(ok) - 1);
}

int
main(int argc, char *argv[])
{
	idem_app	*app;
	int		 rc;

	if ((app = idem_app_new("hello")) == NULL)
		return 1;
	idem_app_route(app, "POST", "/v1/greetings", IDEM_ROUTE_IDEMPOTENT,
	    greeting_create, NULL);
	idem_app_route(app, "GET", "/v1/greetings/:id", 0, greeting_get,
	    NULL);
	idem_app_route(app, "GET", "/healthz", IDEM_ROUTE_PUBLIC, healthz,
	    NULL);
	/* -c FILE, -l ADDR, -t N; serves until SIGTERM, then drains. */
	rc = idem_app_main(app, argc, argv);
	idem_app_free(app);
	return rc;
}
