/*
 * r_remember.c - [route] remember on an atomic and on a phased route: once
 * a key's record has expired and been evicted (idem_evict()), the same
 * request is 410 idempotency-key-expired, runs nothing and writes no
 * record (the phased claim inserts none); another body under the key runs;
 * idem_forget() deletes the trace once its window has passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

static PGconn	*db;

/* Run sql (with $1 the tenant) and expect the scalar want. */
static void
expect_sql(const char *sql, const char *want, const char *what)
{
	char	v[64];

	TAP_STREQ(rg_scalar(sql, rg_tenant(), v, sizeof(v)), want, "%s", what);
}

static void
route(const char *path)
{
	struct rg_resp	 a, b, c;
	char		 key[96], body[128], other[128], sql[512];
	long		 n = -1;

	rg_key(key, sizeof(key), path + 1);
	snprintf(body, sizeof(body), "{\"note\":\"%s\"}", key);
	snprintf(other, sizeof(other), "{\"note\":\"%s other\"}", key);
	TAP_OK(rg_request("POST", path, key, body, &a) == 0 && a.status == 201,
	    "%s: first: 201 (got %d)", path, a.status);
	snprintf(sql, sizeof(sql), "WITH u AS (UPDATE idempotency_keys SET "
	    "expires_at = now() - interval '1 second' WHERE api_key_id = "
	    "$1::bigint AND key = '%s' AND remember_ms = 86400000 "
	    "RETURNING 1) SELECT count(*) FROM u", key);
	expect_sql(sql, "1", "  its record, remembering 1d, expired by SQL");
	TAP_OK(idem_evict(db, 1000, 0, 0, &n) == 0 && n >= 1,
	    "  idem_evict: 0, %ld evicted", n);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM idem_remembered r, "
	    "api_keys a WHERE a.id = $1::bigint AND r.key_digest = "
	    "idem_key_digest64(a.secret_hash, '%s')", key);
	expect_sql(sql, "1", "  its trace kept");

	TAP_OK(rg_request("POST", path, key, body, &b) == 0 && b.status == 410,
	    "  the same request again: 410 (got %d)", b.status);
	TAP_OK(strstr(b.body, "/idempotency-key-expired\"") != NULL &&
	    strstr(b.body, "\"status\":410") != NULL,
	    "  problem type idempotency-key-expired: %s", b.body);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM regress_things WHERE "
	    "api_key_id = $1::bigint AND note = '%s'", key);
	expect_sql(sql, "1", "  it did not run again");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM idempotency_keys WHERE"
	    " api_key_id = $1::bigint AND key = '%s'", key);
	expect_sql(sql, "0", "  nor write a record");

	TAP_OK(rg_request("POST", path, key, other, &c) == 0 && c.status == 201,
	    "  another body under the key: 201 (got %d)", c.status);
	expect_sql(sql, "1", "  its record written");

	snprintf(sql, sizeof(sql), "WITH u AS (UPDATE idem_remembered r SET "
	    "forget_at = now() - interval '1 minute' FROM api_keys a WHERE "
	    "a.id = $1::bigint AND r.key_digest = "
	    "idem_key_digest64(a.secret_hash, '%s') RETURNING 1) "
	    "SELECT count(*) FROM u", key);
	expect_sql(sql, "1", "  the trace's window ended by SQL");
	n = -1;
	TAP_OK(idem_forget(db, 1000, 0, &n) == 0 && n >= 1,
	    "  idem_forget: 0, %ld forgotten", n);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM idem_remembered r, "
	    "api_keys a WHERE a.id = $1::bigint AND r.key_digest = "
	    "idem_key_digest64(a.secret_hash, '%s')", key);
	expect_sql(sql, "0", "  no trace left");
	rg_resp_free(&a);
	rg_resp_free(&b);
	rg_resp_free(&c);
}

int
main(void)
{
	rg_config = "[route \"POST /things\"]\nremember = 1d\n"
	    "[route \"POST /phased\"]\nremember = 1d\n";
	rg_setup("r_remember", rg_things_routes);
	if ((db = PQconnectdb(getenv("IDEM_REGRESS_CONNINFO"))) == NULL ||
	    PQstatus(db) != CONNECTION_OK) {
		printf("Bail out! r_remember: cannot connect\n");
		return 1;
	}
	route("/things");
	route("/phased");
	PQfinish(db);
	rg_teardown();
	return TAP_DONE();
}
