/*
 * fuzz_router.c - libFuzzer harness for idem_router_match() (lib/pure/router.c)
 * with the routes of the payments application.
 *
 * The input is "METHOD" and "PATH", split at the first NUL or newline
 * (no separator: all of it is the path, the method is GET).  Both are
 * exact-size heap copies.  Properties (abort() on violation):
 *   - on IDEM_MATCH_OK the route is one of the table, its method is the
 *     one asked for, there is one parameter per ":name" of its pattern,
 *     and every parameter value is non-empty, made of [A-Za-z0-9._~-],
 *     neither "." nor "..", and a segment of the path;
 *   - on IDEM_MATCH_METHOD the allow list is non-empty and does not hold
 *     the method asked for;
 *   - otherwise no route, no parameters, an empty allow list;
 *   - a small allow buffer (exact-size heap allocation) gives the same
 *     result and is never overrun;
 *   - the parameters are freed (LeakSanitizer checks).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "fuzz.h"
#include "routes.h"


static void
fail(const char *what, const char *method, const char *path)
{
	fprintf(stderr, "fuzz_router: property violated: %s\n", what);
	fprintf(stderr, "  method: [%s]\n  path: [%s]\n", method, path);
	abort();
}

static size_t
count_params(const char *pattern)
{
	size_t	 n = 0;
	const char *s;

	for (s = pattern; (s = strstr(s, "/:")) != NULL; s += 2)
		n++;
	return n;
}

/* Is v one whole segment of path? */
static int
is_segment(const char *path, const char *v)
{
	const char	*s, *e;
	size_t		 n = strlen(v);

	for (s = path; *s == '/'; s = e) {
		s++;
		e = strchrnul(s, '/');
		if ((size_t)(e - s) == n && memcmp(s, v, n) == 0)
			return 1;
	}
	return 0;
}

static void
check(enum idem_match m, const struct idem_route *rt,
    const struct idem_params *pa, const char *allow, const char *method,
    const char *path)
{
	const char	*v;
	size_t		 i, j, n;

	switch (m) {
	case IDEM_MATCH_OK:
		if (rt == NULL || rt < router.routes ||
		    rt >= router.routes + router.nroutes)
			fail("OK without a route of the table", method, path);
		/* HEAD is answered by a GET route (RFC 9110 9.1). */
		if (strcmp(rt->method, method) != 0 &&
		    !(strcmp(method, "HEAD") == 0 &&
		    strcmp(rt->method, "GET") == 0))
			fail("OK with a route of another method", method,
			    path);
		if (pa->n != count_params(rt->pattern))
			fail("parameter count differs from the pattern",
			    method, path);
		for (i = 0; i < pa->n; i++) {
			if (pa->name[i] == NULL || strcmp(pa->name[i], "id"))
				fail("bad parameter name", method, path);
			if ((v = pa->value[i]) == NULL || (n = strlen(v)) == 0)
				fail("empty parameter value", method, path);
			for (j = 0; j < n; j++)
				if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "abcdefghijklmnopqrstuvwxyz"
				    "0123456789._~-", v[j]) == NULL)
					fail("bad byte in a parameter value",
					    method, path);
			if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0)
				fail("dot segment as a parameter", method,
				    path);
			if (!is_segment(path, v))
				fail("parameter is not a segment of the path",
				    method, path);
		}
		for (; i < IDEM_MAX_PARAMS; i++)
			if (pa->value[i] != NULL)
				fail("a value beyond n", method, path);
		if (allow[0] != '\0')
			fail("OK with an allow list", method, path);
		break;
	case IDEM_MATCH_METHOD:
	case IDEM_MATCH_NOT_FOUND:
		if (rt != NULL || pa->n != 0)
			fail("no match, but a route or parameters", method,
			    path);
		for (i = 0; i < IDEM_MAX_PARAMS; i++)
			if (pa->value[i] != NULL)
				fail("no match, but a parameter value", method,
				    path);
		if (m == IDEM_MATCH_NOT_FOUND) {
			if (allow[0] != '\0')
				fail("not found, but an allow list", method,
				    path);
			break;
		}
		if (allow[0] == '\0')
			fail("method not allowed, but no allow list",
			    method, path);
		/* "A, B, C": methods of that path, each once. */
		n = strlen(method);
		for (v = allow;;) {
			j = strcspn(v, ",");
			if (j == 0)
				fail("empty entry in the allow list", method,
				    path);
			if (j == n && strncmp(v, method, n) == 0)
				fail("allow list holds the method asked for",
				    method, path);
			if (v[j] == '\0')
				break;
			if (v[j + 1] != ' ')
				fail("allow list not \"A, B\"", method, path);
			v += j + 2;
		}
		break;
	default:
		fail("unknown result", method, path);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct idem_route	*rt, *rt2;
	struct idem_params	 pa, pa2;
	enum idem_match		 m, m2;
	const uint8_t		*sep;
	char			*method, *path, allow[128], *small;
	size_t			 n, smalllen;

	for (sep = data, n = 0; n < size; n++, sep++)
		if (*sep == '\0' || *sep == '\n')
			break;
	if (n < size) {
		method = dupn(data, n);
		path = dupn(data + n + 1, size - n - 1);
	} else {
		method = dupn((const uint8_t *)"GET", 3);
		path = dupn(data, size);
	}
	/* A NUL inside the path cuts it, as it would a C string. */

	memset(&pa, 0x5a, sizeof(pa));
	memset(allow, 'x', sizeof(allow));
	rt = (const void *)&pa;
	m = idem_router_match(&router, method, path, &rt, &pa, allow,
	    sizeof(allow));
	if (memchr(allow, '\0', sizeof(allow)) == NULL)
		fail("allow list not NUL-terminated", method, path);
	check(m, rt, &pa, allow, method, path);

	/* The same with a small allow buffer and without the outputs. */
	smalllen = 1 + size % 12;
	if ((small = malloc(smalllen)) == NULL)
		abort();
	memset(small, 'x', smalllen);
	m2 = idem_router_match(&router, method, path, &rt2, &pa2, small,
	    smalllen);
	if (m2 != m || rt2 != rt)
		fail("the allow buffer size changes the result", method,
		    path);
	if (memchr(small, '\0', smalllen) == NULL)
		fail("small allow list not NUL-terminated", method, path);
	if (m == IDEM_MATCH_OK && small[0] != '\0')
		fail("OK with a small allow list", method, path);
	idem_params_free(&pa2);
	free(small);
	if (idem_router_match(&router, method, path, NULL, NULL, NULL, 0) !=
	    m)
		fail("no outputs changes the result", method, path);

	idem_params_free(&pa);
	free(method);
	free(path);
	return 0;
}
