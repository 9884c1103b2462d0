/*
 * r_bad_key.c - a malformed Idempotency-Key is 400 idempotency-key-invalid
 * before anything runs or is stored; a missing one is
 * idempotency-key-missing.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

int
main(void)
{
	static const char *const bad[] = { "", "two words", "\"unterminated",
	    "\"a\";p=1", "caf\xc3\xa9", "12345", "?1", "K;x=1", "K, L",
	    "\"\"", ":aGVsbG8=:" };
	struct rg_resp	 r;
	size_t		 i;

	rg_setup("r_bad_key", rg_things_routes);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		TAP_OK(rg_request("POST", "/things", bad[i], "{\"note\":\"k\"}",
		    &r) == 0 && r.status == 400 &&
		    strstr(r.body, "/idempotency-key-invalid\"") != NULL,
		    "key [%s]: 400 idempotency-key-invalid (got %d)", bad[i],
		    r.status);
		rg_resp_free(&r);
	}
	TAP_OK(rg_request("POST", "/things", NULL, "{\"note\":\"k\"}", &r) ==
	    0 && r.status == 400 &&
	    strstr(r.body, "/idempotency-key-missing\"") != NULL,
	    "no key: 400 idempotency-key-missing (got %d)", r.status);
	rg_resp_free(&r);
	TAP_OK(rg_things() == 0, "nothing ran");
	rg_teardown();
	return TAP_DONE();
}
