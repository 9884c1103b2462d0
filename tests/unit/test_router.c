/*
 * test_router.c - unit tests for router.c: registration checks, static
 * and parameter segments, 404/405 with Allow, and the odd paths that must
 * never reach a handler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "stubs.h"
#include "tap.h"

static int	 a1, a2, a3, a4, a5;	/* their addresses tell routes apart */

static int
h2(idem_req *req, void *arg)
{
	(void)req;
	(void)arg;
	return 1;
}

static struct idem_router	 rt;
static const struct idem_route	*route;
static struct idem_params	 params;
static char			 allow[64];

/* Match from a heap copy of the path, so ASan sees any overread. */
static enum idem_match
match(const struct idem_router *r, const char *method, const char *path)
{
	enum idem_match	 m;
	char		*copy;

	idem_params_free(&params);
	memset(allow, 'X', sizeof(allow) - 1);
	allow[sizeof(allow) - 1] = '\0';
	route = (const struct idem_route *)&a5;	/* must be reset */
	if ((copy = strdup(path)) == NULL)
		return (enum idem_match)-1;
	m = idem_router_match(r, method, copy, &route, &params, allow,
	    sizeof(allow));
	free(copy);
	return m;
}

/* params are empty and route NULL after a failed match */
static int
empty_result(void)
{
	size_t	 i;

	if (params.n != 0 || route != NULL)
		return 0;
	for (i = 0; i < IDEM_MAX_PARAMS; i++)
		if (params.value[i] != NULL || params.name[i] != NULL)
			return 0;
	return 1;
}

#define NOT_FOUND(r, m, p) do {						\
	TAP_OK(match(r, m, p) == IDEM_MATCH_NOT_FOUND && empty_result() && \
	    allow[0] == '\0', "404 %s %s", m, p);			\
} while (0)

#define ALLOWS(r, m, p, want) do {					\
	enum idem_match m_ = match(r, m, p);				\
	TAP_OK(m_ == IDEM_MATCH_METHOD && empty_result(),		\
	    "405 %s %s", m, p);						\
	TAP_STREQ(allow, want, "  Allow for %s", p);			\
} while (0)

#define FOUND(r, m, p, argp) do {					\
	enum idem_match m_ = match(r, m, p);				\
	TAP_OK(m_ == IDEM_MATCH_OK && route != NULL &&			\
	    route->arg == (argp) && allow[0] == '\0',			\
	    "200 %s %s -> %s", m, p,					\
	    m_ == IDEM_MATCH_OK && route ? route->pattern : "-");	\
} while (0)

#define PARAM(i, nm, val) do {						\
	TAP_STREQ(params.n > (i) ? params.name[i] : NULL, nm,		\
	    "  param %d name %s", i, nm);				\
	TAP_STREQ(params.n > (i) ? params.value[i] : NULL, val,	\
	    "  param %d value %s", i, val);				\
} while (0)

