/*
 * config_route.c - route sections ([route "METHOD /path"]: ttl, lease,
 * deadline, phase_deadline, remember, fingerprint_exclude) and the
 * policy every route's limits must meet, with the getters that resolve
 * a route's limits against the defaults.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_private.h"

/* Is s "route \"METHOD /path\""?  Cuts it up in place for method, path. */
static int
parse_route_hdr(char *s, char **method, char **path)
{
	char	*p, *e;

	if (strncmp(s, "route \"", 7) != 0)
		return -1;
	p = s + 7;
	for (e = p; *e >= 'A' && *e <= 'Z'; e++)
		;
	if (e == p || e - p > CFG_METHOD_MAX || *e != ' ')
		return -1;
	*e++ = '\0';
	*method = p;
	if (*e != '/')
		return -1;
	for (p = e; *p != '\0' && *p != '"'; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
			return -1;
	if (p[0] != '"' || p[1] != '\0')
		return -1;
	*p = '\0';
	*path = e;
	return 0;
}


/* [route "METHOD /path"]: its record, appended to cfg->routes. */
int
route_section(struct parse *ps, char *s)
{
	struct idem_cfg_route	*r, **tail;
	char			*method, *path;

	if (!(strncmp(s, "route", 5) == 0 && (s[5] == '\0' || s[5] == ' ' ||
	    s[5] == '\t' || s[5] == '"')))
		return 1;
	if (parse_route_hdr(s, &method, &path) == -1)
		return perr(ps, ps->line, "bad route section, "
		    "expected [route \"METHOD /path\"]");
	for (tail = &ps->cfg->routes; *tail != NULL;
	    tail = &(*tail)->next)
		if (strcmp((*tail)->method, method) == 0 &&
		    strcmp((*tail)->path, path) == 0)
			return perr(ps, ps->line,
			    "duplicate section [route \"%s %.256s\"]",
			    method, path);
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return perr(ps, ps->line, "out of memory");
	if ((r->method = strdup(method)) == NULL ||
	    (r->path = strdup(path)) == NULL) {
		free(r->method);
		free(r);
		return perr(ps, ps->line, "out of memory");
	}
	r->line = ps->line;
	*tail = r;
	ps->route = r;
	ps->sect = S_ROUTE;
	return 0;
}

/* lock_timeout at line, in cfg->warnings for the caller to log. */
static void
warn_deprecated(struct idem_cfg *cfg, const char *name, unsigned long line)
{
	size_t	 n = strlen(cfg->warnings);

	snprintf(cfg->warnings + n, sizeof(cfg->warnings) - n, "%s:%lu: "
	    "lock_timeout is deprecated: it is the lease, write lease\n",
	    name != NULL ? name : "config", line);
}

/* The keys of a route section, in the order of its key_line[]. */
static const char *const route_keys[] = { "ttl", "lock_timeout",
    "deadline", "phase_deadline", "remember" };
#define NROUTE_KEYS	(sizeof(route_keys) / sizeof(route_keys[0]))

int
idem_cfg_key_nth(size_t i, const char **section, const char **key)
{
	/* The table's keys, then a route section's: those of route_keys[],
	 * lease (lock_timeout's slot) and fingerprint_exclude, which
	 * parse_route_key() reads apart. */
	static const char *const route_apart[] = { "lease",
	    "fingerprint_exclude" };

	if (i < cfg_nkeys) {
		idem_cfg_table_key(i, section, key);
		return 1;
	}
	*section = "route";
	if ((i -= cfg_nkeys) < NROUTE_KEYS) {
		*key = route_keys[i];
		return 1;
	}
	if ((i -= NROUTE_KEYS) < 2) {
		*key = route_apart[i];
		return 1;
	}
	/* An [inbox "NAME"] section's: inbox.c's, and tolerance
	 * (config_ini.c's parse_inbox_key). */
	if ((i -= 2) < 3) {
		*section = "inbox";
		*key = (const char *const[]){ "scheme", "secret",
		    "tolerance" }[i];
		return 1;
	}
	return 0;
}

/*
 * fingerprint_exclude = /a, /b/c: JSON Pointers, separated by commas and
 * blanks (a comma inside a member name is written as is: pointers have no
 * escape for it, so such a member cannot be excluded).
 */
static int
parse_route_exclude(struct parse *ps, const char *val)
{
	struct idem_cfg_route	*r = ps->route;
	const char		*p = val, *e;
	char			*ptr, **v;

	if (r->exclude_line != 0)
		return perr(ps, ps->line, "duplicate key fingerprint_exclude "
		    "(first on line %lu)", r->exclude_line);
	r->exclude_line = ps->line;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		for (e = p; *e != '\0' && *e != ',' && *e != ' ' &&
		    *e != '\t'; e++)
			;
		if ((ptr = strndup(p, (size_t)(e - p))) == NULL)
			return perr(ps, ps->line, "out of memory");
		if (!idem_jcs_pointer_ok(ptr)) {
			perr(ps, ps->line, "fingerprint_exclude: \"%.64s\" is not "
			    "a JSON Pointer to a member (\"/name\", \"/a/b\", "
			    "\"/list/0\"; ~0 for ~ and ~1 for /)", ptr);
			free(ptr);
			return -1;
		}
		if ((v = reallocarray(r->exclude, r->nexclude + 1,
		    sizeof(*v))) == NULL) {
			free(ptr);
			return perr(ps, ps->line, "out of memory");
		}
		r->exclude = v;
		r->exclude[r->nexclude++] = ptr;
		p = e;
	}
	if (r->nexclude == 0)
		return perr(ps, ps->line, "fingerprint_exclude names no JSON "
		    "Pointer");
	return 0;
}

