/*
 * r_reused.c - a key already used for another request (another body) is
 * refused with 422 idempotency-key-reused, and nothing runs.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

int
main(void)
{
	struct rg_resp	 a, b;
	char		 key[96];

	rg_setup("r_reused", rg_things_routes);
	rg_key(key, sizeof(key), "a");
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"one\"}", &a) ==
	    0 && a.status == 201, "first: 201 (got %d)", a.status);
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"two\"}", &b) ==
	    0 && b.status == 422, "another body, same key: 422 (got %d)",
	    b.status);
	TAP_OK(strstr(b.body, "/idempotency-key-reused\"") != NULL,
	    "problem type idempotency-key-reused: %s", b.body);
	TAP_OK(rg_things() == 1, "the second request did not run");
	rg_resp_free(&a);
	rg_resp_free(&b);
	rg_teardown();
	return TAP_DONE();
}
