/*
 * regress.c - the C regress harness (see regress.h): a FastCGI client
 * that writes BEGIN_REQUEST, PARAMS and STDIN records into one end of a
 * socketpair, and the runtime's own way of serving a connection (idem's
 * FastCGI reader, then the request) on the other end, then reads the
 * STDOUT records back up to END_REQUEST.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "regress.h"

#define FCGI_BEGIN_REQUEST	1
#define FCGI_END_REQUEST	3
#define FCGI_PARAMS		4
#define FCGI_STDIN		5
#define FCGI_STDOUT		6
#define FCGI_STDERR		7

static idem_app	*app;
static char	 secret[128];
static char	 tenant_[24];
static char	 conf[256];
static char	 name_[64];
static PGconn	*check_db;
static unsigned	 nkeys;

const char	*rg_config = "";

idem_app *
rg_app(void)
{
	return app;
}

const char *
rg_secret(void)
{
	return secret;
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
	char		*argv[4], err[256], kname[96];
	int64_t		 id;
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
	argv[0] = (char *)name;
	argv[1] = (char *)"-c";
	argv[2] = conf;
	argv[3] = NULL;
	if (idem_app_init(app, 3, argv) != 0)
		die("idem_app_init");
	routes(app);
	if (idem_app_prepare(app) != 0)
		die("idem_app_prepare");
	if ((check_db = idem_db_open(conf, NULL, err, sizeof(err))) == NULL)
		die(err);
	/* Named per run: a database may keep the keys of earlier runs. */
	snprintf(kname, sizeof(kname), "%s-%ld", name, (long)getpid());
	if (idem_api_key_create(check_db, kname, secret, sizeof(secret),
	    &id) != 0)
		die("idem_api_key_create");
	snprintf(tenant_, sizeof(tenant_), "%lld", (long long)id);
}

void
rg_teardown(void)
{
	PQfinish(check_db);
	idem_app_free(app);
	unlink(conf);
}

/* --- the client side ---------------------------------------------------- */

static int
put_record(struct idem_buf *b, int type, const void *p, size_t len)
{
	unsigned char	h[8] = { 1, (unsigned char)type, 0, 1,
			    (unsigned char)(len >> 8), (unsigned char)len, 0, 0 };

	return idem_buf_add(b, h, 8) | idem_buf_add(b, p, len);
}

static int
put_param(struct idem_buf *p, const char *n, const char *v)
{
	size_t		nl = strlen(n), vl = strlen(v);
	unsigned char	l[8];
	int		rc = 0;

	/* Lengths under 128 in one byte, else four with the high bit. */
	if (nl < 128) {
		l[0] = (unsigned char)nl;
		rc |= idem_buf_add(p, l, 1);
	} else {
		l[0] = (unsigned char)(0x80 | nl >> 24);
		l[1] = (unsigned char)(nl >> 16);
		l[2] = (unsigned char)(nl >> 8);
		l[3] = (unsigned char)nl;
		rc |= idem_buf_add(p, l, 4);
	}
	if (vl < 128) {
		l[0] = (unsigned char)vl;
		rc |= idem_buf_add(p, l, 1);
	} else {
		l[0] = (unsigned char)(0x80 | vl >> 24);
		l[1] = (unsigned char)(vl >> 16);
		l[2] = (unsigned char)(vl >> 8);
		l[3] = (unsigned char)vl;
		rc |= idem_buf_add(p, l, 4);
	}
	return rc | idem_buf_adds(p, n) | idem_buf_adds(p, v);
}

