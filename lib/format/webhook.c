/*
 * webhook.c - Standard Webhooks signatures: the sender's webhook-signature
 * value (HMAC-SHA256 of "id.timestamp.body", base64), the receiver's check
 * of the three headers, and new "whsec_" secrets.  Pure but for the clock
 * the caller passes in and the random bytes of a new secret.
 */
#include <limits.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "internal.h"

#define SECRET_PREFIX	"whsec_"
#define SECRET_BYTES	24	/* a new secret's key: 192 bits */
#define KEY_MAX		256	/* a longer key is refused, not truncated */
#define MAC_LEN		32	/* HMAC-SHA256 */
#define B64_LEN(n)	(((n) + 2) / 3 * 4)

/* Is s (n bytes, n a multiple of 4) standard base64 with its padding?
 * EVP_DecodeBlock() alone would skip blanks around it. */
static int
b64_valid(const char *s, size_t n)
{
	static const char	alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "abcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t			i;

	if (n == 0 || n % 4 != 0)
		return 0;
	for (i = 0; i < n && s[i] != '='; i++)
		if (s[i] == '\0' || strchr(alphabet, s[i]) == NULL)
			return 0;
	/* At most two '=', at the end only. */
	return i == n || (i >= n - 2 && strspn(s + i, "=") == n - i);
}

/*
 * The key of secret ("whsec_" is optional, as in the specification's
 * reference libraries, the rest standard base64 with padding) into key;
 * its length, or -1 when it is not base64 or empty or too long.
 */
static int
secret_key(const char *secret, unsigned char key[KEY_MAX])
{
	unsigned char	 tmp[B64_LEN(KEY_MAX) / 4 * 3];
	size_t		 len;
	int		 n;

	if (secret == NULL)
		return -1;
	if (strncmp(secret, SECRET_PREFIX, sizeof(SECRET_PREFIX) - 1) == 0)
		secret += sizeof(SECRET_PREFIX) - 1;
	len = strlen(secret);
	if (len > B64_LEN(KEY_MAX) || !b64_valid(secret, len))
		return -1;
	/* EVP_DecodeBlock() counts the padding as zero bytes. */
	if ((n = EVP_DecodeBlock(tmp, (const unsigned char *)secret,
	    (int)len)) < 0)
		return -1;
	n -= (secret[len - 1] == '=') + (secret[len - 2] == '=');
	if (n <= 0 || n > KEY_MAX) {
		OPENSSL_cleanse(tmp, sizeof(tmp));
		return -1;
	}
	memcpy(key, tmp, (size_t)n);
	OPENSSL_cleanse(tmp, sizeof(tmp));
	return n;
}

/* HMAC-SHA256 of "id.timestamp.body" with key: 0, or -1. */
static int
mac(const unsigned char *key, size_t keylen, const char *id, long long ts,
    const void *body, size_t len, unsigned char out[MAC_LEN])
{
	char			tsbuf[IDEM_INT_LEN];
	struct idem_span	parts[5] = { { id, strlen(id) }, { ".", 1 },
				    { tsbuf, 0 }, { ".", 1 }, { body, len } };

	parts[2].len = idem_fmt_int(tsbuf, ts);
	return idem_hmac_sha256(key, keylen, parts, 5, out);
}

