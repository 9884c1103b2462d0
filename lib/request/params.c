/*
 * params.c - typed statement parameters: integers, the tenant and body
 * members as libpq text values, without buffers in the handler; and a
 * list's page after its cursor, run with them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

#define ARGS_MAX	64	/* as idem_req_defer() */

struct idem_args {
	int	 n;
	int	 failed;
	char	*v[ARGS_MAX];	/* NULL: SQL NULL */
};

idem_args *
idem_args_new(void)
{
	return calloc(1, sizeof(struct idem_args));
}

void
idem_args_free(idem_args *a)
{
	int	i;

	if (a == NULL)
		return;
	for (i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a);
}

/* Append s (owned, or NULL for SQL NULL when null is set). */
static int
push(idem_args *a, char *s, int null)
{
	if (a == NULL)
		return -1;
	if (a->failed || a->n == ARGS_MAX || (s == NULL && !null)) {
		a->failed = 1;
		free(s);
		return -1;
	}
	a->v[a->n++] = s;
	return 0;
}

int
idem_args_str(idem_args *a, const char *s)
{
	char	*c = NULL;

	if (s != NULL && (c = strdup(s)) == NULL)
		return push(a, NULL, 0);
	return push(a, c, s == NULL);
}

int
idem_args_int(idem_args *a, long long v)
{
	char	buf[IDEM_INT_LEN];

	idem_fmt_int(buf, v);
	return idem_args_str(a, buf);
}

int
idem_args_tenant(idem_args *a, const idem_req *req)
{
	return idem_args_int(a, (long long)idem_req_tenant(req));
}

int
idem_args_member(idem_args *a, const idem_req *req, const char *name)
{
	yajl_val	 v = idem_req_member(req, name);
	idem_json	*j;
	const char	*buf;
	size_t		 len;
	char		*c;

	if (v == NULL)
		return push(a, NULL, 1);
	/* A string, or a number's source digits; true or false: the word. */
	if (YAJL_IS_STRING(v) || YAJL_IS_NUMBER(v))
		return idem_args_str(a, YAJL_IS_STRING(v) ? v->u.string :
		    v->u.number.r);
	if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v))
		return idem_args_str(a, YAJL_IS_TRUE(v) ? "true" : "false");
	/* An object or array: its compact JSON, for a json/jsonb column. */
	c = NULL;
	if ((j = idem_json_new()) != NULL && idem_json_value(j, v) == 0 &&
	    (buf = idem_json_buf(j, &len)) != NULL)
		c = strndup(buf, len);
	idem_json_free(j);
	return push(a, c, 0);
}

PGresult *
idem_req_exec(idem_req *req, const char *sql, idem_args *a)
{
	PGresult	*r = NULL;
	PGconn		*db;

	if (a != NULL && !a->failed && (db = idem_req_db(req)) != NULL) {
		r = PQexecParams(db, sql, a->n, NULL, (const char *const *)a->v,
		    NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK &&
		    PQresultStatus(r) != PGRES_COMMAND_OK) {
			idem_req_db_error(req, r);
			r = NULL;
		}
	}
	idem_args_free(a);
	return r;
}

int
idem_req_db_error(idem_req *req, PGresult *r)
{
	idem_log_db_result(req, r);
	PQclear(r);
	return -1;
}

int
idem_req_defer_args(idem_req *req, const char *sql, idem_args *a)
{
	int	rc = -1;

	if (a != NULL && !a->failed)
		rc = idem_req_defer(req, sql, a->n, (const char *const *)a->v);
	idem_args_free(a);
	return rc;
}

int
idem_resp_page(idem_req *req, const char *cursor_sql, const char *page_sql,
    const char *cursor, long limit, const char *what)
{
	idem_args	*a;
	PGresult	*r;
	int		 n, rc;

	/* A cursor that names nothing would page from nowhere: refused. */
	if (cursor != NULL && cursor_sql != NULL) {
		a = idem_args_new();
		idem_args_str(a, cursor);
		idem_args_tenant(a, req);
		if ((r = idem_req_exec(req, cursor_sql, a)) == NULL)
			return -1;
		n = PQntuples(r);
		PQclear(r);
		if (n == 0)
			return idem_resp_problem(req, IDEM_P_VALIDATION,
			    "starting_after: no such %s", what);
	}
	a = idem_args_new();
	idem_args_tenant(a, req);
	idem_args_str(a, cursor);
	idem_args_int(a, limit + 1);	/* one more: is there a next page? */
	if ((r = idem_req_exec(req, page_sql, a)) == NULL)
		return -1;
	rc = idem_resp_list(req, r, limit);
	PQclear(r);
	return rc;
}
