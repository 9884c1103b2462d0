/*
 * auth.c - tenants.  A request's "Authorization: Bearer <secret>" is
 * resolved to an api_keys row by the SHA-256 of the secret; the database
 * never holds a secret, and the stored hash is compared in constant time.
 *
 * A small in-process cache remembers hashes the database confirmed in the
 * last IDEM_AUTH_CACHE_MS, so that an idempotent route can refuse an
 * unknown secret before it canonicalises and parses the body, without a
 * third round trip for a known one.  The cache only lets a request get as
 * far as that: flight 1 (idem_claim()) still verifies the secret.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "private.h"

#define SECRET_MAX	256
/* Direct-mapped by the hash (uniform: SHA-256); a collision only costs a
 * round trip, and only secrets the database confirmed ever get a slot. */
#define AUTHC_SLOTS	1024

struct idem_authc {
	pthread_mutex_t		 mu;
	struct idem_authc_entry	 slot[AUTHC_SLOTS];
};

static long long
mono_ms(void)
{
	return idem_now_us() / 1000;
}

int
idem_bearer_hash(idem_req *req)
{
	const char	*h, *s;
	size_t		 n, i;

	if ((h = idem_req_header(req, "Authorization")) == NULL ||
	    strncasecmp(h, "Bearer ", 7) != 0)
		return -1;
	for (s = h + 7; *s == ' '; s++)
		continue;
	if ((n = strlen(s)) == 0 || n > SECRET_MAX)
		return -1;
	for (i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f)
			return -1;
	idem_sha256(s, n, req->secret_hash);
	return 0;
}

/* --- the cache ----------------------------------------------------------- */

enum idem_authc_state
idem_authc_state(const struct idem_authc_entry *e,
    const unsigned char hash[32], long long now_ms)
{
	if (e->tenant == 0 || !idem_secret_eq(e->hash, hash, 32))
		return IDEM_AUTHC_ABSENT;
	return now_ms < e->expires_ms ? IDEM_AUTHC_FRESH : IDEM_AUTHC_STALE;
}

struct idem_authc *
idem_authc_new(void)
{
	struct idem_authc	*c;

	if ((c = calloc(1, sizeof(*c))) != NULL &&
	    pthread_mutex_init(&c->mu, NULL) != 0) {
		free(c);
		c = NULL;
	}
	return c;
}

void
idem_authc_free(struct idem_authc *c)
{
	if (c == NULL)
		return;
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static struct idem_authc_entry *
authc_slot(struct idem_authc *c, const unsigned char hash[32])
{
	return &c->slot[((unsigned)hash[0] << 8 | hash[1]) % AUTHC_SLOTS];
}

enum idem_authc_state
idem_authc_get(struct idem_authc *c, const unsigned char hash[32],
    long long now_ms)
{
	enum idem_authc_state	 st;

	if (c == NULL)
		return IDEM_AUTHC_ABSENT;
	pthread_mutex_lock(&c->mu);
	st = idem_authc_state(authc_slot(c, hash), hash, now_ms);
	pthread_mutex_unlock(&c->mu);
	return st;
}

void
idem_authc_put(struct idem_authc *c, const unsigned char hash[32],
    int64_t tenant, long long verified_ms)
{
	struct idem_authc_entry	*e;

	if (c == NULL || tenant == 0)
		return;
	pthread_mutex_lock(&c->mu);
	e = authc_slot(c, hash);
	/* The later expiry wins; each ends IDEM_AUTH_CACHE_MS after a
	 * confirmation by the database. */
	if (idem_authc_state(e, hash, verified_ms) == IDEM_AUTHC_ABSENT ||
	    e->expires_ms < verified_ms + IDEM_AUTH_CACHE_MS) {
		memcpy(e->hash, hash, 32);
		e->tenant = tenant;
		e->expires_ms = verified_ms + IDEM_AUTH_CACHE_MS;
	}
	pthread_mutex_unlock(&c->mu);
}

void
idem_authc_forget(struct idem_authc *c, const unsigned char hash[32])
{
	struct idem_authc_entry	*e;

	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	e = authc_slot(c, hash);
	if (idem_secret_eq(e->hash, hash, 32))
		memset(e, 0, sizeof(*e));
	pthread_mutex_unlock(&c->mu);
}

/* --- the database -------------------------------------------------------- */

enum idem_auth_result
idem_auth(idem_req *req)
{
	const char		*vals[1];
	int			 lens[1], fmts[1] = { 1 };
	PGresult		*r;
	long long		 t0;
	enum idem_auth_result	 rc = IDEM_AUTH_DENIED;

	if (idem_bearer_hash(req) == -1)
		return IDEM_AUTH_DENIED;

	if (idem_req_conn(req) == NULL)
		return IDEM_AUTH_UNAVAILABLE;
	vals[0] = (const char *)req->secret_hash;
	lens[0] = 32;
	/* Before the query: the entry must not outlive what it saw. */
	t0 = mono_ms();
	r = PQexecParams(req->db, "SELECT id, secret_hash FROM api_keys "
	    "WHERE secret_hash = $1 AND revoked_at IS NULL",
	    1, NULL, vals, lens, fmts, 1);
	req->round_trips++;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		idem_log(IDEM_LOG_ERROR, "auth: %s", PQerrorMessage(req->db));
		req->db_unavailable = 1;
		rc = IDEM_AUTH_UNAVAILABLE;
	} else if (PQntuples(r) == 1 && PQgetlength(r, 0, 0) == 8 &&
	    idem_secret_eq(req->secret_hash, PQgetvalue(r, 0, 1),
	    (size_t)PQgetlength(r, 0, 1))) {
		req->tenant = idem_pg_int8(r, 0, 0);
		rc = IDEM_AUTH_OK;
	}
	PQclear(r);
	if (rc == IDEM_AUTH_OK)
		idem_authc_put(req->app->authc, req->secret_hash, req->tenant,
		    t0);
	else if (rc == IDEM_AUTH_DENIED)
		idem_authc_forget(req->app->authc, req->secret_hash);
	return rc;
}

enum idem_auth_result
idem_auth_precheck(idem_req *req)
{
	if (idem_bearer_hash(req) == -1)
		return IDEM_AUTH_DENIED;
	req->auth_t0_ms = mono_ms();
	if (idem_authc_get(req->app->authc, req->secret_hash,
	    req->auth_t0_ms) == IDEM_AUTHC_FRESH)
		return IDEM_AUTH_OK;
	return idem_auth(req);
}

void
idem_auth_settle(idem_req *req)
{
	if (req->status == 401 && req->outcome == IDEM_OUT_REJECTED)
		idem_authc_forget(req->app->authc, req->secret_hash);
	else if (req->tenant != 0)
		/* Flight 1 (or the precheck) found the secret valid after
		 * auth_t0_ms. */
		idem_authc_put(req->app->authc, req->secret_hash, req->tenant,
		    req->auth_t0_ms);
}
