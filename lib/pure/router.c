/*
 * router.c - maps METHOD and path to a registered route.  Matching is
 * exact and segment-wise: no decoding, no normalisation, no prefix
 * matches; a path that is odd in any way (empty or dot segments, bytes a
 * parameter may not hold, too long) simply does not match, so a handler
 * never sees such a parameter.
 *
 * A path "/a/b" has the segments "a" and "b"; "/" has one empty segment,
 * "/a/" has "a" and "" and "/a//b" has "a", "" and "b".  Empty literal
 * segments therefore match only where the pattern has them too.
 *
 * Parameter names must be C strings, but in the pattern they are followed
 * by '/'.  So route->pattern is one allocation holding the pattern and,
 * after its NUL, a second copy with every '/' turned into NUL; the names
 * in struct idem_params point into that copy.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SEGS_MAX	32
#define METHOD_MAX	32
#define STR_(x)	#x
#define STR(x)	STR_(x)

struct span {
	const char	*p;
	size_t		 len;
};

static int
is_param_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
	    c == '-';
}

static int
is_name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '_';
}

static int
is_dots(const char *s, size_t len)
{
	return (len == 1 && s[0] == '.') ||
	    (len == 2 && s[0] == '.' && s[1] == '.');
}

/*
 * A pattern must be one that some path can match: it starts with '/',
 * has at most SEGS_MAX segments and IDEM_MAX_PARAMS distinct ":name"s,
 * and no "." or ".." segment.  NULL, or why it is refused.
 */
static const char *
pattern_refusal(const char *pat)
{
	const char	*s, *e, *names[IDEM_MAX_PARAMS];
	size_t		 len[IDEM_MAX_PARAMS], nseg = 0, np = 0, i, n;

	if (pat[0] != '/' || strlen(pat) > IDEM_PATH_MAX)
		return "the pattern must start with '/' and be at most "
		    STR(IDEM_PATH_MAX) " bytes";
	for (s = pat + 1;; s = e + 1) {
		e = strchr(s, '/');
		n = e != NULL ? (size_t)(e - s) : strlen(s);
		if (++nseg > SEGS_MAX)
			return "the pattern has more than " STR(SEGS_MAX)
			    " segments";
		if (is_dots(s, n))
			return "the pattern has a '.' or '..' segment, which "
			    "no path matches";
		if (s[0] == ':') {
			if (n == 1 || np == IDEM_MAX_PARAMS)
				return "a ':' segment needs a name, and at most "
				    STR(IDEM_MAX_PARAMS) " are allowed";
			for (i = 1; i < n; i++)
				if (!is_name_char(s[i]))
					return "a parameter's name is letters, "
					    "digits and '_'";
			for (i = 0; i < np; i++)
				if (len[i] == n - 1 &&
				    memcmp(names[i], s + 1, n - 1) == 0)
					return "a parameter's name is used twice";
			names[np] = s + 1;
			len[np++] = n - 1;
		}
		if (e == NULL)
			return NULL;
	}
}

const char *
idem_router_refusal(const struct idem_router *r, const char *method,
    const char *pattern, idem_handler_fn fn)
{
	size_t	i, len;

	if (r == NULL || method == NULL || pattern == NULL)
		return "no method or pattern";
	if (fn == NULL)
		return "no handler";
	len = strlen(method);
	if (len == 0 || len > METHOD_MAX ||
	    strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != len)
		return "the method must be 1 to " STR(METHOD_MAX)
		    " upper-case letters";
	/* The same method and pattern twice is a mistake: one is dead. */
	for (i = 0; i < r->nroutes; i++)
		if (strcmp(r->routes[i].method, method) == 0 &&
		    strcmp(r->routes[i].pattern, pattern) == 0)
			return "registered already";
	return pattern_refusal(pattern);
}

int
idem_router_add(struct idem_router *r, const char *method,
    const char *pattern, unsigned flags, idem_handler_fn fn, void *arg)
{
	struct idem_route	*routes, *rt;
	size_t			 i, len;
	char			*pat, *m;

	if (idem_router_refusal(r, method, pattern, fn) != NULL)
		return -1;
	len = strlen(pattern);
	if ((pat = malloc(2 * (len + 1))) == NULL)
		return -1;
	memcpy(pat, pattern, len + 1);
	memcpy(pat + len + 1, pattern, len + 1);
	for (i = len + 1; i < 2 * (len + 1); i++)
		if (pat[i] == '/')
			pat[i] = '\0';
	if ((m = strdup(method)) == NULL) {
		free(pat);
		return -1;
	}
	/* Routes are registered once at start-up: growing by one is fine. */
	routes = realloc(r->routes, (r->nroutes + 1) * sizeof(*routes));
	if (routes == NULL) {
		free(m);
		free(pat);
		return -1;
	}
	r->routes = routes;
	rt = &r->routes[r->nroutes++];
	memset(rt, 0, sizeof(*rt));
	rt->method = m;
	rt->pattern = pat;
	rt->flags = flags;
	rt->fn = fn;
	rt->arg = arg;
	return 0;
}

/*
 * Match path (after its leading '/') segment by segment against route rt;
 * vals gets the spans of its parameters, *np their number.
 */
static int
route_match(const struct idem_route *rt, const char *path, size_t *np,
    struct span *vals)
{
	const char	*p = rt->pattern + 1, *pe, *s = path, *se;
	size_t		 pn, sn, i;

