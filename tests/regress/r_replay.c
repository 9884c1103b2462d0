/*
 * r_replay.c - the same key and request again: the stored response, byte
 * for byte, with Idempotent-Replayed: true, and the handler not run again.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

int
main(void)
{
	struct rg_resp	 a, b;
	char		 key[96], h[64];

	rg_setup("r_replay", rg_things_routes);
	rg_key(key, sizeof(key), "a");
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"x\"}", &a) ==
	    0 && a.status == 201, "first: 201 (got %d)", a.status);
	/* Another spelling of the same JSON: the canonical form is equal. */
	TAP_OK(rg_request("POST", "/things", key, "{ \"note\" : \"x\" }",
	    &b) == 0 && b.status == 201, "again: 201 (got %d)", b.status);
	TAP_STREQ(b.body, a.body, "the stored body, byte for byte");
	TAP_STREQ(rg_header(&b, "Idempotent-Replayed", h, sizeof(h)) ?
	    h : "", "true", "Idempotent-Replayed: true");
	TAP_STREQ(rg_header(&b, "Location", h, sizeof(h)) ? h : "",
	    "/things/x", "the handler's header is replayed");
	TAP_OK(rg_things() == 1, "the handler ran once");
	rg_resp_free(&a);
	rg_resp_free(&b);
	rg_teardown();
	return TAP_DONE();
}
