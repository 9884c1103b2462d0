/*
 * r_resume.c - a phased request that fails after its first phase commit
 * releases its lease; the retry with the same key resumes at the stored
 * recovery point instead of running the committed phase again.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

int
main(void)
{
	struct rg_resp	 a, b;
	char		 key[96], v[64];

	rg_setup("r_resume", rg_things_routes);
	rg_key(key, sizeof(key), "a");
	rg_fail_after_phase = 1;
	TAP_OK(rg_request("POST", "/phased", key, "{\"note\":\"p\"}", &a) ==
	    0 && a.status == 500, "fails after its phase commit: 500 (got %d)",
	    a.status);
	TAP_STREQ(rg_scalar("SELECT state || ' ' || recovery_point FROM "
	    "idempotency_keys WHERE key = $1", key, v, sizeof(v)),
	    "in_progress inserted", "the record keeps its recovery point");
	TAP_OK(rg_request("POST", "/phased", key, "{\"note\":\"p\"}", &b) ==
	    0 && b.status == 201, "the retry: 201 (got %d)", b.status);
	TAP_STREQ(b.body, "{\"resumed\":true}",
	    "it resumed at the recovery point");
	TAP_OK(rg_things() == 1, "the committed phase ran once");
	TAP_STREQ(rg_scalar("SELECT state FROM idempotency_keys WHERE "
	    "key = $1", key, v, sizeof(v)), "completed", "completed");
	rg_resp_free(&a);
	rg_resp_free(&b);
	rg_teardown();
	return TAP_DONE();
}
