/*
 * test_key.c - unit tests for idem_key_parse(), the Idempotency-Key parser:
 * one table of field values, each with the key it gives or the reason it
 * is refused (RFC 8941 Items: Strings and Tokens are keys, nothing else).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tap.h"

static char	 key[IDEM_KEY_MAX + 1];

/* Parse exactly len bytes from a heap copy, so ASan sees any overread. */
static enum idem_key_verdict
parse(const char *v, size_t len)
{
	enum idem_key_verdict	 rc;
	char			*copy;

	if ((copy = malloc(len ? len : 1)) == NULL)
		abort();
	memcpy(copy, v, len);
	memset(key, 'X', sizeof(key));
	rc = idem_key_parse(copy, len, key, sizeof(key));
	free(copy);
	return rc;
}

/* A field value (sizeof: NUL bytes inside count), the verdict, the key. */
#define V(lit)	lit, sizeof(lit) - 1
struct kcase {
	const char		*value;
	size_t			 len;
	enum idem_key_verdict	 want;
	const char		*key;		/* when want is OK */
};

static const struct kcase cases[] = {
	/* sf-string: the key is the String's value */
	{ V("\"abc\""),			IDEM_KEY_OK, "abc" },
	{ V("\"8e0f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b\""), IDEM_KEY_OK,
	    "8e0f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b" },
	{ V("\"a\\\"b\""),		IDEM_KEY_OK, "a\"b" },
	{ V("\"a\\\\b\""),		IDEM_KEY_OK, "a\\b" },
	{ V("\"\\\\\""),		IDEM_KEY_OK, "\\" },
	{ V("\"\\\"\""),		IDEM_KEY_OK, "\"" },
	{ V("\"a b\""),			IDEM_KEY_OK, "a b" },
	{ V("\" \""),			IDEM_KEY_OK, " " },
	{ V("\" a \""),			IDEM_KEY_OK, " a " },
	{ V("\"!#$%&'()*+,-./:;<=>?@[]^_`{|}~\""), IDEM_KEY_OK,
	    "!#$%&'()*+,-./:;<=>?@[]^_`{|}~" },
	{ V("\"K;x=1\""),		IDEM_KEY_OK, "K;x=1" },
	{ V("\"K,L\""),			IDEM_KEY_OK, "K,L" },
	{ V("\"1K\""),			IDEM_KEY_OK, "1K" },
	{ V("\"12345\""),		IDEM_KEY_OK, "12345" },
	{ V("\"12.5\""),		IDEM_KEY_OK, "12.5" },
	{ V("\"?1\""),			IDEM_KEY_OK, "?1" },
	{ V("\"@1659578233\""),		IDEM_KEY_OK, "@1659578233" },
	{ V("\":aGVsbG8=:\""),		IDEM_KEY_OK, ":aGVsbG8=:" },
	{ V("\"(a b)\""),		IDEM_KEY_OK, "(a b)" },
	{ V("\"\""),			IDEM_KEY_EMPTY, NULL },
	{ V("\"abc"),			IDEM_KEY_UNTERMINATED, NULL },
	{ V("\""),			IDEM_KEY_UNTERMINATED, NULL },
	{ V("\"abc\\\""),		IDEM_KEY_UNTERMINATED, NULL },
	{ V("\"a\\"),			IDEM_KEY_ESCAPE, NULL },
	{ V("\"a\\ab\""),		IDEM_KEY_ESCAPE, NULL },
	{ V("\"a\\nb\""),		IDEM_KEY_ESCAPE, NULL },
	{ V("\"a\\u0041\""),		IDEM_KEY_ESCAPE, NULL },
	{ V("\"abc\"x"),		IDEM_KEY_TRAILING, NULL },
	{ V("\"abc\" x"),		IDEM_KEY_TRAILING, NULL },
	{ V("\"a\" \"b\""),		IDEM_KEY_TRAILING, NULL },
	/* sf-token: the key is the Token */
	{ V("abc"),			IDEM_KEY_OK, "abc" },
	{ V("a"),			IDEM_KEY_OK, "a" },
	{ V("K"),			IDEM_KEY_OK, "K" },
	{ V("*"),			IDEM_KEY_OK, "*" },
	{ V("*foo"),			IDEM_KEY_OK, "*foo" },
	{ V("order-42_v2.1"),		IDEM_KEY_OK, "order-42_v2.1" },
	{ V("a:b/c"),			IDEM_KEY_OK, "a:b/c" },
	{ V("a!#$%&'*+-.^_`|~:/z"),	IDEM_KEY_OK, "a!#$%&'*+-.^_`|~:/z" },
	{ V("e8f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b"), IDEM_KEY_OK,
	    "e8f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b" },
	{ V("abc\""),			IDEM_KEY_CHARACTER, NULL },
	{ V("a\\b"),			IDEM_KEY_CHARACTER, NULL },
	{ V("a=b"),			IDEM_KEY_CHARACTER, NULL },
	{ V("a(b)"),			IDEM_KEY_CHARACTER, NULL },
	{ V("a b"),			IDEM_KEY_TRAILING, NULL },
	{ V("!abc"),			IDEM_KEY_CHARACTER, NULL },
	{ V(".abc"),			IDEM_KEY_CHARACTER, NULL },
	{ V("/abc"),			IDEM_KEY_CHARACTER, NULL },
	/* compatibility form: bare, token characters, not a number */
	{ V("8e0f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b"), IDEM_KEY_OK,
	    "8e0f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b" },
	{ V("1K"),			IDEM_KEY_OK, "1K" },
	{ V("123e4567"),		IDEM_KEY_OK, "123e4567" },
	{ V("1.2.3"),			IDEM_KEY_OK, "1.2.3" },
	{ V("12.5x"),			IDEM_KEY_OK, "12.5x" },
	{ V("-1K"),			IDEM_KEY_OK, "-1K" },
	{ V("-xY_z"),			IDEM_KEY_OK, "-xY_z" },
	{ V("_xY-z"),			IDEM_KEY_OK, "_xY-z" },
	{ V("9f:ab/cd"),		IDEM_KEY_OK, "9f:ab/cd" },
	{ V("1K;x=1"),			IDEM_KEY_PARAMETERS, NULL },
	{ V("1K,2K"),			IDEM_KEY_LIST, NULL },
	{ V("1\"K"),			IDEM_KEY_CHARACTER, NULL },
	/* numbers: Integers and Decimals (and longer digit runs) */
	{ V("12345"),			IDEM_KEY_INTEGER, NULL },
	{ V("0"),			IDEM_KEY_INTEGER, NULL },
	{ V("-7"),			IDEM_KEY_INTEGER, NULL },
	{ V("12345678901234567890"),	IDEM_KEY_INTEGER, NULL },
	{ V("12.5"),			IDEM_KEY_DECIMAL, NULL },
	{ V("-0.25"),			IDEM_KEY_DECIMAL, NULL },
	{ V("1."),			IDEM_KEY_DECIMAL, NULL },
	{ V("1;x=1"),			IDEM_KEY_INTEGER, NULL },
	{ V("1,2"),			IDEM_KEY_INTEGER, NULL },
	/* other bare items (RFC 8941, RFC 9651) */
	{ V("?1"),			IDEM_KEY_BOOLEAN, NULL },
	{ V("?0"),			IDEM_KEY_BOOLEAN, NULL },
	{ V(":aGVsbG8=:"),		IDEM_KEY_BYTE_SEQUENCE, NULL },
	{ V("@1659578233"),		IDEM_KEY_DATE, NULL },
	{ V("%\"caf%c3%a9\""),		IDEM_KEY_DISPLAY_STRING, NULL },
	{ V("(\"abc\")"),		IDEM_KEY_INNER_LIST, NULL },
	{ V("(a b)"),			IDEM_KEY_INNER_LIST, NULL },
	/* parameters: never a key, whatever the item */
	{ V("K;x=1"),			IDEM_KEY_PARAMETERS, NULL },
	{ V("K;x=2"),			IDEM_KEY_PARAMETERS, NULL },
	{ V("K;x"),			IDEM_KEY_PARAMETERS, NULL },
	{ V("K;"),			IDEM_KEY_PARAMETERS, NULL },
	{ V("\"K\";x=1"),		IDEM_KEY_PARAMETERS, NULL },
	{ V("\"abc\";a"),		IDEM_KEY_PARAMETERS, NULL },
	{ V("\"abc\"; a=1"),		IDEM_KEY_PARAMETERS, NULL },
	/* lists: several values (or two fields joined by a server) */
	{ V("K,L"),			IDEM_KEY_LIST, NULL },
	{ V("K, L"),			IDEM_KEY_LIST, NULL },
	{ V("K ,L"),			IDEM_KEY_LIST, NULL },
	{ V("\"abc\", \"def\""),	IDEM_KEY_LIST, NULL },
	{ V("K,"),			IDEM_KEY_LIST, NULL },
	{ V(",K"),			IDEM_KEY_CHARACTER, NULL },
	/* SP around is discarded; HTAB is not SP (RFC 8941 4.2) */
	{ V("  abc"),			IDEM_KEY_OK, "abc" },
	{ V("abc  "),			IDEM_KEY_OK, "abc" },
	{ V(" \"abc\" "),		IDEM_KEY_OK, "abc" },
	{ V(" 8e0f2a3c "),		IDEM_KEY_OK, "8e0f2a3c" },
	{ V("\tabc"),			IDEM_KEY_CHARACTER, NULL },
	{ V("abc\t"),			IDEM_KEY_CHARACTER, NULL },
	{ V("\"a\tb\""),		IDEM_KEY_CHARACTER, NULL },
	{ V("a\tb"),			IDEM_KEY_CHARACTER, NULL },
	{ V(""),			IDEM_KEY_EMPTY, NULL },
	{ V(" "),			IDEM_KEY_EMPTY, NULL },
	{ V("   "),			IDEM_KEY_EMPTY, NULL },
	{ V("\"\" "),			IDEM_KEY_EMPTY, NULL },
	/* bytes that are never allowed: controls, DEL, non-ASCII, NUL */
	{ V("ab\0c"),			IDEM_KEY_CHARACTER, NULL },
	{ V("\"ab\0c\""),		IDEM_KEY_CHARACTER, NULL },
	{ V("abc\0"),			IDEM_KEY_CHARACTER, NULL },
	{ V("ab\x7f"),			IDEM_KEY_CHARACTER, NULL },
	{ V("ab\x01"),			IDEM_KEY_CHARACTER, NULL },
	{ V("ab\r\n"),			IDEM_KEY_CHARACTER, NULL },
	{ V("caf\xc3\xa9"),		IDEM_KEY_CHARACTER, NULL },
	{ V("\"caf\xc3\xa9\""),		IDEM_KEY_CHARACTER, NULL },
	{ V("\xff"),			IDEM_KEY_CHARACTER, NULL },
	{ V("\"\x80\""),		IDEM_KEY_CHARACTER, NULL },
};

