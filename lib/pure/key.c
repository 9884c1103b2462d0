/*
 * key.c - the Idempotency-Key request header, parsed as the IETF draft
 * defines it: an RFC 8941 Item whose bare item is a String ("abc") or a
 * Token (abc), without parameters; the key is the item's value.  Every
 * other Item (Integer, Decimal, Boolean, Byte Sequence, Date, Display
 * String), parameters, lists and inner lists are refused with the reason.
 *
 * One compatibility form: a bare value that starts with a digit, "-" or
 * "_" (a UUID, a base64url string) is not an sf-Token, yet clients send it
 * unquoted.  It is accepted when it is made of token characters only and
 * is not a number, so it denotes exactly the characters written: the same
 * value quoted is the same key, and nothing else is.
 */
#include <string.h>

#include "internal.h"

static int
is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* RFC 8941 sf-token's characters after the first: tchar / ":" / "/". */
static int
is_token_char(unsigned char c)
{
	return is_alpha(c) || is_digit(c) || (c != '\0' &&
	    strchr("!#$%&'*+-.^_`|~:/", c) != NULL);
}

/* -?DIGIT+ ( "." DIGIT* )?: what an sf-Integer or sf-Decimal looks like
 * (also when too long to be one): never a key. */
static enum idem_key_verdict
number_kind(const unsigned char *v, size_t n)
{
	size_t	i = 0, digits = 0;

	if (i < n && v[i] == '-')
		i++;
	for (; i < n && is_digit(v[i]); i++)
		digits++;
	if (digits == 0)
		return IDEM_KEY_OK;
	if (i == n)
		return IDEM_KEY_INTEGER;
	if (v[i] != '.')
		return IDEM_KEY_OK;
	for (i++; i < n && is_digit(v[i]); i++)
		;
	return i == n ? IDEM_KEY_DECIMAL : IDEM_KEY_OK;
}

/* What follows the bare item (at v[i], before the trailing SP at e). */
static enum idem_key_verdict
after_item(const unsigned char *v, size_t i, size_t e)
{
	if (i == e)
		return IDEM_KEY_OK;
	if (v[i] == ';')
		return IDEM_KEY_PARAMETERS;
	while (i < e && v[i] == ' ')
		i++;
	if (i < e && v[i] == ',')
		return IDEM_KEY_LIST;
	return IDEM_KEY_TRAILING;
}

/* An sf-string from v[b] (the opening quote) into out; *end after it. */
static enum idem_key_verdict
string_item(const unsigned char *v, size_t b, size_t e, char *out,
    size_t outlen, size_t *o, size_t *end)
{
	size_t		i;
	unsigned char	c;

	for (i = b + 1; i < e; i++) {
		c = v[i];
		if (c == '"')
			break;
		if (c == '\\') {
			if (++i >= e || (v[i] != '"' && v[i] != '\\'))
				return IDEM_KEY_ESCAPE;
			c = v[i];
		}
		if (*o >= IDEM_KEY_MAX)
			return IDEM_KEY_TOO_LONG;
		if (*o + 1 >= outlen)
			return IDEM_KEY_NO_ROOM;
		out[(*o)++] = (char)c;
	}
	if (i >= e)
		return IDEM_KEY_UNTERMINATED;
	*end = i + 1;
	return IDEM_KEY_OK;
}

/* The item's bounds [*b, *e) in v: visible ASCII, SP trimmed. */
static enum idem_key_verdict
item_bounds(const unsigned char *v, size_t len, size_t *b, size_t *e)
{
	size_t	 i;

	/* Only visible ASCII and SP, anywhere: no HTAB, no 8-bit bytes. */
	for (i = 0; i < len; i++)
		if (v[i] < 0x20 || v[i] > 0x7e)
			return IDEM_KEY_CHARACTER;

	/* RFC 8941 4.2: leading and trailing SP are discarded. */
	*b = 0;
	*e = len;
	while (*b < *e && v[*b] == ' ')
		(*b)++;
	while (*e > *b && v[*e - 1] == ' ')
		(*e)--;
	return *b == *e ? IDEM_KEY_EMPTY : IDEM_KEY_OK;
}

/* A Token, or the compatibility form, at v[b] (before e): copied into
 * out (*o bytes); *end: where it stopped. */
