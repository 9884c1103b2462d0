/*
 * crypto.c - the library's few uses of OpenSSL in one place: SHA-256,
 * random identifiers, the constant-time secret comparison and the key
 * digest (one computation for the advisory lock and the log's key_hash).
 * Depends on nothing of the runtime, so the log can use it too.
 */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "internal.h"

void
idem_sha256(const void *p, size_t len, unsigned char out[32])
{
	unsigned int	n = 32;

	EVP_Digest(p, len, out, &n, EVP_sha256(), NULL);
}

int
idem_random_hex(char *out, size_t nbytes)
{
	unsigned char	r[64];

	if (nbytes > sizeof(r) || RAND_bytes(r, (int)nbytes) != 1)
		return -1;
	idem_hex(r, nbytes, out);
	return 0;
}

int
idem_secret_eq(const unsigned char *a, const void *b, size_t blen)
{
	/* A stored hash of another length is not ours: refused before the
	 * comparison, which must not stop at the first differing byte. */
	return blen == IDEM_SECRET_HASH_LEN &&
	    CRYPTO_memcmp(a, b, IDEM_SECRET_HASH_LEN) == 0;
}

void
idem_key_digest(const unsigned char secret_hash[IDEM_SECRET_HASH_LEN],
    const char *key, unsigned char out[32])
{
	unsigned char	in[IDEM_SECRET_HASH_LEN + IDEM_KEY_MAX + 1];
	size_t		n = strlen(key);

	/* Tenant-scoped: equal keys of two tenants differ. */
	if (n > IDEM_KEY_MAX)
		n = IDEM_KEY_MAX;
	memcpy(in, secret_hash, IDEM_SECRET_HASH_LEN);
	memcpy(in + IDEM_SECRET_HASH_LEN, key, n);
	idem_sha256(in, IDEM_SECRET_HASH_LEN + n, out);
}
