/*
 * r_create.c - a new key executes: 201 from the handler, one row, and the
 * record stored completed with that response.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

int
main(void)
{
	struct rg_resp	 r;
	char		 key[96], h[64], v[64];

	rg_setup("r_create", rg_things_routes);
	rg_key(key, sizeof(key), "a");
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"create\"}",
	    &r) == 0, "the exchange over FastCGI records completes");
	TAP_OK(r.status == 201, "a new key: the handler's 201 (got %d)",
	    r.status);
	TAP_OK(strncmp(r.body, "{\"id\":", 6) == 0, "its body: %s", r.body);
	TAP_OK(rg_header(&r, "Idempotent-Replayed", h, sizeof(h)) == NULL,
	    "not a replay");
	TAP_OK(rg_things() == 1, "one row written");
	TAP_STREQ(rg_scalar("SELECT state || ' ' || response_status FROM "
	    "idempotency_keys WHERE key = $1", key, v, sizeof(v)),
	    "completed 201", "the record is completed with the 201");
	rg_resp_free(&r);
	rg_teardown();
	return TAP_DONE();
}
