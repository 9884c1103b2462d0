/*
 * test_problem.c - problem types an application defines
 * (idem_app_problem()): which definitions are refused and why
 * (idem_app_error()), that 409 and 422 are the application's too, and
 * that a response of one has the same shape and bytes as the library's
 * own, with its Link.
 */
#include <stdio.h>
#include <string.h>

#include "private.h"
#include "tap.h"

/* The value of the response's header name, or NULL. */
static const char *
header(const idem_req *req, const char *name)
{
	size_t	i;

	for (i = 0; i < req->nheaders; i++)
		if (strcasecmp(req->hname[i], name) == 0)
			return req->hvalue[i];
	return NULL;
}

int
main(void)
{
	static const struct {
		const char	*slug, *title, *doc;
		int		 status;
		const char	*why;	/* NULL: defined */
	} cases[] = {
		{ "payment-declined", "Payment declined", "The card was "
		    "declined; the answer is stored for this key.", 402, NULL },
		{ "payment-declined", "Again", NULL, 402, "defined already" },
		{ "not-found", "Mine", NULL, 404, "the library's" },
		/* a web server's type (conf/errors): its page is the library's */
		{ "bad-gateway", "Mine", NULL, 502, "the library's" },
		/* the key protocol's namespace, whatever the status */
		{ "idempotency-key-busy", "Busy", NULL, 409, "the library's" },
		{ "", "Empty", NULL, 400, "1 to 64 lower-case" },
		{ "Upper", "Case", NULL, 400, "1 to 64 lower-case" },
		{ "a b", "Space", NULL, 400, "1 to 64 lower-case" },
		{ "ok-type", "Status 200", NULL, 200, "400 to 599" },
		{ "ok-type", "Status 600", NULL, 600, "400 to 599" },
		{ "ok-type", "Line\nbreak", NULL, 410, "the title must" },
		{ "ok-type", "", NULL, 410, "the title must" },
		{ "ok-type", "Fine", "Line\nbreak", 410, "the doc must" },
		/* 409 and 422 are the application's too: a client tells them
		 * from the key protocol's by the type */
		{ "seats-unavailable", "Seats unavailable", NULL, 409, NULL },
		{ "bad-state", "Unprocessable", NULL, 422, NULL },
		{ "ok-type", "Fine", NULL, 410, NULL },
		{ "in-use", "Locked", NULL, 423, NULL },
	};
	idem_app	*app = idem_app_new("t");
	idem_req	 req;
	char		 slug[16];
	size_t		 i;
	int		 p, first = -1, conflict = -1;

	TAP_STREQ(idem_app_error(app), "", "no refusal yet: \"\"");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		app->error[0] = '\0';
		p = idem_app_problem(app, cases[i].slug, cases[i].status,
		    cases[i].title, cases[i].doc);
		if (i == 0)
			first = p;
		if (cases[i].status == 409 && cases[i].why == NULL)
			conflict = p;
		/* The title may hold a line break: not in a TAP line. */
		TAP_OK((p >= IDEM_P__MAX) == (cases[i].why == NULL),
		    "case %lu, \"%s\" %d: %s (got %d)", (unsigned long)i,
		    cases[i].slug, cases[i].status,
		    cases[i].why == NULL ? "defined" : "refused", p);
		TAP_OK(cases[i].why == NULL ? idem_app_error(app)[0] == '\0' :
		    strstr(idem_app_error(app), cases[i].why) != NULL &&
		    strncmp(idem_app_error(app), "idem_app_problem(", 17) == 0,
		    "case %lu: why: \"%s\"", (unsigned long)i,
		    idem_app_error(app));
	}
	TAP_OK(first == IDEM_P__MAX, "the first type is IDEM_P__MAX");
	TAP_OK(idem_problem_count(app) == IDEM_P__MAX + 5,
	    "five types defined (%d)", idem_problem_count(app));
	/* The first reason sticks: a program may check once. */
	app->error[0] = '\0';
	idem_app_problem(app, "", 400, "x", NULL);
	idem_app_problem(app, "ok-type", 400, "x", NULL);
	TAP_OK(strstr(idem_app_error(app), "lower-case") != NULL,
	    "two refusals: the first's reason kept (%s)", idem_app_error(app));
	for (i = 0; i < IDEM_APP_PROBLEMS_MAX; i++) {
		snprintf(slug, sizeof(slug), "t-%lu", (unsigned long)i);
		app->error[0] = '\0';
		if (idem_app_problem(app, slug, 400, "T", NULL) == -1)
			break;
	}
	TAP_OK(i == IDEM_APP_PROBLEMS_MAX - 5 &&
	    strstr(idem_app_error(app), "too many") != NULL,
	    "one type past %d refused: %s", IDEM_APP_PROBLEMS_MAX,
	    idem_app_error(app));

	memset(&req, 0, sizeof(req));
	req.app = app;
	strcpy(req.request_id, "0123456789abcdef");
	TAP_STREQ(idem_req_id(&req), "0123456789abcdef",
	    "idem_req_id(): the request id of its logs and problems");
	TAP_OK(idem_resp_problem(&req, (enum idem_problem)first,
	    "the card was declined (payment %s)", "pay_1") == 0,
	    "a response of the application's type");
	TAP_OK(req.status == 402, "its status (%d)", req.status);
	TAP_STREQ(req.ctype, "application/problem+json", "its media type");
	idem_buf_nul(&req.resp);
	TAP_STREQ(req.resp.p, "{\"type\":\"/problems/payment-declined\","
	    "\"title\":\"Payment declined\",\"status\":402,\"detail\":\"the "
	    "card was declined (payment pay_1)\",\"instance\":"
	    "\"0123456789abcdef\"}", "its body, as the library's own types");
	TAP_STREQ(header(&req, "Link"), "</problems/payment-declined>; "
	    "rel=\"describedby\"", "its Link, whatever its status");
	TAP_OK(header(&req, "Retry-After") == NULL, "no Retry-After");
	idem_resp_reset(&req);
	TAP_OK(idem_resp_problem(&req, (enum idem_problem)conflict,
	    "seats A1 and A2 are taken") == 0 && req.status == 409 &&
	    header(&req, "Retry-After") == NULL,
	    "the application's 409: no Retry-After (that is the in-flight "
	    "one's)");
	idem_buf_nul(&req.resp);
	TAP_OK(strstr(req.resp.p, "\"type\":\"/problems/seats-unavailable\"")
	    != NULL && strstr(req.resp.p, "\"instance\":\"0123456789abcdef\"")
	    != NULL, "its type and instance: %s", req.resp.p);
	TAP_STREQ(header(&req, "Link"), "</problems/seats-unavailable>; "
	    "rel=\"describedby\"", "its Link");
	idem_resp_reset(&req);
	TAP_OK(idem_resp_problem(&req, IDEM_P_KEY_IN_FLIGHT, "busy") == 0 &&
	    req.status == 409 && header(&req, "Retry-After") != NULL,
	    "idempotency-key-in-flight's 409 keeps its Retry-After");
	idem_resp_reset(&req);
	TAP_OK(idem_resp_problem(&req, (enum idem_problem)(IDEM_P__MAX + 99),
	    "x") == 0 && req.status == 500, "an undefined value: 500");
	idem_resp_reset(&req);
	idem_buf_free(&req.resp);
	idem_app_free(app);
	TAP_STREQ(idem_app_error(NULL), "no application (idem_app_new() "
	    "failed: out of memory)", "idem_app_error(NULL)");
	return TAP_DONE();
}