static void
test_add(void)
{
	static const struct {
		const char	*method, *pattern;
		int		(*fn)(idem_req *, void *);
		const char	*what;
	} refused[] = {
		{ "GET", "/a", NULL, "NULL handler" },
		{ "get", "/a", nop, "lowercase method" },
		{ "", "/a", nop, "empty method" },
		{ "GET POST", "/a", nop, "method with a space" },
		{ NULL, "/a", nop, "NULL method" },
		{ "GET", NULL, nop, "NULL pattern" },
		{ "GET", "a", nop, "pattern without leading /" },
		{ "GET", "", nop, "empty pattern" },
		{ "GET", "/a/:", nop, "unnamed parameter" },
		{ "GET", "/a/:b-c", nop, "parameter name with '-'" },
		{ "GET", "/a/:x/:x", nop, "duplicate parameter name" },
		{ "GET", "/a/../b", nop, "'..' segment" },
		{ "GET", "/a/./b", nop, "'.' segment" },
	};
	struct idem_router	 r = { NULL, 0 };
	char			 pat[256];
	size_t			 j;
	int			 i;

	for (j = 0; j < sizeof(refused) / sizeof(refused[0]); j++)
		TAP_OK(idem_router_add(&r, refused[j].method, refused[j].pattern,
		    0, refused[j].fn, NULL) == -1, "%s refused", refused[j].what);
	TAP_OK(r.nroutes == 0 && r.routes == NULL, "nothing registered yet");

	TAP_OK(idem_router_add(&r, "GET", "/:a/:b/:c/:d/:e/:f/:g/:h", 0, nop,
	    NULL) == 0, "8 parameters accepted");
	TAP_OK(idem_router_add(&r, "GET", "/:a/:b/:c/:d/:e/:f/:g/:h/:i", 0, nop,
	    NULL) == -1, "9 parameters refused");
	pat[0] = '\0';
	for (i = 0; i < 32; i++)
		strcat(pat, "/s");
	TAP_OK(idem_router_add(&r, "GET", pat, 0, nop, NULL) == 0,
	    "32 segments accepted");
	strcat(pat, "/s");
	TAP_OK(idem_router_add(&r, "GET", pat, 0, nop, NULL) == -1,
	    "33 segments refused");
	TAP_OK(idem_router_add(&r, "GET", "/x", 0, nop, NULL) == 0 &&
	    idem_router_add(&r, "GET", "/x", 0, h2, NULL) == -1,
	    "same method and pattern twice refused");
	TAP_OK(idem_router_add(&r, "POST", "/x", 0, nop, NULL) == 0,
	    "same pattern, other method accepted");
	TAP_OK(r.nroutes == 4, "four routes registered");

	/* copies are kept, not the caller's strings */
	strcpy(pat, "/copy/:id");
	TAP_OK(idem_router_add(&r, "PUT", pat, IDEM_ROUTE_JSON, h2, &a1) == 0,
	    "add from a buffer");
	memset(pat, 'Z', 10);
	FOUND(&r, "PUT", "/copy/7", &a1);
	TAP_STREQ(route != NULL ? route->pattern : NULL, "/copy/:id",
	    "  pattern was copied");
	TAP_OK(route != NULL && route->fn == h2 &&
	    route->flags == IDEM_ROUTE_JSON, "  fn and flags kept");
	PARAM(0, "id", "7");
	idem_params_free(&params);
	idem_router_free(&r);
	TAP_OK(r.routes == NULL && r.nroutes == 0, "router freed and cleared");
	idem_router_free(&r);
}

