/*
 * fuzz_request.c - libFuzzer harness for the request parameters as they
 * arrive: a request line and header fields.
 *
 * The query decoder itself (idem_req_query in lib/request/request.c) needs a whole
 * idem_req (FastCGI request, app, pool), so it is not fuzzed here; this
 * harness feeds the two parsers a request's parameters do go through,
 * idem_router_match() (lib/pure/router.c) and idem_key_parse() (lib/pure/key.c), with
 * header-like input:
 *
 *	METHOD SP TARGET [SP VERSION]    TARGET = PATH ["?" QUERY]
 *	Name: value                      (any number, LF or CRLF)
 *	(empty line) BODY                optional
 *
 * The path (query cut off, as the server does) is matched against the
 * payments routes; every header value (OWS kept, as the server passes it)
 * goes to idem_key_parse() as an exact-size heap copy, and Idempotency-Key
 * values are also tried with a small output buffer.  Properties (abort()
 * on violation): a matched parameter is a non-empty segment of
 * [A-Za-z0-9._~-]; a key is 1..IDEM_KEY_MAX bytes of 0x20-0x7e; parsing
 * a value twice gives the same result; nothing leaks.
 *
 * A body that parses as JSON goes to idem_validate() (lib/pure/validate.c)
 * with the payments create's declaration: a refusal's detail is
 * "member: rule" naming "body", a declared member or one of the body's;
 * an accepted body has its required members, in range; the same answer
 * twice; a short detail buffer is a prefix of the long one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "fuzz.h"
#include "routes.h"
#include "../unit/stubs.h"

static const struct idem_member meta_value = { .name = "*",
	.type = IDEM_T_STRING, .max = 500 };
static const struct idem_body meta = { .flags = IDEM_BODY_OPEN,
	.rest = &meta_value, .name_min = 1, .name_max = 40 };
static const char *const tag_names[] = { "a", "b", "c", NULL };
static const struct idem_member tag = { .name = "*", .type = IDEM_T_STRING,
	.oneof = tag_names };
static const struct idem_body payment = { (const struct idem_member[]){
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 1000000000000LL },
	{ .name = "currency", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .pattern = "^[a-z]{3}$", .check = not_zzz },
	{ .name = "description", .type = IDEM_T_STRING, .max = 1000 },
	{ .name = "capture", .type = IDEM_T_BOOLEAN },
	{ .name = "metadata", .type = IDEM_T_OBJECT, .max = 50,
	  .object = &meta },
	{ .name = "tags", .type = IDEM_T_ARRAY, .flags = IDEM_UNIQUE,
	  .min = 1, .max = 3, .items = &tag },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static void
fail(const char *what, const char *s, size_t n)
{
	fprintf(stderr, "fuzz_request: property violated: %s\n", what);
	if (s != NULL)
		fprintf(stderr, "  input: [%.*s]\n", (int)n, s);
	abort();
}

static void
request_line(const char *line, size_t len)
{
	const struct idem_route	*rt;
	struct idem_params	 pa;
	const char		*sp, *v;
	char			*method, *path, allow[64];
	size_t			 n, i, j;

	if ((sp = memchr(line, ' ', len)) == NULL)
		return;
	method = dupn(line, (size_t)(sp - line));
	/* The path ends at '?' (the query) or ' ' (" HTTP/1.1"). */
	n = len - (size_t)(sp - line) - 1;
	for (i = 0; i < n && sp[1 + i] != '?' && sp[1 + i] != ' '; i++)
		;
	path = dupn(sp + 1, i);

	if (idem_router_match(&router, method, path, &rt, &pa, allow,
	    sizeof(allow)) == IDEM_MATCH_OK) {
		if (rt == NULL)
			fail("OK without a route", line, len);
		for (i = 0; i < pa.n; i++) {
			v = pa.value[i];
			if (v == NULL || v[0] == '\0')
				fail("empty parameter", line, len);
			for (j = 0; v[j] != '\0'; j++)
				if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "abcdefghijklmnopqrstuvwxyz"
				    "0123456789._~-", v[j]) == NULL)
					fail("bad byte in a parameter", line,
					    len);
			if (strstr(path, v) == NULL)
				fail("parameter not in the path", line, len);
		}
	}
	idem_params_free(&pa);
	free(method);
	free(path);
}