int
idem_webhook_sign(const char *secret, const char *msg_id, long long timestamp,
    const void *body, size_t len, char *out, size_t outlen)
{
	unsigned char	 key[KEY_MAX], sig[MAC_LEN];
	int		 keylen, rc = -1;

	if (out == NULL || outlen < 3 + B64_LEN(MAC_LEN) + 1 ||
	    msg_id == NULL || (body == NULL && len > 0))
		return -1;
	if ((keylen = secret_key(secret, key)) == -1)
		return -1;
	if (mac(key, (size_t)keylen, msg_id, timestamp, body, len, sig) == 0) {
		memcpy(out, "v1,", 3);
		EVP_EncodeBlock((unsigned char *)out + 3, sig, MAC_LEN);
		rc = 0;
	}
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

/* A webhook-timestamp value: decimal digits only (no sign, no blanks),
 * as the seconds of a long long; 0, or -1. */
static int
parse_timestamp(const char *s, long long *ts)
{
	long long	v = 0;

	if (s == NULL || *s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || v > (LLONG_MAX - (*s - '0')) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	*ts = v;
	return 0;
}

/* Does the base64 signature s (n bytes) decode to the 32 bytes of want?
 * In constant time once it has the length of one. */
static int
sig_matches(const char *s, size_t n, const unsigned char want[MAC_LEN])
{
	unsigned char	got[B64_LEN(MAC_LEN) / 4 * 3];

	/* 32 bytes: 44 characters, the last one '=' (one padding). */
	if (n != B64_LEN(MAC_LEN) || !b64_valid(s, n) || s[n - 1] != '=' ||
	    s[n - 2] == '=' ||
	    EVP_DecodeBlock(got, (const unsigned char *)s, (int)n) !=
	    (int)sizeof(got))
		return 0;
	/* The same comparison as an API secret's: 32 bytes, not stopping at
	 * the first difference. */
	return idem_secret_eq(want, got, MAC_LEN);
}

enum idem_webhook_verdict
idem_webhook_verify(const char *secret, const char *msg_id,
    const char *timestamp, const char *signatures, const void *body,
    size_t len, long long now, long long tolerance_s)
{
	unsigned char	 key[KEY_MAX], want[MAC_LEN];
	const char	*p, *e;
	long long	 ts;
	int		 keylen, found = 0;

	if ((keylen = secret_key(secret, key)) == -1)
		return IDEM_WEBHOOK_BAD_SECRET;
	if (msg_id == NULL || *msg_id == '\0' || signatures == NULL ||
	    parse_timestamp(timestamp, &ts) == -1 ||
	    (body == NULL && len > 0)) {
		OPENSSL_cleanse(key, sizeof(key));
		return IDEM_WEBHOOK_BAD_HEADER;
	}
	/* The distance in unsigned arithmetic: ts >= 0, so it fits
	 * whatever now the caller passes. */
	if (tolerance_s < 0)
		tolerance_s = 0;
	if (now > ts && (unsigned long long)now - (unsigned long long)ts >
	    (unsigned long long)tolerance_s) {
		OPENSSL_cleanse(key, sizeof(key));
		return IDEM_WEBHOOK_TOO_OLD;
	}
	if (ts > now && (unsigned long long)ts - (unsigned long long)now >
	    (unsigned long long)tolerance_s) {
		OPENSSL_cleanse(key, sizeof(key));
		return IDEM_WEBHOOK_TOO_NEW;
	}
	if (mac(key, (size_t)keylen, msg_id, ts, body, len, want) == -1) {
		OPENSSL_cleanse(key, sizeof(key));
		return IDEM_WEBHOOK_BAD_SECRET;
	}
	OPENSSL_cleanse(key, sizeof(key));
	/* Space-separated "version,signature" entries (several during a
	 * secret's rotation); versions other than v1 are skipped.  Every
	 * entry is compared: which one matched is not timed. */
	for (p = signatures; *p != '\0'; p = e) {
		while (*p == ' ')
			p++;
		for (e = p; *e != '\0' && *e != ' '; e++)
			;
		if (e - p > 3 && memcmp(p, "v1,", 3) == 0)
			found |= sig_matches(p + 3, (size_t)(e - p - 3), want);
	}
	OPENSSL_cleanse(want, sizeof(want));
	return found ? IDEM_WEBHOOK_OK : IDEM_WEBHOOK_MISMATCH;
}

const char *
idem_webhook_verdict_name(enum idem_webhook_verdict v)
{
	switch (v) {
	case IDEM_WEBHOOK_OK:		return "ok";
	case IDEM_WEBHOOK_BAD_SECRET:	return "bad_secret";
	case IDEM_WEBHOOK_BAD_HEADER:	return "bad_header";
	case IDEM_WEBHOOK_TOO_OLD:	return "too_old";
	case IDEM_WEBHOOK_TOO_NEW:	return "too_new";
	case IDEM_WEBHOOK_MISMATCH:	return "mismatch";
	}
	return "unknown";
}

int
idem_webhook_secret_new(char *out, size_t outlen)
{
	unsigned char	key[SECRET_BYTES];

	if (out == NULL ||
	    outlen < sizeof(SECRET_PREFIX) - 1 + B64_LEN(SECRET_BYTES) + 1 ||
	    idem_random_bytes(key, sizeof(key)) == -1)
		return -1;
	memcpy(out, SECRET_PREFIX, sizeof(SECRET_PREFIX) - 1);
	EVP_EncodeBlock((unsigned char *)out + sizeof(SECRET_PREFIX) - 1, key,
	    sizeof(key));
	OPENSSL_cleanse(key, sizeof(key));
	return 0;
}
