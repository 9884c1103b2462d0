/*
 * fuzz_key.c - libFuzzer harness for idem_key_parse() (lib/pure/key.c), the
 * Idempotency-Key field value parser.
 *
 * The input is the field value, passed as an exact-size heap copy (no NUL
 * after it), so AddressSanitizer catches any read beyond len.  Properties
 * (abort() on violation):
 *   - the result is IDEM_KEY_OK or one of the refusals (a reason exists);
 *   - on OK the key is 1..IDEM_KEY_MAX bytes of 0x20-0x7e, NUL-terminated;
 *     on a refusal the output is the empty string;
 *   - round trip: the key re-encoded as an sf-string ("..." with \" and \\
 *     escapes) parses back to the same key; the key written bare, when
 *     that is accepted, gives the same key too (one value, one key),
 *     unless it begins or ends with SP (a header value's surrounding SP
 *     is not part of it, RFC 9110 5.5) or begins with a quote (written
 *     bare, that is an sf-string): only the sf-string form carries those;
 *   - a smaller output buffer never gets more than it can hold.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "fuzz.h"

static void
fail(const char *what, const char *key)
{
	fuzz_fail("fuzz_key", what, "key", key);
}

static void
check_key(const char *key, size_t maxlen)
{
	size_t	 n, i;

	n = strnlen(key, IDEM_KEY_MAX + 1);
	if (n == 0 || n > IDEM_KEY_MAX || n > maxlen)
		fail("key length out of range", NULL);
	for (i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x20 ||
		    (unsigned char)key[i] > 0x7e)
			fail("key byte outside 0x20-0x7e", NULL);
}

static void
round_trip(const char *key)
{
	char	 enc[2 * IDEM_KEY_MAX + 3], back[IDEM_KEY_MAX + 1];
	size_t	 i, n = 0;

	enc[n++] = '"';
	for (i = 0; key[i] != '\0'; i++) {
		if (key[i] == '"' || key[i] == '\\')
			enc[n++] = '\\';
		enc[n++] = key[i];
	}
	enc[n++] = '"';
	if (fuzz_key_parse(enc, n, back, sizeof(back)) != IDEM_KEY_OK)
		fail("the key as an sf-string is refused", key);
	if (strcmp(back, key) != 0)
		fail("the key as an sf-string parses differently", key);

	n = strlen(key);
	if (key[0] == ' ' || key[n - 1] == ' ' || key[0] == '"')
		return;
	if (fuzz_key_parse(key, n, back, sizeof(back)) == IDEM_KEY_OK &&
	    strcmp(back, key) != 0)
		fail("the key written bare is another key", key);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	 key[IDEM_KEY_MAX + 1], *small;
	size_t	 smalllen;
	int	 rc;

	memset(key, 'x', sizeof(key));
	rc = fuzz_key_parse((const char *)data, size, key, sizeof(key));
	if (rc == IDEM_KEY_OK) {
		check_key(key, IDEM_KEY_MAX);
		round_trip(key);
	} else if (rc > IDEM_KEY_OK && rc <= IDEM_KEY_NO_ROOM) {
		if (key[0] != '\0')
			fail("refused, but the output is not empty", NULL);
	} else
		fail("result is no verdict", NULL);

	/*
	 * An output buffer of 1..16 bytes (exact-size heap allocation): the
	 * result may only be OK if the key fits, and then it is the same.
	 */
	smalllen = 1 + size % 16;
	if ((small = malloc(smalllen)) == NULL)
		abort();
	memset(small, 'x', smalllen);
	if (fuzz_key_parse((const char *)data, size, small, smalllen) ==
	    IDEM_KEY_OK) {
		check_key(small, smalllen - 1);
		if (rc != IDEM_KEY_OK || strcmp(small, key) != 0)
			fail("a small buffer gives a different key", small);
	} else {
		if (small[0] != '\0')
			fail("refused, but the small output is not empty",
			    NULL);
		if (rc == IDEM_KEY_OK && strlen(key) < smalllen)
			fail("a small buffer refuses a key that fits", key);
	}
	free(small);
	return 0;
}
