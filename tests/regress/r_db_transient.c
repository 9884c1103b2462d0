/*
 * r_db_transient.c - a handler's statement that fails for the database's
 * passing reasons (statement timeout 57014, lock timeout 55P03,
 * serialization failure 40001, deadlock 40P01) is answered 503 with
 * Retry-After and nothing stored; another failure (23505) stays a 500.
 * The log lines about a request carry its request id, libpq's trailing
 * newline cut, and a handler logs with idem_req_log().
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regress.h"
#include "tap.h"

/* The error the handler raises (a SQLSTATE of the table below). */
static const char *raise_code;

/* Atomic route: raises raise_code through idem_req_exec(). */
static int
raise_exec(idem_req *req, void *arg)
{
	char	sql[128];

	(void)arg;
	snprintf(sql, sizeof(sql), "DO $$ BEGIN RAISE EXCEPTION 'raised' "
	    "USING ERRCODE = '%s'; END $$", raise_code);
	if (idem_req_exec(req, sql, idem_args_new()) == NULL)
		return -1;
	return idem_resp_json(req, 201, "{}", 2);
}

/* The same through the handler's own PQexec and idem_req_db_error(). */
static int
raise_raw(idem_req *req, void *arg)
{
	char		 sql[128];
	PGresult	*r;

	(void)arg;
	snprintf(sql, sizeof(sql), "DO $$ BEGIN RAISE EXCEPTION 'raised' "
	    "USING ERRCODE = '%s'; END $$", raise_code);
	r = PQexec(idem_req_db(req), sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return idem_req_db_error(req, r);
	PQclear(r);
	return idem_resp_json(req, 201, "{}", 2);
}

/* A real statement timeout. */
static int
sleep_past_timeout(idem_req *req, void *arg)
{
	PGresult	*r;

	(void)arg;
	if ((r = idem_req_exec(req, "SET LOCAL statement_timeout = '50ms'",
	    idem_args_new())) == NULL)
		return -1;
	PQclear(r);
	if ((r = idem_req_exec(req, "SELECT pg_sleep(5)",
	    idem_args_new())) == NULL)
		return -1;
	PQclear(r);
	return idem_resp_json(req, 201, "{}", 2);
}

/* A handler's own log line, then a 400 whose instance is the id. */
static int
log_line(idem_req *req, void *arg)
{
	(void)arg;
	idem_req_log(req, IDEM_LOG_ERROR, "handler says %d\n", 42);
	return idem_resp_problem(req, IDEM_P_VALIDATION, "logged");
}

static void
routes(idem_app *app)
{
	idem_app_route(app, "POST", "/raise", IDEM_ROUTE_IDEMPOTENT,
	    raise_exec, NULL);
	idem_app_route(app, "POST", "/raise-raw", IDEM_ROUTE_IDEMPOTENT,
	    raise_raw, NULL);
	idem_app_route(app, "POST", "/plain-raise", IDEM_ROUTE_JSON,
	    raise_exec, NULL);
	idem_app_route(app, "POST", "/sleep", IDEM_ROUTE_IDEMPOTENT,
	    sleep_past_timeout, NULL);
	idem_app_route(app, "POST", "/log", IDEM_ROUTE_JSON, log_line, NULL);
}

/* The "instance" of a problem body: the request id. */
static void
instance(const struct rg_resp *r, char *out, size_t len)
{
	const char	*p = strstr(r->body, "\"instance\":\"");
	size_t		 n;

	out[0] = '\0';
	if (p == NULL)
		return;
	p += strlen("\"instance\":\"");
	n = strcspn(p, "\"");
	if (n < len)
		snprintf(out, len, "%.*s", (int)n, p);
}

/* One request; its status and Retry-After checked, and whether its key
 * left a record. */
static void
check(const char *path, const char *code, int want, char *id, size_t idlen)
{
	struct rg_resp	 r;
	char		 key[96], v[64], ra[16];

	raise_code = code;
	rg_key(key, sizeof(key), code != NULL ? code : "sleep");
	TAP_OK(rg_request("POST", path, strstr(path, "plain") != NULL ? NULL :
	    key, "{}", &r) == 0 && r.status == want, "%s %s: %d (got %d)",
	    path, code != NULL ? code : "", want, r.status);
	if (want == 503) {
		TAP_STREQ(rg_header(&r, "Retry-After", ra, sizeof(ra)), "1",
		    "%s %s: Retry-After: 1", path, code != NULL ? code : "");
		TAP_OK(strstr(r.body, "service-unavailable") != NULL,
		    "%s %s: service-unavailable", path,
		    code != NULL ? code : "");
	}
	if (strstr(path, "plain") == NULL)
		TAP_STREQ(rg_scalar("SELECT count(*) FROM idempotency_keys "
		    "WHERE key = $1", key, v, sizeof(v)), "0",
		    "%s %s: nothing stored", path, code != NULL ? code : "");
	if (id != NULL)
		instance(&r, id, idlen);
	rg_resp_free(&r);
}

/* The log line holding needle, or NULL; copied into line. */
static const char *
log_find(const char *log, const char *needle, char *line, size_t len)
{
	const char	*p = strstr(log, needle), *b, *e;

	if (p == NULL)
		return NULL;
	for (b = p; b > log && b[-1] != '\n'; b--)
		;
	e = strchr(p, '\n');
	if (e == NULL)
		e = p + strlen(p);
	snprintf(line, len, "%.*s", (int)(e - b), b);
	return line;
}

int
main(void)
{
	static const struct {
		const char	*code;
		int		 want;
	} codes[] = {
		{ "40001", 503 },	/* serialization failure */
		{ "40P01", 503 },	/* deadlock */
		{ "55P03", 503 },	/* lock timeout */
		{ "57014", 503 },	/* statement timeout, cancel */
		{ "23505", 500 },	/* unique violation: the request's */
		{ "55000", 500 },	/* object not in prerequisite state */
	};
	char	 logpath[256], id[32], want[64], line[2048], *log;
	FILE	*f;
	long	 n;
	size_t	 i;
	int	 fd;

	/* The application logs on stderr: into a file read at the end. */
	snprintf(logpath, sizeof(logpath), "%s/r_db_transient-XXXXXX",
	    getenv("TMPDIR") != NULL ? getenv("TMPDIR") : P_tmpdir);
	if ((fd = mkstemp(logpath)) == -1 || dup2(fd, 2) == -1)
		return 1;
	rg_setup("r_db_transient", routes);
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		check("/raise", codes[i].code, codes[i].want, NULL, 0);
	check("/raise-raw", "40001", 503, NULL, 0);
	check("/raise-raw", "23505", 500, NULL, 0);
	check("/plain-raise", "40P01", 503, NULL, 0);
	check("/plain-raise", "23505", 500, NULL, 0);
	check("/sleep", NULL, 503, id, sizeof(id));

	{
		struct rg_resp	 r;
		char		 lid[32];

		TAP_OK(rg_request("POST", "/log", NULL, "{}", &r) == 0 &&
		    r.status == 400, "POST /log: 400");
		instance(&r, lid, sizeof(lid));
		rg_resp_free(&r);
		fflush(stderr);
		f = fopen(logpath, "r");
		log = NULL;
		if (f != NULL && fseek(f, 0, SEEK_END) == 0 &&
		    (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
		    (log = calloc(1, (size_t)n + 1)) != NULL)
			fread(log, 1, (size_t)n, f);
		if (f != NULL)
			fclose(f);
		if (log == NULL)
			log = strdup("");
		/* The handler's line: its message, its level, its id. */
		snprintf(want, sizeof(want), "\"request_id\":\"%s\"", lid);
		TAP_OK(lid[0] != '\0' && log_find(log, "\"msg\":\"handler says "
		    "42\"", line, sizeof(line)) != NULL &&
		    strstr(line, want) != NULL &&
		    strstr(line, "\"level\":\"error\"") != NULL,
		    "idem_req_log: level, message without its newline, the "
		    "request id (%s)", line);
		/* The framework's db line of the statement timeout. */
		snprintf(want, sizeof(want), "\"request_id\":\"%s\"", id);
		TAP_OK(id[0] != '\0' && log_find(log, "canceling statement "
		    "due to statement timeout", line, sizeof(line)) != NULL &&
		    strstr(line, want) != NULL, "the db error line carries "
		    "the request id (%s)", line);
		TAP_OK(strstr(line, "\\n") == NULL && strstr(line,
		    "(SQLSTATE 57014)\"") != NULL, "libpq's message without "
		    "its trailing newline, with its SQLSTATE");
		TAP_OK(strstr(log, "\\n\"") == NULL, "no log message ends "
		    "in a newline");
		free(log);
	}
	rg_teardown();
	unlink(logpath);
	return TAP_DONE();
}
