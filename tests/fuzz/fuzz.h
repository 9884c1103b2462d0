/*
 * fuzz.h - what the libFuzzer harnesses share: the entry point's
 * declaration, the exact-size copy of an input and the report of a
 * violated property.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* n bytes of p in a heap block of exactly that size (no NUL after them),
 * so that AddressSanitizer catches a read beyond n; aborts when out of
 * memory.  Free it with free(). */
static inline char *
fuzz_copy(const void *p, size_t n)
{
	char	*copy;

	if ((copy = malloc(n > 0 ? n : 1)) == NULL)
		abort();
	if (n > 0)
		memcpy(copy, p, n);
	return copy;
}

/* Report that harness violated the property what, with "label: [detail]"
 * when detail is not NULL, and abort(): the fuzzer keeps the input. */
static inline void __attribute__((noreturn))
fuzz_fail(const char *harness, const char *what, const char *label,
    const char *detail)
{
	fprintf(stderr, "%s: property violated: %s\n", harness, what);
	if (detail != NULL)
		fprintf(stderr, "  %s: [%s]\n", label, detail);
	abort();
}

/* idem_key_parse() of len bytes of s, from an exact-size copy. */
static inline int
fuzz_key_parse(const char *s, size_t len, char *out, size_t outlen)
{
	char	*copy = fuzz_copy(s, len);
	int	 rc;

	rc = idem_key_parse(copy, len, out, outlen);
	free(copy);
	return rc;
}

#endif
