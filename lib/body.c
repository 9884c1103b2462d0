/*
 * body.c - declared bodies on routes: the request is validated before its
 * handler runs (a 400 naming the member otherwise) and before anything is
 * stored, and the typed getters of the validated body.
 */
#include <string.h>

#include "private.h"

/*
 * Refuse a body its route's declaration does not admit: 400 naming the
 * member, before the handler runs (and, on an idempotent route, before
 * the key is looked at, so that nothing is stored and the corrected retry
 * with the same key executes).  0 when admitted, -1 with the problem set.
 */
int
idem_req_body_check(idem_req *req)
{
	const struct idem_route	*rt = req->route;
	char			 why[320];

	if (rt == NULL || rt->body == NULL ||
	    idem_validate(req->json, rt->body, why, sizeof(why)) == 0)
		return 0;
	idem_resp_problem(req, IDEM_P_VALIDATION, "%s", why);
	return -1;
}

int
idem_app_route_body(idem_app *app, const char *method, const char *pattern,
    const struct idem_body *b)
{
	struct idem_route	*rt;
	size_t			 i;

	if (app == NULL || method == NULL || pattern == NULL || b == NULL)
		return -1;
	for (i = 0; i < app->router.nroutes; i++) {
		rt = &app->router.routes[i];
		if (strcmp(rt->method, method) != 0 ||
		    strcmp(rt->pattern, pattern) != 0)
			continue;
		if (!(rt->flags & IDEM_ROUTE_JSON) || rt->body != NULL)
			return -1;	/* no parsed body, or declared twice */
		rt->body = b;
		return 0;
	}
	return -1;
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
