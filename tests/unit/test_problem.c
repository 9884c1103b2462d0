/*
 * test_problem.c - problem types an application defines
 * (idem_app_problem()): which definitions are refused, and that a response
 * of one has the same shape, bytes and headers as the library's own.
 */
#include <stdio.h>
#include <string.h>

#include "private.h"
#include "tap.h"

int
main(void)
{
	static const struct {
		const char	*slug, *title, *doc;
		int		 status, ok;
	} cases[] = {
		{ "payment-declined", "Payment declined", "The card was "
		    "declined; the answer is stored for this key.", 402, 1 },
		{ "payment-declined", "Again", NULL, 402, 0 },	/* twice */
		{ "not-found", "Mine", NULL, 404, 0 },	/* the library's */
		{ "", "Empty", NULL, 400, 0 },
		{ "Upper", "Case", NULL, 400, 0 },
		{ "a b", "Space", NULL, 400, 0 },
		{ "ok-type", "Status 200", NULL, 200, 0 },
		{ "ok-type", "Status 600", NULL, 600, 0 },
		{ "ok-type", "Line\nbreak", NULL, 410, 0 },
		{ "ok-type", "", NULL, 410, 0 },
		{ "ok-type", "Fine", "Line\nbreak", 410, 0 },
		/* the key protocol's statuses: retry with the same key (409),
		 * use a new key (422); never a handler's stored answer */
		{ "busy-here", "Conflict", NULL, 409, 0 },
		{ "bad-state", "Unprocessable", NULL, 422, 0 },
		{ "ok-type", "Fine", NULL, 410, 1 },
		{ "in-use", "Locked", NULL, 423, 1 },
	};
	idem_app	*app = idem_app_new("t");
	idem_req	 req;
	size_t		 i;
	int		 p, first = -1;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		p = idem_app_problem(app, cases[i].slug, cases[i].status,
		    cases[i].title, cases[i].doc);
		if (i == 0)
			first = p;
		/* The title may hold a line break: not in a TAP line. */
		TAP_OK((p >= IDEM_P__MAX) == cases[i].ok,
		    "case %lu, \"%s\" %d: %s (got %d)", (unsigned long)i,
		    cases[i].slug, cases[i].status,
		    cases[i].ok ? "defined" : "refused", p);
	}
	TAP_OK(first == IDEM_P__MAX, "the first type is IDEM_P__MAX");
	TAP_OK(idem_problem_count(app) == IDEM_P__MAX + 3,
	    "three types defined (%d)", idem_problem_count(app));

	memset(&req, 0, sizeof(req));
	req.app = app;
	strcpy(req.request_id, "0123456789abcdef");
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
	TAP_OK(!idem_resp_has_header(&req, "Link") &&
	    !idem_resp_has_header(&req, "Retry-After"),
	    "no Link (not 400/422) and no Retry-After");
	TAP_OK(idem_resp_problem(&req, (enum idem_problem)(IDEM_P__MAX + 7),
	    "x") == 0 && req.status == 500, "an undefined value: 500");
	idem_resp_reset(&req);
	idem_buf_free(&req.resp);
	idem_app_free(app);
	return TAP_DONE();
}