static void
test_match(void)
{
	TAP_OK(idem_router_add(&rt, "GET", "/health", IDEM_ROUTE_PUBLIC, nop,
	    &a1) == 0 &&
	    idem_router_add(&rt, "POST", "/v1/payments",
	    IDEM_ROUTE_IDEMPOTENT | IDEM_ROUTE_JSON, nop, &a2) == 0 &&
	    idem_router_add(&rt, "GET", "/v1/payments/:id", 0, nop, &a3) == 0 &&
	    idem_router_add(&rt, "PUT", "/v1/payments/:id", 0, nop, &a4) == 0 &&
	    idem_router_add(&rt, "GET", "/", 0, nop, &a5) == 0,
	    "register routes");

	/* static */
	FOUND(&rt, "GET", "/health", &a1);
	TAP_OK(route != NULL && route->flags == IDEM_ROUTE_PUBLIC &&
	    strcmp(route->method, "GET") == 0 && params.n == 0,
	    "  flags, method, no params");
	FOUND(&rt, "POST", "/v1/payments", &a2);
	FOUND(&rt, "GET", "/", &a5);

	/* params */
	FOUND(&rt, "GET", "/v1/payments/pay_123", &a3);
	TAP_OK(params.n == 1, "  one param");
	PARAM(0, "id", "pay_123");
	FOUND(&rt, "PUT", "/v1/payments/AZaz09._~-", &a4);
	PARAM(0, "id", "AZaz09._~-");
	FOUND(&rt, "GET", "/v1/payments/...", &a3);
	PARAM(0, "id", "...");
	FOUND(&rt, "GET", "/v1/payments/.a", &a3);
	FOUND(&rt, "GET", "/v1/payments/a..", &a3);
	idem_params_free(&params);
	TAP_OK(params.n == 0 && params.value[0] == NULL, "params freed");
	idem_params_free(&params);

	/* 404 */
	NOT_FOUND(&rt, "GET", "/nope");
	NOT_FOUND(&rt, "GET", "/healthz");
	NOT_FOUND(&rt, "GET", "/healt");
	NOT_FOUND(&rt, "GET", "/Health");
	NOT_FOUND(&rt, "GET", "/health/x");
	NOT_FOUND(&rt, "GET", "/health?x=1");
	NOT_FOUND(&rt, "GET", "health");
	NOT_FOUND(&rt, "GET", "");
	NOT_FOUND(&rt, "GET", "/v1");
	NOT_FOUND(&rt, "GET", "/v1/payments/a/b");
	TAP_OK(idem_router_match(&rt, "GET", NULL, &route, &params, allow,
	    sizeof(allow)) == IDEM_MATCH_NOT_FOUND && route == NULL,
	    "NULL path is 404");
	TAP_OK(idem_router_match(&rt, NULL, "/health", &route, &params, allow,
	    sizeof(allow)) == IDEM_MATCH_NOT_FOUND, "NULL method is 404");

	/* 405 */
	ALLOWS(&rt, "DELETE", "/v1/payments/pay_1", "GET, HEAD, PUT");
	ALLOWS(&rt, "GET", "/v1/payments", "POST");
	ALLOWS(&rt, "POST", "/health", "GET, HEAD");
	ALLOWS(&rt, "get", "/health", "GET, HEAD");
	ALLOWS(&rt, "POST", "/", "GET, HEAD");
	/* HEAD: served by the GET route (RFC 9110 9.1), never by another */
	FOUND(&rt, "HEAD", "/health", &a1);
	FOUND(&rt, "HEAD", "/v1/payments/pay_1", &a3);
	PARAM(0, "id", "pay_1");
	idem_params_free(&params);
	ALLOWS(&rt, "HEAD", "/v1/payments", "POST");
	NOT_FOUND(&rt, "HEAD", "/nope");
	/* 405 only when the path itself matches */
	NOT_FOUND(&rt, "DELETE", "/v1/payments/");
	NOT_FOUND(&rt, "DELETE", "/v1/payments/..");

	/* trailing slash and empty segments */
	NOT_FOUND(&rt, "GET", "/health/");
	NOT_FOUND(&rt, "POST", "/v1/payments/");
	NOT_FOUND(&rt, "GET", "/v1/payments/pay_1/");
	NOT_FOUND(&rt, "GET", "//health");
	NOT_FOUND(&rt, "GET", "//");
	NOT_FOUND(&rt, "POST", "/v1//payments");
	NOT_FOUND(&rt, "GET", "/v1/payments//pay_1");
	NOT_FOUND(&rt, "GET", "/v1//payments/pay_1");

	/* dot segments and escapes never become a parameter */
	NOT_FOUND(&rt, "GET", "/v1/payments/..");
	NOT_FOUND(&rt, "GET", "/v1/payments/.");
	NOT_FOUND(&rt, "GET", "/v1/payments/%00");
	NOT_FOUND(&rt, "GET", "/v1/payments/a%2Fb");
	NOT_FOUND(&rt, "GET", "/v1/payments/%2e%2e");
	NOT_FOUND(&rt, "GET", "/v1/./payments");
	NOT_FOUND(&rt, "POST", "/v1/../v1/payments");
	NOT_FOUND(&rt, "GET", "/v1/payments/a b");
	NOT_FOUND(&rt, "GET", "/v1/payments/caf\xc3\xa9");
}

static void
test_charset(void)
{
	char		 path[32];
	const char	*allowed =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789._~-";
	int		 c, bad = 0, m, want;

	for (c = 1; c < 256; c++) {
		if (c == '/')
			continue;
		snprintf(path, sizeof(path), "/v1/payments/a%cb", c);
		m = match(&rt, "GET", path) == IDEM_MATCH_OK;
		want = strchr(allowed, c) != NULL;
		if (m != want) {
			printf("# byte 0x%02x: matched %d, want %d\n", c, m, want);
			bad++;
		}
		if (m && (params.n != 1 || strcmp(params.value[0], path + 13)))
			bad++;
	}
	TAP_OK(bad == 0, "parameter bytes: exactly [A-Za-z0-9._~-] (%d bad)",
	    bad);
}

