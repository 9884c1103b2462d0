/*
 * regress.c - the C regress harness (see regress.h) on libidem_test's
 * client (lib/test/idem_test.c, compiled in: these programs link the
 * library's internals, not its exports): FastCGI records written into one
 * end of a socketpair, the runtime's own way of serving a connection on
 * the other, STDOUT read back up to END_REQUEST.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regress.h"
#include "idem_test.h"

static idem_app		*app;
static struct idem_test	*harness;
static char		 tenant_[24];
static char		 conf[256];
static char		 name_[64];
static PGconn		*check_db;
static unsigned		 nkeys;

const char	*rg_config = "";

idem_app *
rg_app(void)
{
	return app;
}

const char *
rg_secret(void)
{
	return idem_test_secret(harness);
}

const char *
rg_tenant(void)
{
	return tenant_;
}

const char *
rg_key(char *buf, size_t len, const char *tag)
{
	snprintf(buf, len, "%s-%ld-%u-%s", name_, (long)getpid(), nkeys++, tag);
	return buf;
}

static void
die(const char *what)
{
	printf("Bail out! %s: %s\n", name_, what);
	exit(1);
}

void
rg_setup(const char *name, void (*routes)(idem_app *))
{
	const char	*conninfo = getenv("IDEM_REGRESS_CONNINFO"), *tmp;
	char		 err[256];
	FILE		*f;
	int		 fd;

	snprintf(name_, sizeof(name_), "%s", name);
	if (conninfo == NULL || *conninfo == '\0') {
		printf("1..0 # SKIP IDEM_REGRESS_CONNINFO is not set\n");
		exit(0);
	}
	tmp = getenv("TMPDIR");
	snprintf(conf, sizeof(conf), "%s/idem-regress-XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : P_tmpdir);
	if ((fd = mkstemp(conf)) == -1 || (f = fdopen(fd, "w")) == NULL)
		die("cannot write the config");
	/* Two connections at least: a request may run inside another. */
	fprintf(f, "[server]\nthreads = 2\nlog_level = error\n"
	    "[database]\nconninfo = %s\npool_size = 4\n%s", conninfo,
	    rg_config);
	fclose(f);
	if ((app = idem_app_new(name)) == NULL)
		die("idem_app_new");
	routes(app);
	/* The configuration, the pool and an API key of its own. */
	if ((harness = idem_test_new(app, conf, err, sizeof(err))) == NULL)
		die(err);
	if ((check_db = idem_db_open(conf, NULL, err, sizeof(err))) == NULL)
		die(err);
	snprintf(tenant_, sizeof(tenant_), "%lld",
	    (long long)idem_test_tenant(harness));
}

void
rg_teardown(void)
{
	PQfinish(check_db);
	idem_test_free(harness);
	idem_app_free(app);
	unlink(conf);
}

/* --- the client side ---------------------------------------------------- */

int
rg_request(const char *method, const char *path, const char *key,
    const char *body, struct rg_resp *out)
{
	char		 line[512];
	const char	*headers[2] = { NULL, NULL }, *b;
	size_t		 n;

	memset(out, 0, sizeof(*out));
	if (key != NULL) {
		snprintf(line, sizeof(line), "Idempotency-Key: %s", key);
		headers[0] = line;
	}
	if (idem_test_request(harness, method, path, headers, body,
	    &out->resp) == -1)
		return -1;
	out->status = idem_test_status(out->resp);
	b = idem_test_body(out->resp, &n);
	if ((out->body = malloc(n + 1)) == NULL) {
		rg_resp_free(out);
		return -1;
	}
	memcpy(out->body, b, n);
	out->body[n] = '\0';
	out->bodylen = n;
	return 0;
}

const char *
rg_header(const struct rg_resp *r, const char *name, char *buf, size_t len)
{
	const char	*v = idem_test_header(r->resp, name);

	if (v == NULL)
		return NULL;
	snprintf(buf, len, "%s", v);
	return buf;
}

