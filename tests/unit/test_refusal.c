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

/* The refused calls: each returns what the call returned. */
static int route_lower(idem_app *a)
{ return idem_app_route(a, "get", "/x", 0, nop, NULL); }
static int route_twice(idem_app *a)
{ return idem_app_route(a, "GET", "/a", 0, nop, NULL); }
static int route_dots(idem_app *a)
{ return idem_app_route(a, "GET", "/x/../y", 0, nop, NULL); }
static int route_relative(idem_app *a)
{ return idem_app_route(a, "GET", "x", 0, nop, NULL); }
static int route_param_twice(idem_app *a)
{ return idem_app_route(a, "GET", "/x/:id/:id", 0, nop, NULL); }
static int route_no_handler(idem_app *a)
{ return idem_app_route(a, "GET", "/x", 0, NULL, NULL); }
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

int
main(void)
{
	static const struct {
		int		(*call)(idem_app *);
		const char	*why;	/* the reason's start, after the call */
	} rows[] = {
		{ route_lower, "idem_app_route(get /x): the method must be 1 "
		    "to 32 upper-case letters" },
		{ route_twice, "idem_app_route(GET /a): registered already" },
		{ route_dots, "idem_app_route(GET /x/../y): the pattern has a "
		    "'.' or '..' segment" },
		{ route_relative, "idem_app_route(GET x): the pattern must "
		    "start with '/'" },
		{ route_param_twice, "idem_app_route(GET /x/:id/:id): a "
		    "parameter's name is used twice" },
		{ route_no_handler, "idem_app_route(GET /x): no handler" },
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
	size_t		 i;
	int		 rc;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		app = idem_app_new("t");
		if (app == NULL ||
		    idem_app_route(app, "GET", "/a", 0, nop, NULL) != 0 ||
		    idem_app_route(app, "POST", "/j", IDEM_ROUTE_JSON, nop,
		    NULL) != 0 ||
		    idem_app_problem(app, "declined", 402, "Declined",
		    NULL) < 0) {
			TAP_OK(0, "row %lu: the application (%s)",
			    (unsigned long)i, app ? idem_app_error(app) : "");
			idem_app_free(app);
			continue;
		}
		TAP_STREQ(idem_app_error(app), "", "row %lu: no refusal before",
		    (unsigned long)i);
		rc = rows[i].call(app);
		TAP_OK(rc == -1 && strncmp(idem_app_error(app), rows[i].why,
		    strlen(rows[i].why)) == 0, "row %lu: -1, %s (got %d, \"%s\")",
		    (unsigned long)i, rows[i].why, rc, idem_app_error(app));
		idem_app_free(app);
	}
	return TAP_DONE();
}