/* A value of n chars c after prefix, optionally quoted. */
static char *
longkey(const char *prefix, size_t n, int quoted)
{
	char	*s;
	size_t	 o = 0;

	if ((s = malloc(strlen(prefix) + n + 3)) == NULL)
		abort();
	if (quoted)
		s[o++] = '"';
	memcpy(s + o, prefix, strlen(prefix));
	o += strlen(prefix);
	memset(s + o, 'k', n);
	o += n;
	if (quoted)
		s[o++] = '"';
	s[o] = '\0';
	return s;
}

static void
long_case(const char *prefix, size_t n, int quoted,
    enum idem_key_verdict want)
{
	char			*s = longkey(prefix, n, quoted);
	enum idem_key_verdict	 got = parse(s, strlen(s));

	TAP_OK(got == want && (want != IDEM_KEY_OK ||
	    strlen(key) == strlen(prefix) + n), "%s%s of %zu: %s", quoted ?
	    "sf-string" : "bare", *prefix ? " (compat)" : "",
	    strlen(prefix) + n, idem_key_reason(want));
	free(s);
}

int
main(void)
{
	const struct kcase	*c;
	enum idem_key_verdict	 got;
	char			 small[4];
	char			 esc[2 * IDEM_KEY_MAX + 3];
	size_t			 i, n = sizeof(cases) / sizeof(cases[0]);

	for (i = 0; i < n; i++) {
		c = &cases[i];
		got = parse(c->value, c->len);
		if (c->want == IDEM_KEY_OK) {
			TAP_OK(got == IDEM_KEY_OK, "case %zu accepted (%s)",
			    i, got == IDEM_KEY_OK ? "" : idem_key_reason(got));
			TAP_STREQ(got == IDEM_KEY_OK ? key : NULL, c->key,
			    "  case %zu: key", i);
		} else {
			TAP_OK(got == c->want, "case %zu refused: %s", i,
			    idem_key_reason(c->want));
			if (got != c->want)
				printf("#   got: %s\n", idem_key_reason(got));
			TAP_OK(key[0] == '\0', "  case %zu: output emptied", i);
		}
	}
	TAP_OK(n >= 75, "the table has %zu values", n);

	/* One value, quoted or bare, is one key; different values never
	 * share one (the collisions). */
	TAP_OK(parse(V("\"1K\"")) == IDEM_KEY_OK &&
	    parse(V("1K")) == IDEM_KEY_OK && strcmp(key, "1K") == 0,
	    "\"1K\" and 1K: one key");
	TAP_OK(parse(V("\"K;x=1\"")) == IDEM_KEY_OK &&
	    parse(V("K;x=1")) != IDEM_KEY_OK,
	    "\"K;x=1\" is a key, K;x=1 is refused: no collision");
	TAP_OK(parse(V("\"K,L\"")) == IDEM_KEY_OK &&
	    parse(V("K,L")) != IDEM_KEY_OK,
	    "\"K,L\" is a key, K,L is refused: no collision");

	/* length: 1..255 characters of the value, escapes counted once */
	long_case("", IDEM_KEY_MAX, 0, IDEM_KEY_OK);
	long_case("", IDEM_KEY_MAX + 1, 0, IDEM_KEY_TOO_LONG);
	long_case("", IDEM_KEY_MAX, 1, IDEM_KEY_OK);
	long_case("", IDEM_KEY_MAX + 1, 1, IDEM_KEY_TOO_LONG);
	long_case("9", IDEM_KEY_MAX - 1, 0, IDEM_KEY_OK);
	long_case("9", IDEM_KEY_MAX, 0, IDEM_KEY_TOO_LONG);
	long_case("", 100000, 0, IDEM_KEY_TOO_LONG);
	esc[0] = '"';
	for (i = 0; i < IDEM_KEY_MAX; i++) {
		esc[1 + 2 * i] = '\\';
		esc[2 + 2 * i] = '"';
	}
	esc[1 + 2 * IDEM_KEY_MAX] = '"';
	esc[2 + 2 * IDEM_KEY_MAX] = '\0';
	TAP_OK(parse(esc, strlen(esc)) == IDEM_KEY_OK && strlen(key) == 255 &&
	    key[0] == '"' && key[254] == '"', "255 escaped quotes accepted");
	/* The last escape becomes two plain characters: 256 in all. */
	esc[2 * IDEM_KEY_MAX - 1] = 'x';
	esc[2 * IDEM_KEY_MAX] = 'y';
	TAP_OK(parse(esc, strlen(esc)) == IDEM_KEY_TOO_LONG,
	    "256 unescaped characters refused");

	/* len is honoured: bytes beyond it are not looked at */
	TAP_OK(idem_key_parse("abc def", 3, key, sizeof(key)) == IDEM_KEY_OK &&
	    strcmp(key, "abc") == 0, "only len bytes are parsed");
	TAP_OK(idem_key_parse("\"abc\"", 4, key, sizeof(key)) ==
	    IDEM_KEY_UNTERMINATED, "quote beyond len is not seen");
	TAP_OK(idem_key_parse(NULL, 0, key, sizeof(key)) == IDEM_KEY_EMPTY,
	    "NULL value refused");

	/* a short out buffer is refused rather than overrun */
	TAP_OK(idem_key_parse("abc", 3, small, sizeof(small)) == IDEM_KEY_OK &&
	    strcmp(small, "abc") == 0, "key fits 4-byte buffer");
	TAP_OK(idem_key_parse("abcd", 4, small, sizeof(small)) ==
	    IDEM_KEY_NO_ROOM && small[0] == '\0', "bare key too long for "
	    "the buffer refused");
	TAP_OK(idem_key_parse("\"abcd\"", 6, small, sizeof(small)) ==
	    IDEM_KEY_NO_ROOM && small[0] == '\0', "sf-string too long for "
	    "the buffer refused");
	TAP_OK(idem_key_parse("abc", 3, small, 0) == IDEM_KEY_NO_ROOM,
	    "outlen 0 refused");

	return TAP_DONE();
}
