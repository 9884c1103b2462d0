/*
 * crypto.c - the library's few uses of OpenSSL in one place: SHA-256,
 * random identifiers, the constant-time secret comparison and the key
 * digest (one computation for the advisory lock and the log's key_hash),
 * and HMAC-SHA256 (the webhook signature schemes').
 * Depends on nothing of the runtime, so the log can use it too.
 */
#include <pthread.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "internal.h"

/* HMAC's implementation fetched once for the process (as SHA-256's below):
 * EVP_MAC_fetch() per signature looked it up every time. */
static pthread_once_t	 mac_once = PTHREAD_ONCE_INIT;
static EVP_MAC		*mac_hmac;

static void
mac_init(void)
{
	mac_hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

int
idem_hmac_sha256(const void *key, size_t keylen,
    const struct idem_span *parts, size_t nparts, unsigned char out[32])
{
	EVP_MAC_CTX	*ctx;
	OSSL_PARAM	 params[2];
	size_t		 i, outl = 0;
	int		 ok;

	pthread_once(&mac_once, mac_init);
	if (mac_hmac == NULL || (ctx = EVP_MAC_CTX_new(mac_hmac)) == NULL)
		return -1;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	ok = EVP_MAC_init(ctx, key, keylen, params) == 1;
	for (i = 0; ok && i < nparts; i++)
		ok = parts[i].len == 0 || EVP_MAC_update(ctx, parts[i].p,
		    parts[i].len) == 1;
	ok = ok && EVP_MAC_final(ctx, out, &outl, 32) == 1 && outl == 32;
	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -1;
}

/*
 * SHA-256's implementation fetched once for the process, and a digest
 * context per thread (freed when the thread ends): EVP_Digest() with
 * EVP_sha256() looked the implementation up and allocated a context on
 * every call, four times a request.
 */
static pthread_once_t	 md_once = PTHREAD_ONCE_INIT;
static pthread_key_t	 md_key;
static EVP_MD		*md_sha256;

static void
md_ctx_free(void *ctx)
{
	EVP_MD_CTX_free(ctx);
}

static void
md_init(void)
{
	md_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (pthread_key_create(&md_key, md_ctx_free) != 0)
		md_sha256 = NULL;	/* then the slow path, always */
}

static EVP_MD_CTX *
md_ctx(void)
{
	EVP_MD_CTX	*ctx;

	pthread_once(&md_once, md_init);
	if (md_sha256 == NULL)
		return NULL;
	if ((ctx = pthread_getspecific(md_key)) == NULL &&
	    (ctx = EVP_MD_CTX_new()) != NULL &&
	    pthread_setspecific(md_key, ctx) != 0) {
		EVP_MD_CTX_free(ctx);
		ctx = NULL;
	}
	return ctx;
}

void
idem_sha256(const void *p, size_t len, unsigned char out[32])
{
	EVP_MD_CTX	*ctx = md_ctx();
	unsigned int	 n = 32;

	if (ctx != NULL && EVP_DigestInit_ex(ctx, md_sha256, NULL) == 1 &&
	    EVP_DigestUpdate(ctx, p, len) == 1 &&
	    EVP_DigestFinal_ex(ctx, out, &n) == 1)
		return;
	EVP_Digest(p, len, out, &n, EVP_sha256(), NULL);
}

/*
 * Random bytes drawn from OpenSSL 512 at a time into a buffer per thread
 * (RAND_bytes() per identifier cost a lock, a getpid() and the DRBG's
 * setup twice a request).  Each byte is handed out once and wiped; a
 * fork() empties every buffer (the child must not repeat its parent's).
 */
#define RANDOM_BUF	512
static volatile unsigned	random_gen = 1;	/* bumped in a forked child */
static pthread_once_t		random_once = PTHREAD_ONCE_INIT;
static __thread struct {
	unsigned	gen;
	size_t		used;
	unsigned char	b[RANDOM_BUF];
} rnd;

static void
random_forked(void)
{
	random_gen++;
}

static void
random_init(void)
{
	pthread_atfork(NULL, NULL, random_forked);
}

int
idem_random_bytes(unsigned char *out, size_t n)
{
	if (n > RANDOM_BUF)
		return -1;
	pthread_once(&random_once, random_init);
	if (rnd.gen != random_gen || rnd.used + n > RANDOM_BUF) {
		if (RAND_bytes(rnd.b, RANDOM_BUF) != 1) {
			rnd.gen = 0;
			return -1;
		}
		rnd.gen = random_gen;
		rnd.used = 0;
	}
	memcpy(out, rnd.b + rnd.used, n);
	OPENSSL_cleanse(rnd.b + rnd.used, n);
	rnd.used += n;
	return 0;
}

int
idem_random_hex(char *out, size_t nbytes)
{
	unsigned char	r[64];

	if (nbytes > sizeof(r) || idem_random_bytes(r, nbytes) == -1)
		return -1;
	idem_hex(r, nbytes, out);
	OPENSSL_cleanse(r, nbytes);
	return 0;
}

int
idem_random_id(char *out, size_t outlen, size_t nbytes)
{
	if (out == NULL || nbytes == 0 || outlen < 2 * nbytes + 1)
		return -1;
	return idem_random_hex(out, nbytes);
}

int
idem_secret_eq(const unsigned char *a, const void *b, size_t blen)
{
	/* A stored hash of another length is not ours: refused before the
	 * comparison, which must not stop at the first differing byte. */
	return blen == IDEM_SECRET_HASH_LEN &&
	    CRYPTO_memcmp(a, b, IDEM_SECRET_HASH_LEN) == 0;
}

/*
 * The last key digest of this thread: the lock id and the log's key_hash
 * are of the same (secret, key), computed by the same worker; the second
 * computation is a copy.
 */
static __thread struct {
	int		valid;
	unsigned char	secret[IDEM_SECRET_HASH_LEN];
	size_t		keylen;
	char		key[IDEM_KEY_MAX];
	unsigned char	digest[32];
} last_key;

void
idem_key_digest(const unsigned char secret_hash[IDEM_SECRET_HASH_LEN],
    const char *key, unsigned char out[32])
{
	unsigned char	in[IDEM_SECRET_HASH_LEN + IDEM_KEY_MAX + 1];
	size_t		n = strlen(key);

	/* Tenant-scoped: equal keys of two tenants differ. */
	if (n > IDEM_KEY_MAX)
		n = IDEM_KEY_MAX;
	if (last_key.valid && last_key.keylen == n &&
	    memcmp(last_key.secret, secret_hash, IDEM_SECRET_HASH_LEN) == 0 &&
	    memcmp(last_key.key, key, n) == 0) {
		memcpy(out, last_key.digest, 32);
		return;
	}
	memcpy(in, secret_hash, IDEM_SECRET_HASH_LEN);
	memcpy(in + IDEM_SECRET_HASH_LEN, key, n);
	idem_sha256(in, IDEM_SECRET_HASH_LEN + n, out);
	memcpy(last_key.secret, secret_hash, IDEM_SECRET_HASH_LEN);
	memcpy(last_key.key, key, n);
	last_key.keylen = n;
	memcpy(last_key.digest, out, 32);
	last_key.valid = 1;
}
