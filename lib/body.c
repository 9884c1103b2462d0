/*
 * body.c - declared bodies on routes: the request is validated before its
 * handler runs (a 400 naming the member otherwise) and before anything is
 * stored, and the typed getters of the validated body.
 */
#include <string.h>

#include "private.h"

/* At most this many failures are listed in a 400's "errors". */
#define IDEM_VALIDATION_ERRORS_MAX	32

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
	struct idem_buf			 ext = { 0 };
	char				 why[320];
	size_t				 n, i;

	if (rt == NULL || rt->body == NULL)
		return 0;
	n = idem_validate_collect(req->json, rt->body, why, sizeof(why), errs,
	    IDEM_VALIDATION_ERRORS_MAX);
	if (n == 0)
		return 0;
	/* RFC 9457's extension member: every failure, by JSON Pointer. */
	idem_buf_adds(&ext, ",\"errors\":[");
	for (i = 0; i < n && i < IDEM_VALIDATION_ERRORS_MAX; i++) {
		idem_buf_adds(&ext, i > 0 ? ",{\"pointer\":" : "{\"pointer\":");
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