int
parse_route_key(struct parse *ps, const char *key, const char *val)
{
	struct idem_cfg_route	*r = ps->route;
	long long		*dst[NROUTE_KEYS] = { &r->ttl_ms,
				    &r->lock_timeout_ms, &r->deadline_ms,
				    &r->phase_deadline_ms, &r->remember_ms };
	long long		 ms;
	size_t			 i;

	if (strcmp(key, "fingerprint_exclude") == 0)
		return parse_route_exclude(ps, val);
	for (i = 0; i < NROUTE_KEYS; i++)
		if (strcmp(key, route_keys[i]) == 0)
			break;
	/* lease, or lock_timeout, its deprecated alias: one slot. */
	if (strcmp(key, "lease") == 0)
		i = 1;
	if (i == NROUTE_KEYS)
		return perr(ps, ps->line, "unknown key %.64s in route section "
		    "(ttl, lease, deadline, phase_deadline, remember or "
		    "fingerprint_exclude)", key);
	if (i == 1 && r->key_line[1] != 0)
		return perr(ps, ps->line, "lease set twice (first on line %lu; "
		    "lock_timeout is a deprecated alias of lease)",
		    r->key_line[1]);
	if (i == 1 && strcmp(key, "lock_timeout") == 0)
		warn_deprecated(ps->cfg, ps->name, ps->line);
	if (r->key_line[i] != 0)
		return perr(ps, ps->line, "duplicate key %s (first on line "
		    "%lu)", route_keys[i], r->key_line[i]);
	if (idem_parse_duration(val, &ms) == -1)
		return perr(ps, ps->line, "%s must be a duration such as 250ms, "
		    "30s, 5m, 24h or 7d (at most 3650d)", route_keys[i]);
	/* 0 would read as "not set"; a window under a minute is shorter
	 * than the minute its trace is rounded up to (sql/010). */
	if (i == 4 && ms < MS_MINUTE)
		return perr(ps, ps->line, "remember (%lldms) must be at least "
		    "1m (leave it out to remember nothing)", ms);
	*dst[i] = ms;
	r->key_line[i] = ps->line;
	return 0;
}


