/*
 * test_refusal.c - every setup call that refuses says why
 * (idem_app_error()): one row per refusal, each on an application with
 * a route GET /a and POST /j (JSON) and the type "declined", the call's
 * name and the reason in the text.
 */
#include <stdio.h>
#include <string.h>

#include "private.h"
#include "stubs.h"
#include "tap.h"

static const struct idem_body body = { (const struct idem_member[]){
	{ .name = NULL } }, 0, NULL, 0, 0 };
static const struct idem_param params[] = { { .name = NULL } };
static const struct idem_response bad_status[] = { { 302, NULL, 0, NULL },
	{ 0, NULL, 0, NULL } };
static const struct idem_response twice[] = { { 200, NULL, 0, NULL },
	{ 200, NULL, 0, NULL }, { 0, NULL, 0, NULL } };
static const char *const unknown[] = { "nope", NULL };
static const char *const library[] = { "not-found", NULL };

/* The refused routes: idem_app_route() with each, then its reason. */
static const struct {
	const char	*method, *pattern;
	int		(*fn)(idem_req *, void *);
	const char	*why;
} routes[] = {
	{ "get", "/x", nop, "idem_app_route(get /x): the method must be 1 to "
	    "32 upper-case letters" },
	{ "GET", "/a", nop, "idem_app_route(GET /a): registered already" },
	{ "GET", "/x/../y", nop, "idem_app_route(GET /x/../y): the pattern "
	    "has a '.' or '..' segment" },
	{ "GET", "x", nop, "idem_app_route(GET x): the pattern must start "
	    "with '/'" },
	{ "GET", "/x/:id/:id", nop, "idem_app_route(GET /x/:id/:id): a "
	    "parameter's name is used twice" },
	{ "GET", "/x", NULL, "idem_app_route(GET /x): no handler" },
};

/* The other refused calls: each returns what the call returned. */
static int key_builtin(idem_app *a)
{ return idem_app_config_key(a, "server", "mine"); }
static int key_empty(idem_app *a)
{ return idem_app_config_key_type(a, "mine", "", IDEM_CONFIG_INT); }
static int body_no_route(idem_app *a)
{ return idem_app_route_body(a, "POST", "/nope", &body); }
static int body_no_json(idem_app *a)
{ return idem_app_route_body(a, "GET", "/a", &body); }
static int query_no_route(idem_app *a)
{ return idem_app_route_query(a, "GET", "/nope", params); }
static int summary_bad_id(idem_app *a)
{ return idem_app_route_summary(a, "GET", "/a", "get a", "x"); }
static int response_bad_status(idem_app *a)
{ return idem_app_route_response(a, "GET", "/a", bad_status); }
static int response_twice(idem_app *a)
{ return idem_app_route_response(a, "GET", "/a", twice); }
static int problems_unknown(idem_app *a)
{ return idem_app_route_problems(a, "GET", "/a", unknown); }
static int problems_library(idem_app *a)
{ return idem_app_route_problems(a, "GET", "/a", library); }
static int webhook_bad_type(idem_app *a)
{ return idem_app_webhook(a, "a b", "x", &body); }
static int problem_status(idem_app *a)
{ return idem_app_problem(a, "mine", 302, "Mine", NULL); }

/* A new application with GET /a, POST /j and "declined", which has
 * refused nothing yet; NULL (a failed check) when it cannot be made. */
static idem_app *
fresh(unsigned long row)
{
	idem_app	*app = idem_app_new("t");

	if (app == NULL ||
	    idem_app_route(app, "GET", "/a", 0, nop, NULL) != 0 ||
	    idem_app_route(app, "POST", "/j", IDEM_ROUTE_JSON, nop,
	    NULL) != 0 ||
	    idem_app_problem(app, "declined", 402, "Declined", NULL) < 0) {
		TAP_OK(0, "row %lu: the application (%s)", row,
		    app ? idem_app_error(app) : "");
		idem_app_free(app);
		return NULL;
	}
	TAP_STREQ(idem_app_error(app), "", "row %lu: no refusal before", row);
	return app;
}

/* The call returned rc: -1, and app's error starts with why. */
static void
refused(idem_app *app, unsigned long row, int rc, const char *why)
{
	TAP_OK(rc == -1 && strncmp(idem_app_error(app), why,
	    strlen(why)) == 0, "row %lu: -1, %s (got %d, \"%s\")", row, why,
	    rc, idem_app_error(app));
	idem_app_free(app);
}

int
main(void)
{
	static const struct {
		int		(*call)(idem_app *);
		const char	*why;	/* the reason's start, after the call */
	} rows[] = {
		{ key_builtin, "idem_app_config_key([server] mine): the "
		    "section is the library's" },
		{ key_empty, "idem_app_config_key([mine] ): the section and "
		    "the key must not be empty" },
		{ body_no_route, "idem_app_route_body(POST /nope): no such "
		    "route" },
		{ body_no_json, "idem_app_route_body(GET /a): the route parses "
		    "no JSON body" },
		{ query_no_route, "idem_app_route_query(GET /nope): no such "
		    "route" },
		{ summary_bad_id, "idem_app_route_summary(GET /a): the "
		    "operation id must be" },
		{ response_bad_status, "idem_app_route_response(GET /a): status "
		    "302 is not a success" },
		{ response_twice, "idem_app_route_response(GET /a): status 200 "
		    "twice" },
		{ problems_unknown, "idem_app_route_problems(GET /a): nope is "
		    "no application problem type" },
		{ problems_library, "idem_app_route_problems(GET /a): not-found "
		    "is no application problem type" },
		{ webhook_bad_type, "idem_app_webhook: the type must be 1 to 128 "
		    "letters" },
		{ problem_status, "idem_app_problem(\"mine\", 302): the status "
		    "must be 400 to 599" },
	};
	idem_app	*app;
	size_t		 i, n = sizeof(routes) / sizeof(routes[0]);

	for (i = 0; i < n; i++)
		if ((app = fresh(i)) != NULL)
			refused(app, i, idem_app_route(app, routes[i].method,
			    routes[i].pattern, 0, routes[i].fn, NULL),
			    routes[i].why);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if ((app = fresh(n + i)) != NULL)
			refused(app, n + i, rows[i].call(app), rows[i].why);
	return TAP_DONE();
}