	*np = 0;
	for (;;) {
		pe = strchr(p, '/');
		pn = pe != NULL ? (size_t)(pe - p) : strlen(p);
		se = strchr(s, '/');
		sn = se != NULL ? (size_t)(se - s) : strlen(s);
		if (p[0] == ':') {
			if (sn == 0 || is_dots(s, sn))
				return 0;
			for (i = 0; i < sn; i++)
				if (!is_param_char(s[i]))
					return 0;
			vals[*np].p = s;
			vals[(*np)++].len = sn;
		} else if (pn != sn || memcmp(p, s, sn) != 0)
			return 0;
		if (pe == NULL || se == NULL)
			return pe == NULL && se == NULL;
		p = pe + 1;
		s = se + 1;
	}
}

/* Append ", m" (or "m" first) if it fits whole and is not there yet. */
static void
allow_add(char *allow, size_t allowlen, const char *m)
{
	size_t	 used, mlen = strlen(m), i, n;
	char	*a;

	for (a = allow;;) {
		n = strcspn(a, ",");
		if (n == mlen && memcmp(a, m, n) == 0)
			return;
		if (a[n] == '\0')
			break;
		a += n + 2;
	}
	used = strlen(allow);
	n = used > 0 ? 2 : 0;
	if (used + n + mlen >= allowlen)
		return;
	for (i = 0; i < n; i++)
		allow[used + i] = i == 0 ? ',' : ' ';
	memcpy(allow + used + n, m, mlen + 1);
}

/*
 * Whether a route registered for rmethod serves a request's method: its
 * own, and HEAD on a GET route (the GET's status and headers; the body is
 * left out when the response is written).  An explicit HEAD route, listed
 * first, is matched before the GET one.
 */
static int
method_serves(const char *rmethod, const char *method)
{
	return strcmp(rmethod, method) == 0 || (strcmp(method, "HEAD") == 0 &&
	    strcmp(rmethod, "GET") == 0);
}

/* The matched route rt's parameters (np values in vals) into params;
 * -1 when out of memory (params freed). */
static int
take_params(const struct idem_route *rt, const struct span *vals,
    size_t np, struct idem_params *params)
{
	const char	*pe;
	size_t		 j, k, len;

	/* Names: the NUL-separated copy after the pattern. */
	len = strlen(rt->pattern);
	pe = rt->pattern + len + 1;
	for (j = 0, k = 0; j < len; j++)
		if (pe[j] == ':' && (j == 0 || pe[j - 1] == '\0'))
			params->name[k++] = pe + j + 1;
	for (j = 0; j < np; j++) {
		params->value[j] = strndup(vals[j].p, vals[j].len);
		if (params->value[j] == NULL) {
			idem_params_free(params);
			return -1;
		}
		params->n = j + 1;
	}
	return 0;
}

enum idem_match
idem_router_match(const struct idem_router *r, const char *method,
    const char *path, const struct idem_route **route,
    struct idem_params *params, char *allow, size_t allowlen)
{
	struct span	 vals[IDEM_MAX_PARAMS];
	const char	*s;
	size_t		 i, np, nseg;
	int		 path_known = 0;

	if (route != NULL)
		*route = NULL;
	if (params != NULL)
		memset(params, 0, sizeof(*params));
	if (allow != NULL && allowlen > 0)
		allow[0] = '\0';
	if (r == NULL || method == NULL || path == NULL || path[0] != '/')
		return IDEM_MATCH_NOT_FOUND;
	if (strnlen(path, IDEM_PATH_MAX + 1) > IDEM_PATH_MAX)
		return IDEM_MATCH_NOT_FOUND;
	for (nseg = 1, s = path + 1; (s = strchr(s, '/')) != NULL; s++)
		if (++nseg > SEGS_MAX)
			return IDEM_MATCH_NOT_FOUND;

	for (i = 0; i < r->nroutes; i++) {
		if (!route_match(&r->routes[i], path + 1, &np, vals))
			continue;
		if (!method_serves(r->routes[i].method, method)) {
			path_known = 1;
			if (allow != NULL && allowlen > 0)
				allow_add(allow, allowlen,
				    r->routes[i].method);
			/* A GET route answers HEAD too (RFC 9110 9.1). */
			if (allow != NULL && allowlen > 0 &&
			    strcmp(r->routes[i].method, "GET") == 0)
				allow_add(allow, allowlen, "HEAD");
			continue;
		}
		if (params != NULL &&
		    take_params(&r->routes[i], vals, np, params) == -1) {
			/* No way to say "out of memory": refuse rather than
			 * run the handler without its parameters. */
			if (allow != NULL && allowlen > 0)
				allow[0] = '\0';
			return IDEM_MATCH_NOT_FOUND;
		}
		if (allow != NULL && allowlen > 0)
			allow[0] = '\0';
		if (route != NULL)
			*route = &r->routes[i];
		return IDEM_MATCH_OK;
	}
	return path_known ? IDEM_MATCH_METHOD : IDEM_MATCH_NOT_FOUND;
}

void
idem_params_free(struct idem_params *p)
{
	size_t	 i;

	if (p == NULL)
		return;
	for (i = 0; i < IDEM_MAX_PARAMS; i++)
		free(p->value[i]);
	memset(p, 0, sizeof(*p));
}

void
idem_router_free(struct idem_router *r)
{
	struct idem_route	*rt;

	if (r == NULL)
		return;
	for (rt = r->routes; rt < r->routes + r->nroutes; rt++) {
		free(rt->method);
		free(rt->pattern);
	}
	free(r->routes);
	memset(r, 0, sizeof(*r));
}