void
rg_resp_free(struct rg_resp *r)
{
	idem_test_response_free(r->resp);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

const char *
rg_scalar(const char *sql, const char *param, char *buf, size_t len)
{
	const char	*vals[1] = { param };
	PGresult	*r;

	r = PQexecParams(check_db, sql, param ? 1 : 0, NULL, vals, NULL, NULL,
	    0);
	snprintf(buf, len, "%s", PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	return buf;
}

int
rg_things(void)
{
	char	v[32];

	rg_scalar("SELECT count(*) FROM regress_things WHERE api_key_id = $1",
	    rg_tenant(), v, sizeof(v));
	return v[0] != '\0' ? atoi(v) : -1;
}

const char *
rg_pool_scalar(const char *sql, char *buf, size_t len,
    unsigned *nprepared)
{
	struct idem_stmts	*st = NULL;
	PGconn			*db;
	PGresult		*r;

	*buf = '\0';
	db = idem_pool_acquire(app->pool, 1000, &st);
	if (db == NULL)
		return buf;
	r = PQexec(db, sql);
	snprintf(buf, len, "%s", PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	if (nprepared != NULL)
		*nprepared = st->n;
	idem_pool_release(app->pool, db);
	return buf;
}

/* --- the harness's application ------------------------------------------ */

void	(*rg_in_handler)(const char *note);
int	 rg_fail_after_phase;

static const char *
note_of(idem_req *req)
{
	const char	*path[] = { "note", NULL };
	yajl_val	 v = yajl_tree_get(idem_req_json(req), path,
			    yajl_t_string);

	return v != NULL ? YAJL_GET_STRING(v) : "";
}

static int
insert_thing(idem_req *req, const char *note, char *id, size_t idlen)
{
	char		 tenant[24];
	const char	*vals[2] = { tenant, note };
	PGconn		*db;
	PGresult	*r;
	int		 ok;

	if ((db = idem_req_db(req)) == NULL)
		return -1;
	snprintf(tenant, sizeof(tenant), "%lld",
	    (long long)idem_req_tenant(req));
	r = PQexecParams(db, "INSERT INTO regress_things (api_key_id, note) "
	    "VALUES ($1::bigint, $2) RETURNING id", 2, NULL, vals, NULL, NULL,
	    0);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
	if (ok)
		snprintf(id, idlen, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return ok ? 0 : -1;
}

/* POST /things: one row, 201 {"id":N} (atomic: row and record commit
 * together). */
static int
things_create(idem_req *req, void *arg)
{
	const char	*note = note_of(req);
	char		 id[24], json[64];

	(void)arg;
	if (rg_in_handler != NULL)
		rg_in_handler(note);
	if (insert_thing(req, note, id, sizeof(id)) == -1)
		return -1;
	snprintf(json, sizeof(json), "{\"id\":%s}", id);
	/* After the body: setting a body starts the response afresh. */
	if (idem_resp_json(req, 201, json, strlen(json)) == -1)
		return -1;
	return idem_resp_header(req, "Location", "/things/x");
}

/* POST /phased: phase "started" inserts the row and commits "inserted";
 * the last phase answers 201 {"resumed":...}.  rg_fail_after_phase makes
 * the request fail once right after its first phase commit. */
static int
things_phased(idem_req *req, void *arg)
{
	const char	*rp = idem_req_recovery_point(req);
	char		 id[24], json[64];
	int		 resumed = rp != NULL && strcmp(rp, "started") != 0;

	(void)arg;
	if (!resumed) {
		if (insert_thing(req, note_of(req), id, sizeof(id)) == -1 ||
		    idem_req_phase_commit(req, "inserted") == -1)
			return -1;
		if (rg_fail_after_phase) {
			rg_fail_after_phase = 0;
			return -1;
		}
	}
	snprintf(json, sizeof(json), "{\"resumed\":%s}",
	    resumed ? "true" : "false");
	return idem_resp_json(req, 201, json, strlen(json));
}

void
rg_things_routes(idem_app *a)
{
	PGresult	*r;
	PGconn		*db;
	char		 err[256];

	idem_app_route(a, "POST", "/things",
	    IDEM_ROUTE_IDEMPOTENT | IDEM_ROUTE_JSON, things_create, NULL);
	idem_app_route(a, "POST", "/phased", IDEM_ROUTE_IDEMPOTENT |
	    IDEM_ROUTE_PHASED | IDEM_ROUTE_JSON, things_phased, NULL);
	if ((db = idem_db_open(conf, NULL, err, sizeof(err))) == NULL)
		die(err);
	/* The harness's own table, beside the library's schema. */
	r = PQexec(db, "CREATE TABLE IF NOT EXISTS regress_things ("
	    " id bigserial PRIMARY KEY, api_key_id bigint NOT NULL,"
	    " note text NOT NULL)");
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die(PQerrorMessage(db));
	PQclear(r);
	PQfinish(db);
}