static void
test_multi(void)
{
	struct idem_router	 r = { NULL, 0 };

	TAP_OK(idem_router_add(&r, "GET", "/t/:tenant/orders/:order/items/:n",
	    0, nop, &a1) == 0, "register 3-param route");
	FOUND(&r, "GET", "/t/acme/orders/o-1/items/3", &a1);
	TAP_OK(params.n == 3, "  three params");
	PARAM(0, "tenant", "acme");
	PARAM(1, "order", "o-1");
	PARAM(2, "n", "3");
	NOT_FOUND(&r, "GET", "/t/acme/orders//items/3");
	NOT_FOUND(&r, "GET", "/t/acme/order/o-1/items/3");
	NOT_FOUND(&r, "GET", "/t/acme/orders/o-1/items");
	NOT_FOUND(&r, "GET", "/t/acme/orders/o-1/items/3/4");
	NOT_FOUND(&r, "GET", "/t/../orders/o-1/items/3");

	/* a trailing-slash pattern matches only with the slash */
	TAP_OK(idem_router_add(&r, "GET", "/dir/", 0, nop, &a2) == 0,
	    "register /dir/");
	FOUND(&r, "GET", "/dir/", &a2);
	NOT_FOUND(&r, "GET", "/dir");
	NOT_FOUND(&r, "GET", "/dir//");

	/* a literal ':' inside a segment is literal */
	TAP_OK(idem_router_add(&r, "POST", "/v1/jobs/run:now", 0, nop,
	    &a3) == 0, "register literal with ':'");
	FOUND(&r, "POST", "/v1/jobs/run:now", &a3);
	TAP_OK(params.n == 0, "  no params");
	NOT_FOUND(&r, "POST", "/v1/jobs/run:later");

	/* 8 params all filled, names NUL-terminated */
	TAP_OK(idem_router_add(&r, "GET", "/:a/:b/:c/:d/:e/:f/:g/:hh", 0, nop,
	    &a4) == 0, "register 8-param route");
	FOUND(&r, "GET", "/1/2/3/4/5/6/7/8", &a4);
	TAP_OK(params.n == 8, "  eight params");
	PARAM(0, "a", "1");
	PARAM(7, "hh", "8");
	idem_params_free(&params);
	idem_router_free(&r);
}

static void
test_allow(void)
{
	struct idem_router	 r = { NULL, 0 };
	char			 small[8];

	TAP_OK(idem_router_add(&r, "GET", "/items/:id", 0, nop, &a1) == 0 &&
	    idem_router_add(&r, "DELETE", "/items/:id", 0, nop, &a2) == 0 &&
	    idem_router_add(&r, "GET", "/items/new", 0, nop, &a3) == 0 &&
	    idem_router_add(&r, "POST", "/items/new", 0, nop, &a4) == 0 &&
	    idem_router_add(&r, "PATCH", "/other", 0, nop, &a5) == 0,
	    "register allow routes");
	ALLOWS(&r, "PUT", "/items/new", "GET, HEAD, DELETE, POST");
	ALLOWS(&r, "PUT", "/items/7", "GET, HEAD, DELETE");
	FOUND(&r, "POST", "/items/new", &a4);
	FOUND(&r, "DELETE", "/items/new", &a2);
	PARAM(0, "id", "new");
	/* match overwrites params: free them before matching again */
	idem_params_free(&params);

	/* a short buffer gets whole methods only */
	memset(small, 'X', sizeof(small));
	TAP_OK(idem_router_match(&r, "PUT", "/items/new", &route, &params,
	    small, sizeof(small)) == IDEM_MATCH_METHOD, "405 with 8-byte buffer");
	TAP_STREQ(small, "GET", "  only whole methods that fit");
	memset(small, 'X', sizeof(small));
	TAP_OK(idem_router_match(&r, "PUT", "/items/new", &route, &params,
	    small, 4) == IDEM_MATCH_METHOD, "405 with 4-byte buffer");
	TAP_STREQ(small, "GET", "  GET fits exactly");
	memset(small, 'X', sizeof(small));
	TAP_OK(idem_router_match(&r, "PUT", "/items/new", &route, &params,
	    small, 3) == IDEM_MATCH_METHOD, "405 with 3-byte buffer");
	TAP_STREQ(small, "", "  nothing fits");
	TAP_OK(idem_router_match(&r, "PUT", "/items/new", &route, &params,
	    NULL, 0) == IDEM_MATCH_METHOD, "405 without allow buffer");
	TAP_OK(idem_router_match(&r, "GET", "/items/9", NULL, NULL, NULL, 0) ==
	    IDEM_MATCH_OK, "match without route/params/allow outputs");
	idem_router_free(&r);
}

