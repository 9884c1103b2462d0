/*
 * body.c - declared bodies on routes: the request is validated before its
 * handler runs (a 400 naming the member otherwise), and the typed getters
 * of the validated body.
 */
#include <string.h>

#include "private.h"

/* At most this many failures are listed in a 400's "errors". */
#define IDEM_VALIDATION_ERRORS_MAX	32

/* The handler of a route with a declared body: validate, then the
 * application's handler (also when resumed at a later phase: the body is
 * the same, so it passes again). */
static int
validated(idem_req *req, void *arg)
{
	const struct idem_route		*rt = req->route;
	struct idem_validation_error	 errs[IDEM_VALIDATION_ERRORS_MAX];
	struct idem_buf			 ext = { 0 };
	char				 why[320];
	size_t				 n, i;
	int				 rc;

	(void)arg;
	n = idem_validate_collect(req->json, rt->body, why, sizeof(why), errs,
	    IDEM_VALIDATION_ERRORS_MAX);
	if (n == 0)
		return rt->body_fn(req, rt->body_arg);
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
		return -1;
	}
	if (n == 1)
		rc = idem_resp_problem_ext(req, IDEM_P_VALIDATION, ext.p, "%s",
		    why);
	else
		rc = idem_resp_problem_ext(req, IDEM_P_VALIDATION, ext.p,
		    "%s (and %lu more: see errors)", why,
		    (unsigned long)(n - 1));
	idem_buf_free(&ext);
	return rc;
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
		rt->body_fn = rt->fn;
		rt->body_arg = rt->arg;
		rt->fn = validated;
		rt->arg = NULL;
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
