/*
 * r_prepared_off.c - prepared_statements = off: every statement is sent
 * unnamed (as pgbouncer before 1.21 in transaction mode needs), and the
 * middleware works the same.
 */
#include <stdio.h>
#include <stdlib.h>

#include "regress.h"
#include "tap.h"

int
main(void)
{
	struct rg_resp	 a, b;
	char		 key[96], v[64];
	unsigned	 noted;

	rg_config = "prepared_statements = off\n";
	rg_setup("r_prepared_off", rg_things_routes);
	rg_key(key, sizeof(key), "k");
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"off\"}", &a) ==
	    0 && a.status == 201, "create: 201 (got %d)", a.status);
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"off\"}", &b) ==
	    0 && b.status == 201, "replay: 201 (got %d)", b.status);
	TAP_STREQ(b.body, a.body, "the same body");
	rg_pool_scalar("SELECT count(*) FROM pg_prepared_statements", v,
	    sizeof(v), &noted);
	TAP_OK(atoi(v) == 0 && noted == 0, "nothing prepared (server %s, "
	    "noted %u)", v, noted);
	rg_resp_free(&a);
	rg_resp_free(&b);
	rg_teardown();
	return TAP_DONE();
}
