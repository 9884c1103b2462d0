/*
 * r_prepared.c - [database] prepared_statements = auto on a direct
 * connection: the statements with parameters are prepared once per
 * connection and executed by name; a session that lost them (DEALLOCATE
 * ALL, as a pooler switching sessions would) answers one 503 with nothing
 * written, and the connection sends its statements unnamed from then on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

#define NAMED	"SELECT count(*) FROM pg_prepared_statements " \
		"WHERE name LIKE 'idem\\_%'"

static void
create(const char *tag, int want, const char *what)
{
	struct rg_resp	 r;
	char		 key[96], body[64];

	rg_key(key, sizeof(key), tag);
	snprintf(body, sizeof(body), "{\"note\":\"%s\"}", tag);
	TAP_OK(rg_request("POST", "/things", key, body, &r) == 0 &&
	    r.status == want, "%s: %d (got %d)", what, want, r.status);
	rg_resp_free(&r);
}

int
main(void)
{
	char		 v[64], w[64], h[64];
	unsigned	 noted;
	struct rg_resp	 r;
	char		 key[96];

	rg_setup("r_prepared", rg_things_routes);
	create("a", 201, "first create");
	rg_pool_scalar(NAMED, v, sizeof(v), &noted);
	/* idem_claim() and idem_complete(); the handler's INSERT runs
	 * through libpq itself (PQexecParams), not the middleware. */
	TAP_OK(atoi(v) == 2 && noted == 2, "two statements prepared on the "
	    "connection (server %s, noted %u)", v, noted);
	create("b", 201, "second create");
	rg_pool_scalar(NAMED, w, sizeof(w), &noted);
	TAP_STREQ(w, v, "the second create prepared nothing more");

	/* The session forgets them; the pool does not know. */
	rg_pool_scalar("DEALLOCATE ALL", v, sizeof(v), NULL);
	rg_key(key, sizeof(key), "lost");
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"lost\"}",
	    &r) == 0 && r.status == 503, "statements gone: 503 (got %d)",
	    r.status);
	TAP_STREQ(rg_header(&r, "Retry-After", h, sizeof(h)) ? h : "", "1",
	    "with Retry-After: 1");
	TAP_STREQ(rg_header(&r, "Content-Type", h, sizeof(h)) ? h : "",
	    "application/problem+json", "as a problem (RFC 9457)");
	TAP_OK(strstr(r.body, "\"status\":503") != NULL,
	    "whose status is 503");
	rg_resp_free(&r);
	TAP_STREQ(rg_scalar("SELECT count(*) FROM idempotency_keys WHERE "
	    "key = $1", key, v, sizeof(v)), "0", "no key record written");
	TAP_STREQ(rg_scalar("SELECT count(*) FROM regress_things WHERE "
	    "note = 'lost' AND api_key_id = $1", rg_tenant(), v, sizeof(v)),
	    "0", "the handler's effect not written");
	TAP_OK(rg_request("POST", "/things", key, "{\"note\":\"lost\"}",
	    &r) == 0 && r.status == 201, "its retry: 201 (got %d)", r.status);
	rg_resp_free(&r);
	rg_pool_scalar(NAMED, v, sizeof(v), &noted);
	TAP_OK(atoi(v) == 0 && noted == 0, "auto: nothing prepared again "
	    "(server %s, noted %u)", v, noted);
	TAP_OK(rg_things() == 3, "three things in all");
	rg_teardown();
	return TAP_DONE();
}