/*
 * Can a route's lease lapse under a live request, or its record expire
 * before the request could have ended?  r NULL: the defaults.  0, or -1
 * with the error at the line that set the offending value.
 */
static int
check_route_limits(struct parse *ps, const struct idem_cfg_route *r,
    unsigned long lock_line, unsigned long req_line, unsigned long ttl_line)
{
	static const unsigned long	 unset[4];
	struct idem_route_limits	 l;
	char				 where[300] = "";
	/* Where each value was set: its route key, else [idempotency] or
	 * [server], else the route's header (0: a default). */
	const unsigned long		*rk = r ? r->key_line : unset;
	unsigned long			 rl = r ? r->line : 0, line;

	idem_cfg_route_limits(ps->cfg, r ? r->method : NULL, r ? r->path : NULL,
	    &l);
	if (r != NULL)
		snprintf(where, sizeof(where), " of [route \"%s %.256s\"]",
		    r->method, r->path);
	/* The heartbeat renews a lease every third of it: a shorter one
	 * would lapse on a single late round trip. */
	if (l.lock_timeout_ms < IDEM_LEASE_MIN_MS) {
		line = rk[1] ? rk[1] : lock_line ? lock_line : rl;
		return perr(ps, line, "lease (%lldms)%s must be at least %dms",
		    l.lock_timeout_ms, where, IDEM_LEASE_MIN_MS);
	}
	if (l.phase_deadline_ms > l.deadline_ms) {
		line = rk[3] ? rk[3] : rl;
		return perr(ps, line, "phase_deadline (%lldms)%s must not be "
		    "greater than its deadline (%lldms)", l.phase_deadline_ms,
		    where, l.deadline_ms);
	}
	if (l.ttl_ms < l.deadline_ms + l.lock_timeout_ms) {
		line = rk[0] ? rk[0] : ttl_line ? ttl_line : rk[2] ? rk[2] :
		    rk[1] ? rk[1] : r ? rl : lock_line ? lock_line : req_line;
		return perr(ps, line, "ttl (%lldms)%s must be at least its "
		    "deadline + lease (%lldms): the key could expire "
		    "while its request may still run", l.ttl_ms, where,
		    l.deadline_ms + l.lock_timeout_ms);
	}
	return 0;
}

enum idem_ttl_verdict
idem_ttl_verdict(long long ttl_ms)
{
	if (ttl_ms < IDEM_TTL_MIN_MS)
		return IDEM_TTL_REFUSE;
	if (ttl_ms < IDEM_TTL_FLOOR_MS)
		return IDEM_TTL_SHORT;
	if (ttl_ms > IDEM_TTL_CEIL_MS)
		return IDEM_TTL_LONG;
	return IDEM_TTL_OK;
}

const char *
idem_ttl_reason(enum idem_ttl_verdict v)
{
	switch (v) {
	case IDEM_TTL_REFUSE:
		return "below 1h: a late retry would execute a second time";
	case IDEM_TTL_SHORT:
		return "below 24h, the floor for payment-style operations";
	case IDEM_TTL_LONG:
		return "above 7d: rows grow for no protection";
	case IDEM_TTL_OK:
		break;
	}
	return NULL;
}

/* A ttl set in the file under 1 h is refused where it was set. */
static int
check_ttl_floor(struct parse *ps, long long ttl_ms, unsigned long line,
    const struct idem_cfg_route *r)
{
	if (line == 0 || idem_ttl_verdict(ttl_ms) != IDEM_TTL_REFUSE)
		return 0;
	if (r != NULL)
		return perr(ps, line, "ttl (%lldms) of [route \"%s %.256s\"] "
		    "is %s", ttl_ms, r->method, r->path,
		    idem_ttl_reason(IDEM_TTL_REFUSE));
	return perr(ps, line, "ttl (%lldms) is %s", ttl_ms,
	    idem_ttl_reason(IDEM_TTL_REFUSE));
}


