/*
 * fuzz_jcs.c - libFuzzer harness for idem_jcs_canonicalize() (lib/format/jcs.c).
 *
 * The input is one JSON text.  Properties checked (abort() on violation):
 *   - canonicalising is idempotent: if the input is accepted, then
 *     canonicalising its canonical form again succeeds and gives
 *     byte-identical output;
 *   - the canonical form is JSON: yajl_tree_parse() accepts it;
 *   - a refused input leaves the output buffer as it was and gives a
 *     non-empty reason;
 *   - the canonical form holds no insignificant whitespace and no raw
 *     control characters;
 *   - the parsed tree has no NUL anywhere: no string and no member name
 *     of the canonical form, as a parser decodes it, holds U+0000, so a
 *     handler reading C strings sees all of what was fingerprinted;
 *   - it has at most FUZZ_MAX_VALUES values, and an input over that cap
 *     is refused as IDEM_JCS_TOO_MANY or as invalid, nothing else.
 * AddressSanitizer and LeakSanitizer catch the rest (the input is an
 * exact-size heap copy, so reading past len is caught too).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include "internal.h"
#include "fuzz.h"

/* Small, so that the fuzzer reaches the cap often. */
#define FUZZ_MAX_VALUES	64

static const struct idem_jcs_limits lim = { IDEM_JSON_MAX_DEPTH,
	FUZZ_MAX_VALUES };

static void
fail(const char *what, const struct idem_buf *a, const struct idem_buf *b)
{
	fprintf(stderr, "fuzz_jcs: property violated: %s\n", what);
	if (a != NULL && a->p != NULL)
		fprintf(stderr, "  first:  %.*s\n", (int)a->len, a->p);
	if (b != NULL && b->p != NULL)
		fprintf(stderr, "  second: %.*s\n", (int)b->len, b->p);
	abort();
}

/* Outside strings: no blanks; inside: no raw byte below 0x20. */
static int
tidy(const struct idem_buf *b)
{
	size_t	 i;
	int	 in_str = 0;
	unsigned char c;

	for (i = 0; i < b->len; i++) {
		c = (unsigned char)b->p[i];
		if (c < 0x20)
			return 0;
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"')
			in_str = 1;
		else if (c == ' ')
			return 0;
	}
	return !in_str;
}

/* What a second parser finds in the canonical form. */
struct seen {
	size_t	 values;
	int	 nul;
};

static int
s_value(void *ctx)
{
	((struct seen *)ctx)->values++;
	return 1;
}

static int
s_bool(void *ctx, int v)
{
	(void)v;
	return s_value(ctx);
}

static int
s_number(void *ctx, const char *n, size_t len)
{
	(void)n;
	(void)len;
	return s_value(ctx);
}

static int
s_string(void *ctx, const unsigned char *p, size_t len)
{
	if (memchr(p, '\0', len) != NULL)
		((struct seen *)ctx)->nul = 1;
	return s_value(ctx);
}

static int
s_key(void *ctx, const unsigned char *p, size_t len)
{
	if (memchr(p, '\0', len) != NULL)
		((struct seen *)ctx)->nul = 1;
	return 1;
}

static int
s_end(void *ctx)
{
	(void)ctx;
	return 1;
}

static const yajl_callbacks seen_callbacks = {
	s_value, s_bool, NULL, NULL, s_number, s_string,
	s_value, s_key, s_end, s_value, s_end,
};

static int
tree_has_nul(const struct idem_buf *b, size_t *values)
{
	struct seen	 sn = { 0, 0 };
	yajl_handle	 h;
	int		 ok;

	if ((h = yajl_alloc(&seen_callbacks, NULL, &sn)) == NULL)
		abort();
	ok = yajl_parse(h, (const unsigned char *)b->p, b->len) ==
	    yajl_status_ok && yajl_complete_parse(h) == yajl_status_ok;
	yajl_free(h);
	if (!ok)
		fail("a second parser refuses the canonical form", b, NULL);
	*values = sn.values;
	return sn.nul;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct idem_buf	 one = { 0 }, two = { 0 };
	yajl_val	 tree;
	char		*in, err[128], yerr[128];
	size_t		 values;
	enum idem_jcs_result rc;

	in = fuzz_copy(data, size);

	err[0] = '\0';
	rc = idem_jcs_canonicalize(in, size, &lim, &one, err, sizeof(err));
	free(in);
	if (rc != IDEM_JCS_OK) {
		if (rc != IDEM_JCS_INVALID && rc != IDEM_JCS_TOO_MANY)
			fail("neither accepted, invalid nor too many", NULL,
			    NULL);
		if (err[0] == '\0')
			fail("refused without a reason", NULL, NULL);
		if (one.len != 0)
			fail("refused but wrote output", &one, NULL);
		idem_buf_free(&one);
		return 0;
	}
	if (one.len == 0 || one.p == NULL)
		fail("accepted, but the canonical form is empty", NULL, NULL);
	if (memchr(one.p, '\0', one.len) != NULL)
		fail("NUL byte in the canonical form", &one, NULL);
	if (!tidy(&one))
		fail("whitespace or control byte in the canonical form",
		    &one, NULL);
	if (tree_has_nul(&one, &values))
		fail("U+0000 in a string or member name of the tree", &one,
		    NULL);
	if (values > FUZZ_MAX_VALUES)
		fail("more values than the cap", &one, NULL);

	/* Idempotent: canonical(canonical(x)) == canonical(x). */
	err[0] = '\0';
	if (idem_jcs_canonicalize(one.p, one.len, &lim, &two, err,
	    sizeof(err)) != IDEM_JCS_OK) {
		fprintf(stderr, "fuzz_jcs: reason: %s\n", err);
		fail("the canonical form is refused", &one, NULL);
	}
	if (two.len != one.len || memcmp(one.p, two.p, one.len) != 0)
		fail("canonicalising twice changes the text", &one, &two);

	/* The canonical form is JSON to another parser too. */
	if (idem_buf_nul(&one) == -1)
		abort();
	yerr[0] = '\0';
	if ((tree = yajl_tree_parse(one.p, yerr, sizeof(yerr))) == NULL) {
		fprintf(stderr, "fuzz_jcs: yajl_tree_parse: %s\n", yerr);
		fail("yajl_tree_parse refuses the canonical form", &one, NULL);
	}
	yajl_tree_free(tree);

	idem_buf_free(&one);
	idem_buf_free(&two);
	return 0;
}