static enum idem_key_verdict
bare_item(const unsigned char *v, size_t b, size_t e, char *out,
    size_t outlen, size_t *o, size_t *end)
{
	enum idem_key_verdict	 r;
	size_t			 i;
	int			 compat;

	*end = b;
	compat = is_digit(v[b]) || v[b] == '-' || v[b] == '_';
	if (!compat && !is_alpha(v[b]) && v[b] != '*')
		return IDEM_KEY_CHARACTER;
	for (i = b + 1; i < e && is_token_char(v[i]); i++)
		;
	*end = i;
	r = after_item(v, i, e);
	/* A number is named as such, with or without what follows
	 * it, unless a character no item may hold stopped it. */
	if (compat && r != IDEM_KEY_TRAILING &&
	    number_kind(v + b, i - b) != IDEM_KEY_OK)
		r = number_kind(v + b, i - b);
	if (r != IDEM_KEY_OK)
		return r;
	if (i - b > IDEM_KEY_MAX)
		return IDEM_KEY_TOO_LONG;
	if (i - b + 1 > outlen)
		return IDEM_KEY_NO_ROOM;
	memcpy(out, v + b, i - b);
	*o = i - b;
	return IDEM_KEY_OK;
}

enum idem_key_verdict
idem_key_parse(const char *value, size_t len, char *out, size_t outlen)
{
	const unsigned char	*v = (const unsigned char *)value;
	enum idem_key_verdict	 r;
	size_t			 b, e, i = 0, o = 0;

	if (out == NULL || outlen == 0)
		return IDEM_KEY_NO_ROOM;
	out[0] = '\0';
	if (value == NULL)
		return IDEM_KEY_EMPTY;
	if ((r = item_bounds(v, len, &b, &e)) != IDEM_KEY_OK)
		return r;

	switch (v[b]) {
	case '"':
		r = string_item(v, b, e, out, outlen, &o, &i);
		if (r == IDEM_KEY_OK)
			r = after_item(v, i, e);
		if (r == IDEM_KEY_OK && o == 0)
			r = IDEM_KEY_EMPTY;
		break;
	case '(':
		r = IDEM_KEY_INNER_LIST;
		break;
	case '?':
		r = IDEM_KEY_BOOLEAN;
		break;
	case ':':
		r = IDEM_KEY_BYTE_SEQUENCE;
		break;
	case '@':
		r = IDEM_KEY_DATE;
		break;
	case '%':
		r = IDEM_KEY_DISPLAY_STRING;
		break;
	default:
		r = bare_item(v, b, e, out, outlen, &o, &i);
		break;
	}
	/* A quote or a backslash in a bare value, say, is a character a
	 * bare key may not hold rather than something after it. */
	if (r == IDEM_KEY_TRAILING && v[b] != '"' && v[i] != ' ')
		r = IDEM_KEY_CHARACTER;
	if (r != IDEM_KEY_OK) {
		out[0] = '\0';
		return r;
	}
	out[o] = '\0';
	return IDEM_KEY_OK;
}

const char *
idem_key_reason(enum idem_key_verdict v)
{
	switch (v) {
	case IDEM_KEY_OK:
		return "valid";
	case IDEM_KEY_EMPTY:
		return "Idempotency-Key is empty";
	case IDEM_KEY_TOO_LONG:
		return "Idempotency-Key is longer than 255 characters";
	case IDEM_KEY_CHARACTER:
		return "Idempotency-Key holds a character that is not allowed: "
		    "a bare key is letters, digits and !#$%&'*+-.^_`|~:/ "
		    "(starting with a letter, a digit, '*', '-' or '_'); "
		    "quote anything else as an sf-string of visible ASCII";
	case IDEM_KEY_ESCAPE:
		return "Idempotency-Key sf-string has an escape other than "
		    "\\\" or \\\\";
	case IDEM_KEY_UNTERMINATED:
		return "Idempotency-Key sf-string has no closing quote";
	case IDEM_KEY_TRAILING:
		return "Idempotency-Key has characters after its value";
	case IDEM_KEY_PARAMETERS:
		return "Idempotency-Key has parameters (;...), which are not "
		    "allowed";
	case IDEM_KEY_LIST:
		return "Idempotency-Key is a list of several values (or was "
		    "sent more than once)";
	case IDEM_KEY_INNER_LIST:
		return "Idempotency-Key is an inner list, not a String or a "
		    "Token";
	case IDEM_KEY_INTEGER:
		return "Idempotency-Key is an Integer, not a String or a Token: "
		    "quote it";
	case IDEM_KEY_DECIMAL:
		return "Idempotency-Key is a Decimal, not a String or a Token: "
		    "quote it";
	case IDEM_KEY_BOOLEAN:
		return "Idempotency-Key is a Boolean (?...), not a String or a "
		    "Token";
	case IDEM_KEY_BYTE_SEQUENCE:
		return "Idempotency-Key is a Byte Sequence (:...:), not a "
		    "String or a Token";
	case IDEM_KEY_DATE:
		return "Idempotency-Key is a Date (@...), not a String or a "
		    "Token";
	case IDEM_KEY_DISPLAY_STRING:
		return "Idempotency-Key is a Display String (%\"...\"), not a "
		    "String or a Token";
	case IDEM_KEY_NO_ROOM:
		return "Idempotency-Key does not fit the buffer";
	}
	return "Idempotency-Key is invalid";
}