/*
 * The lease no longer bounds the request (the heartbeat renews it
 * while its owner lives); lock_timeout is its deprecated name.
 */
int
check_routes(struct parse *ps)
{
	struct idem_cfg		*cfg = ps->cfg;
	struct idem_cfg_route	*r;
	unsigned long		 lock_line, req_line;

	lock_line = key_line(ps, "lease");
	req_line = key_line(ps, "request_timeout");
	if (lock_line != 0 && key_line(ps, "lock_timeout") != 0)
		return perr(ps, lock_line > key_line(ps, "lock_timeout") ?
		    lock_line : key_line(ps, "lock_timeout"), "lease and "
		    "lock_timeout both set (lock_timeout is a deprecated alias "
		    "of lease)");
	if (lock_line == 0 && (lock_line = key_line(ps, "lock_timeout")) != 0)
		warn_deprecated(cfg, ps->name, lock_line);
	if (check_route_limits(ps, NULL, lock_line, req_line,
	    key_line(ps, "ttl")) == -1)
		return -1;
	for (r = cfg->routes; r != NULL; r = r->next)
		if (check_route_limits(ps, r, lock_line, req_line,
		    key_line(ps, "ttl")) == -1)
			return -1;
	if (check_ttl_floor(ps, cfg->ttl_ms, key_line(ps, "ttl"), NULL) == -1)
		return -1;
	for (r = cfg->routes; r != NULL; r = r->next)
		if (check_ttl_floor(ps, r->ttl_ms, r->key_line[0], r) == -1)
			return -1;
	return 0;
}

void
idem_cfg_route_limits(const struct idem_cfg *cfg, const char *method,
    const char *pattern, struct idem_route_limits *out)
{
	const struct idem_cfg_route	*r = NULL;

	if (method != NULL && pattern != NULL)
		for (r = cfg->routes; r != NULL; r = r->next)
			if (strcmp(r->method, method) == 0 &&
			    strcmp(r->path, pattern) == 0)
				break;
	out->ttl_ms = r && r->ttl_ms > 0 ? r->ttl_ms : cfg->ttl_ms;
	out->lock_timeout_ms = r && r->lock_timeout_ms > 0 ?
	    r->lock_timeout_ms : cfg->lock_timeout_ms;
	out->deadline_ms = r && r->deadline_ms > 0 ? r->deadline_ms :
	    cfg->request_timeout_ms;
	out->phase_deadline_ms = r && r->phase_deadline_ms > 0 ?
	    r->phase_deadline_ms : out->deadline_ms;
	out->remember_ms = r ? r->remember_ms : 0;
}

const char *const *
idem_cfg_route_exclude(const struct idem_cfg *cfg, const char *method,
    const char *pattern, size_t *n)
{
	const struct idem_cfg_route	*r;

	for (r = cfg->routes; r != NULL; r = r->next)
		if (strcmp(r->method, method) == 0 &&
		    strcmp(r->path, pattern) == 0 && r->nexclude > 0) {
			*n = r->nexclude;
			return (const char *const *)r->exclude;
		}
	*n = 0;
	return NULL;
}

long long
idem_cfg_lease_min(const struct idem_cfg *cfg)
{
	const struct idem_cfg_route	*r;
	long long			 m = cfg->lock_timeout_ms;

	for (r = cfg->routes; r != NULL; r = r->next)
		if (r->lock_timeout_ms > 0 && r->lock_timeout_ms < m)
			m = r->lock_timeout_ms;
	return m;
}

long long
idem_cfg_route_ttl(const struct idem_cfg *cfg, const char *method,
    const char *pattern)
{
	struct idem_route_limits	l;

	idem_cfg_route_limits(cfg, method, pattern, &l);
	return l.ttl_ms;
}
