/*
 * r_prepared_on.c - prepared_statements = on: a session that lost its
 * statements answers one 503, then prepares them again.
 */
#include <stdio.h>
#include <stdlib.h>

#include "regress.h"
#include "tap.h"

#define NAMED	"SELECT count(*) FROM pg_prepared_statements " \
		"WHERE name LIKE 'idem\\_%'"

int
main(void)
{
	struct rg_resp	 r;
	char		 key[96], v[64];
	unsigned	 noted;
	int		 i, st[3];

	rg_config = "prepared_statements = on\n";
	rg_setup("r_prepared_on", rg_things_routes);
	for (i = 0; i < 3; i++) {
		if (i == 1)
			rg_pool_scalar("DEALLOCATE ALL", v, sizeof(v), NULL);
		rg_key(key, sizeof(key), "k");
		st[i] = rg_request("POST", "/things", key, "{\"note\":\"on\"}",
		    &r) == 0 ? r.status : -1;
		rg_resp_free(&r);
	}
	TAP_OK(st[0] == 201 && st[1] == 503 && st[2] == 201, "201, then 503 "
	    "once the session lost them, then 201 (got %d %d %d)", st[0],
	    st[1], st[2]);
	rg_pool_scalar(NAMED, v, sizeof(v), &noted);
	TAP_OK(atoi(v) == 2 && noted == 2, "prepared again (server %s, "
	    "noted %u)", v, noted);
	rg_teardown();
	return TAP_DONE();
}
