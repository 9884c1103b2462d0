/*
 * r_validation.c - a declared body with several failures is answered 400
 * validation-error listing every one (RFC 9457 extension member
 * "errors": [{"pointer", "detail"}]), the enum's allowed values named and
 * no pattern echoed; the detail names the first.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

static const char *const methods[] = { "card", "sepa", NULL };

static const struct idem_body order = { (const struct idem_member[]){
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 1000 },
	{ .name = "method", .type = IDEM_T_STRING, .oneof = methods },
	{ .name = "ref", .type = IDEM_T_STRING, .pattern = "^[A-Z]{3}-[0-9]+$" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static int
created(idem_req *req, void *arg)
{
	(void)arg;
	return idem_resp_json(req, 201, "{}", 2);
}

static void
routes(idem_app *app)
{
	idem_app_route(app, "POST", "/orders", IDEM_ROUTE_IDEMPOTENT,
	    created, NULL);
	idem_app_route_body(app, "POST", "/orders", &order);
}

int
main(void)
{
	struct rg_resp	 r;
	char		 key[96];

	rg_setup("r_validation", routes);
	rg_key(key, sizeof(key), "v");
	TAP_OK(rg_request("POST", "/orders", key, "{\"amount\":\"5\","
	    "\"method\":\"cash\",\"ref\":\"abc\",\"note\":1}", &r) == 0 &&
	    r.status == 400, "four failures: 400 (got %d)", r.status);
	TAP_OK(strstr(r.body, "\"type\":\"/problems/validation-error\"") !=
	    NULL, "validation-error");
	TAP_OK(strstr(r.body, "\"detail\":\"note: unknown member (and 3 "
	    "more: see errors)\"") != NULL, "the detail names the first and "
	    "counts the others: %s", r.body);
	TAP_OK(strstr(r.body, "\"errors\":["
	    "{\"pointer\":\"/note\",\"detail\":\"unknown member\"},"
	    "{\"pointer\":\"/amount\",\"detail\":\"must be an integer\"},"
	    "{\"pointer\":\"/method\",\"detail\":\"must be one of: \\\"card\\\", "
	    "\\\"sepa\\\"\"},"
	    "{\"pointer\":\"/ref\",\"detail\":\"is not in the expected "
	    "format\"}]}") != NULL, "errors lists all four, in order");
	TAP_OK(strstr(r.body, "[A-Z]") == NULL, "the pattern is not echoed");
	rg_resp_free(&r);

	rg_key(key, sizeof(key), "w");
	TAP_OK(rg_request("POST", "/orders", key, "{\"amount\":0}", &r) == 0 &&
	    r.status == 400 && strstr(r.body, "\"detail\":\"amount: must be "
	    "an integer from 1 to 1000\"") != NULL && strstr(r.body,
	    "\"errors\":[{\"pointer\":\"/amount\",\"detail\":\"must be an "
	    "integer from 1 to 1000\"}]") != NULL, "one failure: the detail "
	    "as before, errors with one entry: %s", r.body);
	rg_resp_free(&r);
	rg_key(key, sizeof(key), "x");
	TAP_OK(rg_request("POST", "/orders", key, "{\"amount\":5,\"method\":"
	    "\"sepa\",\"ref\":\"ABC-12\"}", &r) == 0 && r.status == 201,
	    "a valid body: 201");
	rg_resp_free(&r);
	rg_teardown();
	return TAP_DONE();
}
