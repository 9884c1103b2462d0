/*
 * stripe.c - Stripe's webhook signatures: the Stripe-Signature header
 * ("t=TIMESTAMP,v1=HEX[,v1=HEX...]"), HMAC-SHA256 of "t.body" keyed with
 * the endpoint secret as written ("whsec_..." whole, not decoded), hex.
 * Pure but for the clock the caller passes in; every v1 is compared in
 * constant time.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "internal.h"

#define SECRET_MAX	256	/* a longer secret is refused */
#define MAC_LEN		32
#define HEX_LEN		(2 * MAC_LEN)

/* One "t=" of decimal digits (no sign, no blanks): 0, or -1. */
static int
parse_t(const char *s, size_t n, long long *t)
{
	long long	v = 0;
	size_t		i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' ||
		    v > (LLONG_MAX - (s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*t = v;
	return 0;
}

enum idem_stripe_header_rc
idem_stripe_header_parse(const char *h, long long *t, size_t *nv1)
{
	const char	*p, *e, *eq;
	int		 have_t = 0;

	*nv1 = 0;
	if (h == NULL)
		return IDEM_STRIPE_HEADER_MISSING;
	/* Comma-separated key=value items; keys other than t and v1 (v0,
	 * a scheme to come) are skipped, as Stripe's libraries do. */
	for (p = h; ; p = e + 1) {
		for (e = p; *e != '\0' && *e != ','; e++)
			;
		eq = memchr(p, '=', (size_t)(e - p));
		if (eq != NULL && eq - p == 1 && *p == 't') {
			if (have_t || parse_t(eq + 1, (size_t)(e - eq - 1),
			    t) == -1)
				return IDEM_STRIPE_HEADER_BAD_T;
			have_t = 1;
		} else if (eq != NULL && eq - p == 2 && memcmp(p, "v1", 2) == 0)
			(*nv1)++;
		if (*e == '\0')
			break;
	}
	if (!have_t)
		return IDEM_STRIPE_HEADER_BAD_T;
	return *nv1 > 0 ? IDEM_STRIPE_HEADER_OK : IDEM_STRIPE_HEADER_NO_V1;
}

/* HMAC-SHA256 of "t.body" keyed with secret: 0, or -1. */
static int
mac_of(const char *secret, long long t, const void *body, size_t len,
    unsigned char mac[MAC_LEN])
{
	char			 tbuf[IDEM_INT_LEN];
	struct idem_span	 parts[3] = { { tbuf, 0 }, { ".", 1 },
				    { body, len } };
	size_t			 slen;

	if (secret == NULL || (slen = strlen(secret)) == 0 ||
	    slen > SECRET_MAX || (body == NULL && len > 0))
		return -1;
	parts[0].len = idem_fmt_int(tbuf, t);
	return idem_hmac_sha256(secret, slen, parts, 3, mac);
}

/* 64 lower-case hex digits (as Stripe writes them) into 32 bytes: 1, or
 * 0 when s is not that. */
static int
unhex(const char *s, unsigned char out[MAC_LEN])
{
	static const char	digits[] = "0123456789abcdef";
	const char		*h, *l;
	size_t			 i;

	for (i = 0; i < MAC_LEN; i++) {
		if (s[2 * i] == '\0' || s[2 * i + 1] == '\0' ||
		    (h = strchr(digits, s[2 * i])) == NULL ||
		    (l = strchr(digits, s[2 * i + 1])) == NULL)
			return 0;
		out[i] = (unsigned char)((h - digits) << 4 | (l - digits));
	}
	return 1;
}

int
idem_stripe_sign(const char *secret, long long timestamp, const void *body,
    size_t len, char *out, size_t outlen)
{
	unsigned char	mac[MAC_LEN];
	char		hex[HEX_LEN + 1];
	int		n;

	if (out == NULL || timestamp < 0 ||
	    mac_of(secret, timestamp, body, len, mac) == -1)
		return -1;
	idem_hex(mac, MAC_LEN, hex);
	n = snprintf(out, outlen, "t=%lld,v1=%s", timestamp, hex);
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

/* Is t within tolerance_s of now?  The verdict, in unsigned arithmetic
 * (t >= 0, so it fits whatever now is). */
static enum idem_webhook_verdict
in_time(long long t, long long now, long long tolerance_s)
{
	if (tolerance_s < 0)
		tolerance_s = 0;
	if (now > t && (unsigned long long)now - (unsigned long long)t >
	    (unsigned long long)tolerance_s)
		return IDEM_WEBHOOK_TOO_OLD;
	if (t > now && (unsigned long long)t - (unsigned long long)now >
	    (unsigned long long)tolerance_s)
		return IDEM_WEBHOOK_TOO_NEW;
	return IDEM_WEBHOOK_OK;
}

enum idem_webhook_verdict
idem_stripe_verify(const char *secret, const char *header, const void *body,
    size_t len, long long now, long long tolerance_s)
{
	enum idem_webhook_verdict	 v;
	const char			*p, *e;
	unsigned char			 want[MAC_LEN], got[MAC_LEN];
	long long			 t = 0;
	size_t				 nv1;
	int				 found = 0;

	if (secret == NULL || *secret == '\0' || strlen(secret) > SECRET_MAX)
		return IDEM_WEBHOOK_BAD_SECRET;
	switch (idem_stripe_header_parse(header, &t, &nv1)) {
	case IDEM_STRIPE_HEADER_OK:
		break;
	case IDEM_STRIPE_HEADER_NO_V1:
		return IDEM_WEBHOOK_MISMATCH;
	default:
		return IDEM_WEBHOOK_BAD_HEADER;
	}
	if ((v = in_time(t, now, tolerance_s)) != IDEM_WEBHOOK_OK)
		return v;
	if (mac_of(secret, t, body, len, want) == -1)
		return IDEM_WEBHOOK_BAD_SECRET;
	/* Every v1 is compared (which one matched is not timed); one of
	 * another length cannot match. */
	for (p = header; ; p = e + 1) {
		for (e = p; *e != '\0' && *e != ','; e++)
			;
		if (e - p == 3 + HEX_LEN && memcmp(p, "v1=", 3) == 0 &&
		    unhex(p + 3, got))
			found |= idem_secret_eq(want, got, MAC_LEN);
		if (*e == '\0')
			break;
	}
	OPENSSL_cleanse(want, sizeof(want));
	return found ? IDEM_WEBHOOK_OK : IDEM_WEBHOOK_MISMATCH;
}
