/*
 * r_in_flight.c - a duplicate while the first request still runs (sent
 * from inside its handler, which holds the key's lock) gets 409
 * idempotency-key-in-flight with Retry-After, and only the first runs.
 */
#include <stdio.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

static char		key[96];
static struct rg_resp	dup;
static int		sent;

static void
duplicate(const char *note)
{
	(void)note;
	if (sent++ == 0)
		rg_request("POST", "/things", key, "{\"note\":\"f\"}", &dup);
}

int
main(void)
{
	struct rg_resp	 a;
	char		 h[64];

	rg_setup("r_in_flight", rg_things_routes);
	rg_key(key, sizeof(key), "a");
	rg_in_handler = duplicate;
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"f\"}", &a) ==
	    0 && a.status == 201, "the first: 201 (got %d)", a.status);
	TAP_OK(sent == 1 && dup.status == 409,
	    "the duplicate during it: 409 (got %d)", dup.status);
	TAP_OK(dup.body != NULL &&
	    strstr(dup.body, "/idempotency-key-in-flight\"") != NULL,
	    "problem type idempotency-key-in-flight");
	TAP_STREQ(rg_header(&dup, "Retry-After", h, sizeof(h)) ? h : "", "1",
	    "Retry-After: 1");
	TAP_OK(rg_things() == 1, "one row: the duplicate did not run");
	rg_resp_free(&a);
	rg_resp_free(&dup);
	rg_teardown();
	return TAP_DONE();
}