static int
key(const char *value, size_t len, char *out, size_t outlen)
{
	size_t	 i, n;
	int	 rc;

	rc = fuzz_key_parse(value, len, out, outlen);
	if (rc == IDEM_KEY_OK) {
		n = strnlen(out, outlen);
		if (n == 0 || n > IDEM_KEY_MAX || n >= outlen)
			fail("key length out of range", value, len);
		for (i = 0; i < n; i++)
			if ((unsigned char)out[i] < 0x20 ||
			    (unsigned char)out[i] > 0x7e)
				fail("key byte outside 0x20-0x7e", value, len);
	} else if (rc < IDEM_KEY_OK || rc > IDEM_KEY_NO_ROOM)
		fail("key result is no verdict", value, len);
	else if (out[0] != '\0')
		fail("refused key, but output not empty", value, len);
	return rc;
}

static void
header_line(const char *line, size_t len)
{
	const char	*colon;
	char		 k1[IDEM_KEY_MAX + 1], k2[IDEM_KEY_MAX + 1], *small;
	size_t		 nlen, vlen, smalllen;
	int		 rc;

	if ((colon = memchr(line, ':', len)) == NULL)
		return;
	nlen = (size_t)(colon - line);
	vlen = len - nlen - 1;
	rc = key(colon + 1, vlen, k1, sizeof(k1));
	if (key(colon + 1, vlen, k2, sizeof(k2)) != rc || strcmp(k1, k2) != 0)
		fail("parsing twice differs", line, len);
	if (nlen == strlen("Idempotency-Key") &&
	    strncasecmp(line, "Idempotency-Key", nlen) == 0) {
		smalllen = 1 + vlen % 8;
		if ((small = malloc(smalllen)) == NULL)
			abort();
		if (key(colon + 1, vlen, small, smalllen) == IDEM_KEY_OK &&
		    (rc != IDEM_KEY_OK || strcmp(small, k1) != 0))
			fail("small buffer gives another key", line, len);
		free(small);
	}
}

static yajl_val
member(yajl_val obj, const char *name)
{
	size_t	i;

	for (i = 0; i < obj->u.object.len; i++)
		if (strcmp(obj->u.object.keys[i], name) == 0)
			return obj->u.object.values[i];
	return NULL;
}

static void
body(const char *p, size_t n)
{
	char		*text = dupn(p, n), why[320], why2[320], small[16];
	const char	*colon;
	yajl_val	 v, a;
	size_t		 seg, i, smalllen = 1 + n % sizeof(small);
	int		 rc, known;

	v = yajl_tree_parse(text, NULL, 0);
	free(text);
	if (v == NULL)
		return;
	rc = idem_validate(v, &payment, why, sizeof(why));
	if (idem_validate(v, &payment, why2, sizeof(why2)) != rc ||
	    strcmp(why, why2) != 0)
		fail("validating twice differs", why, strlen(why));
	if (idem_validate(v, &payment, small, smalllen) != rc ||
	    strncmp(small, why, smalllen - 1) != 0)
		fail("a short detail buffer is not a prefix", why, strlen(why));
	if (rc == 0) {
		a = YAJL_IS_OBJECT(v) ? member(v, "amount") : NULL;
		if (why[0] != '\0' || a == NULL || !YAJL_IS_INTEGER(a) ||
		    YAJL_GET_INTEGER(a) < 1 || member(v, "currency") == NULL)
			fail("accepted without its required members", why,
			    strlen(why));
	} else if (rc != -1 || (colon = strstr(why, ": ")) == NULL)
		fail("refused without \"member: rule\"", why, strlen(why));
	else {
		/* The first segment of the path names something real. */
		seg = strcspn(why, ".:[");
		known = seg == 4 && strncmp(why, "body", 4) == 0;
		for (i = 0; !known && payment.members[i].name != NULL; i++)
			known = strlen(payment.members[i].name) == seg &&
			    strncmp(why, payment.members[i].name, seg) == 0;
		for (i = 0; !known && YAJL_IS_OBJECT(v) &&
		    i < v->u.object.len; i++)
			known = strncmp(why, v->u.object.keys[i], seg) == 0;
		if (!known)
			fail("the detail names no member", why, strlen(why));
	}
	yajl_tree_free(v);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char	*p = (const char *)data, *end = p + size, *nl;
	size_t		 n;
	int		 first = 1;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		n = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		if (n > 0 && p[n - 1] == '\r')
			n--;
		if (!first && n == 0 && nl != NULL) {
			body(nl + 1, (size_t)(end - nl - 1));
			break;
		}
		if (first)
			request_line(p, n);
		else
			header_line(p, n);
		first = 0;
		p = nl != NULL ? nl + 1 : end;
	}
	return 0;
}
