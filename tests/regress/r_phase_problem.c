/*
 * r_phase_problem.c - a phase that answers with a problem ends the
 * request: `return idem_resp_problem(...)` (0, a handler's return) from a
 * phase must not fall through to the next phase, whose 201 would be
 * stored instead; neither must a phase that sets a response and returns
 * IDEM_PHASE_NEXT.  The problem is what is answered, stored and replayed.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

static int	second_ran;

/* The handler idiom inside a phase: 0 after the response is set. */
static int
phase_refuse(idem_req *req, void *arg)
{
	(void)arg;
	return idem_resp_problem(req, IDEM_P_VALIDATION, "refused in phase 1");
}

/* A response set, then IDEM_PHASE_NEXT: the response still ends it. */
static int
phase_refuse_next(idem_req *req, void *arg)
{
	(void)arg;
	idem_resp_problem(req, IDEM_P_VALIDATION, "refused, then next");
	return IDEM_PHASE_NEXT;
}

static int
phase_create(idem_req *req, void *arg)
{
	(void)arg;
	second_ran++;
	return idem_resp_json(req, 201, "{\"second\":true}", 15);
}

static const struct idem_phase refuse_table[] = {
	{ "started", phase_refuse },
	{ "checked", phase_create },
	{ NULL, NULL },
};

static const struct idem_phase refuse_next_table[] = {
	{ "started", phase_refuse_next },
	{ "checked", phase_create },
	{ NULL, NULL },
};

static int
refuse(idem_req *req, void *arg)
{
	(void)arg;
	return idem_req_phases(req, refuse_table, NULL);
}

static int
refuse_next(idem_req *req, void *arg)
{
	(void)arg;
	return idem_req_phases(req, refuse_next_table, NULL);
}

static void
routes(idem_app *app)
{
	idem_app_route(app, "POST", "/refuse", IDEM_ROUTE_PHASED |
	    IDEM_ROUTE_JSON, refuse, NULL);
	idem_app_route(app, "POST", "/refuse-next", IDEM_ROUTE_PHASED |
	    IDEM_ROUTE_JSON, refuse_next, NULL);
}

static void
check(const char *path, const char *detail)
{
	struct rg_resp	 a, b;
	char		 key[96], v[64];

	rg_key(key, sizeof(key), path + 1);
	second_ran = 0;
	TAP_OK(rg_request("POST", path, key, "{}", &a) == 0 &&
	    a.status == 400, "%s: 400 (got %d)", path, a.status);
	TAP_OK(strstr(a.body, detail) != NULL, "%s: the phase's problem "
	    "(\"%s\") is the answer", path, detail);
	TAP_OK(second_ran == 0, "%s: the next phase did not run", path);
	TAP_STREQ(rg_scalar("SELECT state || ' ' || response_status FROM "
	    "idempotency_keys WHERE key = $1", key, v, sizeof(v)),
	    "completed 400", "%s: the 400 is stored", path);
	TAP_OK(rg_request("POST", path, key, "{}", &b) == 0 &&
	    b.status == 400 && strcmp(a.body, b.body) == 0,
	    "%s: the retry replays the 400 (got %d)", path, b.status);
	TAP_OK(second_ran == 0, "%s: and runs no phase", path);
	rg_resp_free(&a);
	rg_resp_free(&b);
}

int
main(void)
{
	rg_setup("r_phase_problem", routes);
	TAP_OK(IDEM_PHASE_NEXT != 0, "IDEM_PHASE_NEXT is not a handler's 0");
	check("/refuse", "refused in phase 1");
	check("/refuse-next", "refused, then next");
	rg_teardown();
	return TAP_DONE();
}