static int
write_all(int fd, const char *p, size_t n)
{
	ssize_t	k;

	while (n > 0) {
		if ((k = write(fd, p, n)) == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int
read_all(int fd, void *p, size_t n)
{
	ssize_t	k;

	while (n > 0) {
		if ((k = read(fd, p, n)) == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p = (char *)p + k;
		n -= (size_t)k;
	}
	return 0;
}

/* The records of one request (request id 1, no keep-alive). */
static int
encode(const char *method, const char *path, const char *key,
    const char *body, struct idem_buf *out)
{
	static const unsigned char begin[8] = { 0, 1, 0, 0, 0, 0, 0, 0 };
	struct idem_buf	 p = { 0 };
	char		 auth[160], len[24];
	int		 rc = 0;

	snprintf(auth, sizeof(auth), "Bearer %s", secret);
	snprintf(len, sizeof(len), "%lu",
	    (unsigned long)(body ? strlen(body) : 0));
	rc |= put_param(&p, "REQUEST_METHOD", method);
	rc |= put_param(&p, "REQUEST_URI", path);
	rc |= put_param(&p, "SCRIPT_NAME", path);
	rc |= put_param(&p, "REMOTE_ADDR", "127.0.0.1");
	rc |= put_param(&p, "HTTP_AUTHORIZATION", auth);
	rc |= put_param(&p, "CONTENT_LENGTH", len);
	if (body != NULL)
		rc |= put_param(&p, "CONTENT_TYPE", "application/json");
	if (key != NULL)
		rc |= put_param(&p, "HTTP_IDEMPOTENCY_KEY", key);
	rc |= put_record(out, FCGI_BEGIN_REQUEST, begin, 8);
	if (p.len > 0xffff)
		rc = -1;
	else
		rc |= put_record(out, FCGI_PARAMS, p.p, p.len);
	rc |= put_record(out, FCGI_PARAMS, "", 0);
	if (body != NULL && *body != '\0')
		rc |= put_record(out, FCGI_STDIN, body, strlen(body));
	rc |= put_record(out, FCGI_STDIN, "", 0);
	idem_buf_free(&p);
	return rc == 0 ? 0 : -1;
}

/* STDOUT up to END_REQUEST, into out. */
static int
decode(int fd, struct idem_buf *out)
{
	unsigned char	h[8];
	char		c[65536 + 256];
	size_t		n;

	for (;;) {
		if (read_all(fd, h, 8) == -1)
			return -1;
		n = (size_t)(h[4] << 8 | h[5]) + h[6];
		if (read_all(fd, c, n) == -1)
			return -1;
		if (h[1] == FCGI_END_REQUEST)
			return 0;
		if (h[1] == FCGI_STDOUT &&
		    idem_buf_add(out, c, n - h[6]) == -1)
			return -1;
	}
}

/* The server side: what a runtime worker does with a connection. */
static void
serve(int fd)
{
	(void)idem_conns_serve_one(app, fd);
	close(fd);
}

int
rg_request(const char *method, const char *path, const char *key,
    const char *body, struct rg_resp *out)
{
	struct idem_buf	 in = { 0 }, resp = { 0 };
	char		*sep;
	int		 sv[2], rc = -1;

	memset(out, 0, sizeof(*out));
	if (encode(method, path, key, body, &in) == -1 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == -1) {
		idem_buf_free(&in);
		return -1;
	}
	/* Small requests: the records fit the socket's buffer, so the
	 * client writes them all before the server reads. */
	if (write_all(sv[0], in.p, in.len) == 0) {
		serve(sv[1]);
		if (decode(sv[0], &resp) == 0 && idem_buf_nul(&resp) == 0 &&
		    (sep = strstr(resp.p, "\r\n\r\n")) != NULL) {
			*sep = '\0';
			out->head = strdup(resp.p);
			out->body = strdup(sep + 4);
			out->bodylen = strlen(sep + 4);
			if (out->head != NULL && out->body != NULL &&
			    sscanf(out->head, "Status: %d", &out->status) == 1)
				rc = 0;
		}
	}
	close(sv[0]);
	idem_buf_free(&in);
	idem_buf_free(&resp);
	return rc;
}

const char *
rg_header(const struct rg_resp *r, const char *name, char *buf, size_t len)
{
	const char	*p = r->head, *e;
	size_t		 n = strlen(name);

	for (; p != NULL && *p != '\0'; p = *e ? e + 2 : e) {
		if ((e = strstr(p, "\r\n")) == NULL)
			e = p + strlen(p);
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			p += n + 1;
			while (*p == ' ')
				p++;
			snprintf(buf, len, "%.*s", (int)(e - p), p);
			return buf;
		}
	}
	return NULL;
}

void
rg_resp_free(struct rg_resp *r)
{
	free(r->head);
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
