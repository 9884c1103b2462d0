/*
 * key.c - the Idempotency-Key request header: an RFC 8941 sf-string
 * ("abc") as the IETF draft specifies, or, because clients commonly send
 * it so, a bare token.  Everything doubtful is refused: the key names a
 * stored response, so two spellings must never be confused.
 */
#include <string.h>

#include "internal.h"

static int
is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

int
idem_key_parse(const char *value, size_t len, char *out, size_t outlen)
{
	const unsigned char	*v = (const unsigned char *)value;
	size_t			 b, e, i, o = 0;
	unsigned char		 c;

	if (out == NULL || outlen == 0)
		return IDEM_KEY_INVALID;
	out[0] = '\0';
	if (value == NULL)
		return IDEM_KEY_INVALID;

	/* Only printable ASCII and HTAB, anywhere: no NUL, no 8-bit bytes. */
	for (i = 0; i < len; i++)
		if ((v[i] < 0x20 && v[i] != '\t') || v[i] > 0x7e)
			return IDEM_KEY_INVALID;

	b = 0;
	e = len;
	while (b < e && is_ows(v[b]))
		b++;
	while (e > b && is_ows(v[e - 1]))
		e--;
	if (b == e)
		return IDEM_KEY_INVALID;

	if (v[b] == '"') {
		/* sf-string: the closing quote must end the value, which
		 * also refuses parameters ("abc";a=1) and inner lists. */
		for (i = b + 1; i < e; i++) {
			c = v[i];
			if (c == '"')
				break;
			if (c == '\\') {
				if (++i >= e || (v[i] != '"' && v[i] != '\\'))
					goto invalid;
				c = v[i];
			} else if (c < 0x20 || c > 0x7e)	/* HTAB */
				goto invalid;
			if (o >= IDEM_KEY_MAX || o + 1 >= outlen)
				goto invalid;
			out[o++] = (char)c;
		}
		if (i >= e || i + 1 != e)
			goto invalid;
	} else {
		/* Bare token: visible ASCII, no quote, nothing to unescape. */
		for (i = b; i < e; i++) {
			c = v[i];
			if (c < 0x21 || c > 0x7e || c == '"')
				goto invalid;
			if (o >= IDEM_KEY_MAX || o + 1 >= outlen)
				goto invalid;
			out[o++] = (char)c;
		}
	}
	if (o == 0)
		goto invalid;
	out[o] = '\0';
	return IDEM_KEY_OK;
invalid:
	out[0] = '\0';
	return IDEM_KEY_INVALID;
}
