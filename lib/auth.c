/*
 * auth.c - tenants.  A request's "Authorization: Bearer <secret>" is
 * resolved to an api_keys row by the SHA-256 of the secret; the database
 * never holds a secret, and the stored hash is compared in constant time.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "private.h"

#define SECRET_MAX	256

void
idem_sha256(const void *p, size_t len, unsigned char out[32])
{
	unsigned int	n = 32;

	EVP_Digest(p, len, out, &n, EVP_sha256(), NULL);
}

int
idem_random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char	  r[64];
	size_t		  i;

	if (nbytes > sizeof(r) || RAND_bytes(r, (int)nbytes) != 1)
		return -1;
	for (i = 0; i < nbytes; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 0xf];
	}
	out[2 * nbytes] = '\0';
	return 0;
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
	idem_sha256(s, n, req->tenant_hash);
	return 0;
}

int
idem_auth(idem_req *req)
{
	const char	*vals[1];
	int		 lens[1], fmts[1] = { 1 };
	PGresult	*r;
	int		 rc = -1;

	if (idem_bearer_hash(req) == -1)
		return -1;

	if (idem_req_db(req) == NULL)
		return -2;
	vals[0] = (const char *)req->tenant_hash;
	lens[0] = 32;
	r = PQexecParams(req->db, "SELECT id, secret_hash FROM api_keys "
	    "WHERE secret_hash = $1 AND revoked_at IS NULL",
	    1, NULL, vals, lens, fmts, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		idem_log(IDEM_LOG_ERROR, "auth: %s", PQerrorMessage(req->db));
		req->db_unavailable = 1;
		rc = -2;
	} else if (PQntuples(r) == 1 && PQgetlength(r, 0, 1) == 32 &&
	    PQgetlength(r, 0, 0) == 8 &&
	    CRYPTO_memcmp(PQgetvalue(r, 0, 1), req->tenant_hash, 32) == 0) {
		uint32_t hi, lo;
		memcpy(&hi, PQgetvalue(r, 0, 0), 4);
		memcpy(&lo, PQgetvalue(r, 0, 0) + 4, 4);
		req->tenant = (int64_t)(((uint64_t)ntohl(hi) << 32) | ntohl(lo));
		rc = 0;
	}
	PQclear(r);
	return rc;
}
