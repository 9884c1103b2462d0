/*
 * body.c - declared bodies and query parameters on routes: the request is
 * validated before its handler runs (a 400 naming every failure otherwise)
 * and before anything is stored; the typed getters of what was validated;
 * the list answer of a paginated GET.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

/* At most this many failures are listed in a 400's "errors". */
#define IDEM_VALIDATION_ERRORS_MAX	32

/*
 * 400 validation-error listing the n failures in errs (the first of them
 * in why) as RFC 9457's extension member errors: [{KEY: ..., "detail":
 * ...}], KEY "pointer" (a JSON Pointer into the body) or "parameter" (a
 * query parameter's name).  Returns -1, the problem set.
 */
static int
refuse(idem_req *req, const char *key, const struct idem_validation_error
    *errs, size_t n, const char *why)
{
	struct idem_buf	 ext = { 0 };
	size_t		 i;

	idem_buf_adds(&ext, ",\"errors\":[");
	for (i = 0; i < n && i < IDEM_VALIDATION_ERRORS_MAX; i++) {
		idem_buf_addf(&ext, "%s{\"%s\":", i > 0 ? "," : "", key);
		idem_buf_add_jstr(&ext, errs[i].pointer,
		    strlen(errs[i].pointer));
		idem_buf_adds(&ext, ",\"detail\":");
		idem_buf_add_jstr(&ext, errs[i].detail, strlen(errs[i].detail));
		idem_buf_addc(&ext, '}');
	}
	if (idem_buf_adds(&ext, "]") == -1) {
		idem_buf_free(&ext);
		idem_resp_problem(req, IDEM_P_VALIDATION, "%s", why);
		return -1;
	}
	if (n == 1)
		idem_resp_problem_ext(req, IDEM_P_VALIDATION, ext.p, "%s", why);
	else
		idem_resp_problem_ext(req, IDEM_P_VALIDATION, ext.p,
		    "%s (and %lu more: see errors)", why,
		    (unsigned long)(n - 1));
	idem_buf_free(&ext);
	return -1;
}

/*
 * Refuse a body its route's declaration does not admit: 400 listing every
 * failure, before the handler runs (and, on an idempotent route, before
 * the key is looked at, so that nothing is stored and the corrected retry
 * with the same key executes).  0 when admitted, -1 with the problem set.
 */
int
idem_req_body_check(idem_req *req)
{
	const struct idem_route		*rt = req->route;
	struct idem_validation_error	 errs[IDEM_VALIDATION_ERRORS_MAX];
	char				 why[320];
	size_t				 n;

	if (rt == NULL || rt->body == NULL)
		return 0;
	n = idem_validate_collect(req->json, rt->body, why, sizeof(why), errs,
	    IDEM_VALIDATION_ERRORS_MAX);
	return n == 0 ? 0 : refuse(req, "pointer", errs, n, why);
}

int
idem_req_query_check(idem_req *req)
{
	const struct idem_route		*rt = req->route;
	struct idem_validation_error	 errs[IDEM_VALIDATION_ERRORS_MAX];
	char				 why[2 * IDEM_VALIDATION_TEXT_MAX + 4];
	size_t				 n;

	if (rt == NULL || rt->query == NULL)
		return 0;
	switch (idem_query_split(req->query, &req->qpairs)) {
	case IDEM_QUERY_OK:
		break;
	case IDEM_QUERY_TOO_MANY:
		idem_resp_problem(req, IDEM_P_VALIDATION, "more than %d query "
		    "parameters", IDEM_QUERY_PAIRS_MAX);
		return -1;
	case IDEM_QUERY_MALFORMED:
	default:
		idem_resp_problem(req, IDEM_P_VALIDATION, "the query string "
		    "has a malformed %%-escape or an encoded NUL");
		return -1;
	}
	n = idem_query_collect(&req->qpairs, rt->query, req->qparam, errs,
	    IDEM_VALIDATION_ERRORS_MAX);
	if (n == 0)
		return 0;
	snprintf(why, sizeof(why), "%s: %s", errs[0].pointer, errs[0].detail);
	return refuse(req, "parameter", errs, n, why);
}

const char *
idem_req_qparam(const idem_req *req, const char *name)
{
	const struct idem_param	*p;
	size_t			 i;

	if (req == NULL || req->route == NULL || req->route->query == NULL)
		return NULL;
	for (p = req->route->query, i = 0; p[i].name != NULL; i++)
		if (strcmp(p[i].name, name) == 0)
			return req->qparam[i];
	return NULL;
}

