/*
 * test_key.c - unit tests for idem_key_parse(), the Idempotency-Key parser.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tap.h"

static char	 key[IDEM_KEY_MAX + 1];

/* Parse exactly len bytes from a heap copy, so ASan sees any overread. */
static int
parse(const char *v, size_t len)
{
	char	*copy;
	int	 rc;

	if ((copy = malloc(len ? len : 1)) == NULL)
		return -2;
	memcpy(copy, v, len);
	memset(key, 'X', sizeof(key));
	rc = idem_key_parse(copy, len, key, sizeof(key));
	free(copy);
	return rc;
}

#define OK(lit, want) do {						\
	int r_ = parse(lit, sizeof(lit) - 1);				\
	TAP_OK(r_ == IDEM_KEY_OK, "accept %s", #lit);			\
	TAP_STREQ(r_ == IDEM_KEY_OK ? key : NULL, want, "  key of %s", #lit); \
} while (0)

#define BAD(lit) do {							\
	TAP_OK(parse(lit, sizeof(lit) - 1) == IDEM_KEY_INVALID,	\
	    "reject %s", #lit);						\
	TAP_OK(key[0] == '\0', "  output emptied for %s", #lit);	\
} while (0)

/* A value of n chars c, optionally quoted. */
static char *
longkey(size_t n, int quoted)
{
	char	*s;
	size_t	 o = 0;

	if ((s = malloc(n + 3)) == NULL)
		return NULL;
	if (quoted)
		s[o++] = '"';
	memset(s + o, 'k', n);
	o += n;
	if (quoted)
		s[o++] = '"';
	s[o] = '\0';
	return s;
}

int
main(void)
{
	char	 small[4], *s;
	char	 esc[2 * IDEM_KEY_MAX + 3];
	size_t	 i;

	/* sf-string */
	OK("\"abc\"", "abc");
	OK("\"8e0f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b\"",
	    "8e0f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b");
	OK("\"a\\\"b\"", "a\"b");
	OK("\"a\\\\b\"", "a\\b");
	OK("\"\\\\\"", "\\");
	OK("\"\\\"\"", "\"");
	OK("\"a b\"", "a b");
	OK("\" \"", " ");
	OK("\"!#$%&'()*+,-./:;<=>?@[]^_`{|}~\"",
	    "!#$%&'()*+,-./:;<=>?@[]^_`{|}~");
	OK("\"a;b=1\"", "a;b=1");
	BAD("\"\"");
	BAD("\"abc");
	BAD("abc\"");
	BAD("\"");
	BAD("\"abc\\\"");
	BAD("\"a\\ab\"");
	BAD("\"a\\nb\"");
	BAD("\"a\\u0041\"");
	BAD("\"a\\");
	BAD("\"a\tb\"");
	BAD("\"abc\"x");
	BAD("\"abc\" x");
	BAD("\"abc\";a=1");
	BAD("\"abc\"; a=1");
	BAD("\"abc\";a");
	BAD("\"abc\", \"def\"");
	BAD("\"a\" \"b\"");
	BAD("(\"abc\")");

	/* bare token */
	OK("abc", "abc");
	OK("a", "a");
	OK("8e0f2a3c-5b7d-4e1f", "8e0f2a3c-5b7d-4e1f");
	OK("a\\b", "a\\b");
	OK("a;b=1", "a;b=1");
	OK("!#$%&'()*+,-./:;<=>?@[]^_`{|}~", "!#$%&'()*+,-./:;<=>?@[]^_`{|}~");
	BAD("a b");
	BAD("a\tb");
	BAD("ab\"c");
	BAD("a\"");

	/* OWS */
	OK("  abc", "abc");
	OK("abc  ", "abc");
	OK("\t abc \t", "abc");
	OK(" \"abc\" ", "abc");
	OK("\t\"a b\"\t", "a b");
	OK("\" a \"", " a ");
	BAD("");
	BAD(" ");
	BAD(" \t ");
	BAD("\"\" ");

	/* bytes that are never allowed */
	BAD("ab\0c");
	BAD("\"ab\0c\"");
	BAD("abc\0");
	BAD("\0abc");
	BAD("\"abc\"\0");
	BAD("ab\x7f");
	BAD("ab\x01");
	BAD("ab\r\n");
	BAD("\ncd");
	BAD("caf\xc3\xa9");
	BAD("\"caf\xc3\xa9\"");
	BAD("\xff");
	BAD("\"\x80\"");

	/* length */
	s = longkey(IDEM_KEY_MAX, 0);
	TAP_OK(parse(s, strlen(s)) == IDEM_KEY_OK && strlen(key) == 255,
	    "bare key of 255 accepted");
	free(s);
	s = longkey(IDEM_KEY_MAX + 1, 0);
	TAP_OK(parse(s, strlen(s)) == IDEM_KEY_INVALID,
	    "bare key of 256 refused");
	free(s);
	s = longkey(IDEM_KEY_MAX, 1);
	TAP_OK(parse(s, strlen(s)) == IDEM_KEY_OK && strlen(key) == 255,
	    "sf-string of 255 accepted");
	free(s);
	s = longkey(IDEM_KEY_MAX + 1, 1);
	TAP_OK(parse(s, strlen(s)) == IDEM_KEY_INVALID,
	    "sf-string of 256 refused");
	free(s);
	s = longkey(100000, 0);
	TAP_OK(parse(s, strlen(s)) == IDEM_KEY_INVALID,
	    "bare key of 100000 refused");
	free(s);

	/* 255 escaped characters: 512 bytes on the wire, 255 in the key */
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
	TAP_OK(parse(esc, strlen(esc)) == IDEM_KEY_INVALID,
	    "256 unescaped characters refused");

	/* len is honoured: bytes beyond it are not looked at */
	TAP_OK(idem_key_parse("abc def", 3, key, sizeof(key)) == IDEM_KEY_OK &&
	    strcmp(key, "abc") == 0, "only len bytes are parsed");
	TAP_OK(idem_key_parse("\"abc\"", 4, key, sizeof(key)) ==
	    IDEM_KEY_INVALID, "quote beyond len is not seen");
	TAP_OK(idem_key_parse("abc", 0, key, sizeof(key)) == IDEM_KEY_INVALID,
	    "len 0 refused");
	TAP_OK(idem_key_parse(NULL, 0, key, sizeof(key)) == IDEM_KEY_INVALID,
	    "NULL value refused");

	/* a short out buffer is refused rather than overrun */
	TAP_OK(idem_key_parse("abc", 3, small, sizeof(small)) == IDEM_KEY_OK &&
	    strcmp(small, "abc") == 0, "key fits 4-byte buffer");
	TAP_OK(idem_key_parse("abcd", 4, small, sizeof(small)) ==
	    IDEM_KEY_INVALID && small[0] == '\0',
	    "key too long for buffer refused");
	TAP_OK(idem_key_parse("abc", 3, small, 0) == IDEM_KEY_INVALID,
	    "outlen 0 refused");

	return TAP_DONE();
}