static void
test_priority(void)
{
	struct idem_router	 r = { NULL, 0 };

	/* literal first: it wins for its path, the param takes the rest */
	TAP_OK(idem_router_add(&r, "GET", "/items/new", 0, nop, &a1) == 0 &&
	    idem_router_add(&r, "GET", "/items/:id", 0, nop, &a2) == 0,
	    "register literal then param");
	FOUND(&r, "GET", "/items/new", &a1);
	TAP_OK(params.n == 0, "  literal route has no params");
	FOUND(&r, "GET", "/items/old", &a2);
	PARAM(0, "id", "old");
	idem_router_free(&r);

	/* param first: it shadows the literal */
	TAP_OK(idem_router_add(&r, "GET", "/items/:id", 0, nop, &a2) == 0 &&
	    idem_router_add(&r, "GET", "/items/new", 0, nop, &a1) == 0,
	    "register param then literal");
	FOUND(&r, "GET", "/items/new", &a2);
	PARAM(0, "id", "new");
	/* two param shapes: the first registered one names the param */
	TAP_OK(idem_router_add(&r, "GET", "/items/:other", 0, nop, &a3) == 0,
	    "register second param shape");
	FOUND(&r, "GET", "/items/x", &a2);
	PARAM(0, "id", "x");
	idem_params_free(&params);
	idem_router_free(&r);
}

static void
test_limits(void)
{
	struct idem_router	 r = { NULL, 0 };
	char			*p, pat[256];
	size_t			 i;
	int			 ok = 1;

	TAP_OK(idem_router_add(&r, "GET", "/p/:x", 0, nop, &a1) == 0,
	    "register /p/:x");
	if ((p = malloc(100000 + 1)) == NULL)
		return;
	/* exactly 2048 bytes matches, 2049 does not */
	memcpy(p, "/p/", 3);
	memset(p + 3, 'a', 2048 - 3);
	p[2048] = '\0';
	FOUND(&r, "GET", p, &a1);
	TAP_OK(params.n == 1 && strlen(params.value[0]) == 2045,
	    "  2045-byte param");
	p[2048] = 'a';
	p[2049] = '\0';
	NOT_FOUND(&r, "GET", p);
	memset(p + 3, 'a', 100000 - 3);
	p[100000] = '\0';
	NOT_FOUND(&r, "GET", p);

	/* 32 segments match, 33 do not */
	pat[0] = '\0';
	for (i = 0; i < 31; i++)
		strcat(pat, "/s");
	strcat(pat, "/:last");
	TAP_OK(idem_router_add(&r, "GET", pat, 0, nop, &a2) == 0,
	    "register 32-segment pattern");
	pat[0] = '\0';
	for (i = 0; i < 32; i++)
		strcat(pat, "/s");
	FOUND(&r, "GET", pat, &a2);
	PARAM(0, "last", "s");
	strcat(pat, "/s");
	NOT_FOUND(&r, "GET", pat);
	/* 4000 slashes: too many segments, refused early */
	memset(p, '/', 4000);
	p[4000] = '\0';
	NOT_FOUND(&r, "GET", p);

	/* many routes: the array grows and earlier ones still match */
	for (i = 0; i < 200 && ok; i++) {
		snprintf(pat, sizeof(pat), "/many/%zu/:v", i);
		ok = idem_router_add(&r, "GET", pat, 0, nop, &a3) == 0;
	}
	TAP_OK(ok && r.nroutes == 202, "200 more routes registered");
	FOUND(&r, "GET", "/many/0/zero", &a3);
	PARAM(0, "v", "zero");
	FOUND(&r, "GET", "/many/199/last", &a3);
	FOUND(&r, "GET", "/p/still", &a1);
	free(p);
	idem_params_free(&params);
	idem_router_free(&r);
}

int
main(void)
{
	struct idem_router	 zr;
	struct idem_params	 zp;

	test_add();
	test_match();
	test_charset();
	test_multi();
	test_allow();
	test_priority();
	test_limits();
	idem_params_free(&params);
	idem_router_free(&rt);

	memset(&zr, 0, sizeof(zr));
	memset(&zp, 0, sizeof(zp));
	idem_router_free(&zr);
	idem_params_free(&zp);
	idem_params_free(&zp);
	idem_params_free(NULL);
	idem_router_free(NULL);
	TAP_OK(zr.nroutes == 0 && zp.n == 0, "zeroed structs free safely");
	TAP_OK(match(&zr, "GET", "/") == IDEM_MATCH_NOT_FOUND,
	    "empty router: 404");
	return TAP_DONE();
}