long long
idem_req_qparam_int(const idem_req *req, const char *name, long long dflt)
{
	const char	*v = idem_req_qparam(req, name);

	/* Checked before the handler ran: a whole number in its bounds. */
	return v != NULL ? strtoll(v, NULL, 10) : dflt;
}

int
idem_req_qparam_bool(const idem_req *req, const char *name, int dflt)
{
	const char	*v = idem_req_qparam(req, name);

	return v != NULL ? strcmp(v, "true") == 0 : dflt;
}

struct idem_route *
idem_route_of(idem_app *app, const char *method, const char *pattern)
{
	size_t	 i;

	for (i = 0; i < app->router.nroutes; i++)
		if (strcmp(app->router.routes[i].method, method) == 0 &&
		    strcmp(app->router.routes[i].pattern, pattern) == 0)
			return &app->router.routes[i];
	return NULL;
}

/*
 * fn's declaration decl on the route method pattern: its query parameters
 * (body 0), or its JSON body (body 1).  -1, the app refused the call,
 * when an argument is missing, there are too many parameters, there is
 * no such route, a body on a route that parses none, or it is declared
 * already.
 */
static int
route_declare(idem_app *app, const char *fn, const char *method,
    const char *pattern, int body, const void *decl)
{
	const struct idem_param	*params = body ? NULL : decl;
	struct idem_route	*rt;
	size_t			 n;

	if (app == NULL)
		return -1;
	if (method == NULL || pattern == NULL || decl == NULL)
		return idem_app_refuse(app, "%s: no method, pattern or %s", fn,
		    body ? "body" : "parameters");
	for (n = 0; params != NULL && params[n].name != NULL; n++)
		if (n == IDEM_PARAMS_MAX)
			return idem_app_refuse(app, "%s(%.32s %.256s): more "
			    "than %d parameters", fn, method, pattern,
			    IDEM_PARAMS_MAX);
	if ((rt = idem_route_of(app, method, pattern)) == NULL)
		return idem_app_refuse(app, "%s(%.32s %.256s): no such route "
		    "(idem_app_route() first)", fn, method, pattern);
	if (body && !(rt->flags & IDEM_ROUTE_JSON))
		return idem_app_refuse(app, "%s(%.32s %.256s): the route "
		    "parses no JSON body (IDEM_ROUTE_JSON)", fn, method,
		    pattern);
	if ((body ? (const void *)rt->body : rt->query) != NULL)
		return idem_app_refuse(app, "%s(%.32s %.256s): declared "
		    "already", fn, method, pattern);
	if (body)
		rt->body = decl;
	else
		rt->query = params;
	return 0;
}

int
idem_app_route_query(idem_app *app, const char *method, const char *pattern,
    const struct idem_param *params)
{
	return route_declare(app, "idem_app_route_query", method, pattern, 0,
	    params);
}

int
idem_resp_list(idem_req *req, const PGresult *r, long limit)
{
	idem_json	*j;
	int		 i, n = PQntuples(r);

	j = idem_json_new();
	idem_json_object(j);
	idem_json_kstr(j, "object", "list");
	idem_json_key(j, "data");
	idem_json_array(j);
	for (i = 0; i < n && i < limit; i++)
		idem_json_pg_row(j, r, i);
	idem_json_array_end(j);
	idem_json_key(j, "has_more");
	idem_json_bool(j, n > limit);
	idem_json_object_end(j);
	return idem_json_send(j, req, 200);
}

int
idem_app_route_body(idem_app *app, const char *method, const char *pattern,
    const struct idem_body *b)
{
	return route_declare(app, "idem_app_route_body", method, pattern, 1, b);
}

yajl_val
idem_req_member(const idem_req *req, const char *name)
{
	yajl_val	v = req != NULL ? req->json : NULL;
	size_t		i;

	if (v == NULL || !YAJL_IS_OBJECT(v) || name == NULL)
		return NULL;
	for (i = 0; i < v->u.object.len; i++)
		if (strcmp(v->u.object.keys[i], name) == 0)
			return YAJL_IS_NULL(v->u.object.values[i]) ? NULL :
			    v->u.object.values[i];
	return NULL;
}

const char *
idem_req_str(const idem_req *req, const char *name)
{
	yajl_val	v = idem_req_member(req, name);

	return v != NULL && YAJL_IS_STRING(v) ? v->u.string : NULL;
}

long long
idem_req_int(const idem_req *req, const char *name, long long dflt)
{
	yajl_val	v = idem_req_member(req, name);

	return v != NULL && YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : dflt;
}
