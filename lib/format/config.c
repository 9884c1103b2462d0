/*
 * config.c - the INI config file.  Everything doubtful is an error with
 * "name:line: what is wrong": a typo in a key must not silently leave a
 * default in force.
 *
 * Syntax, kept deliberately small:
 *  - a line is at most 4096 bytes (not counting "\n" or "\r\n"); NUL and
 *    other control bytes except TAB are refused;
 *  - blank lines and lines whose first non-blank byte is '#' or ';' are
 *    comments;
 *  - for every line, a '#' or ';' preceded by a blank (SP/TAB) starts an
 *    inline comment.  There is no quoting, so a value cannot contain
 *    " #" or " ;" (a conninfo password with one must come from PGPASSWORD
 *    or a .pgpass file instead);
 *  - "[section]", or "[route \"METHOD /path\"]" with exactly one space in
 *    each of the two places;
 *  - "key = value": the value is the rest of the line, trimmed, never
 *    empty; blanks inside it are kept.
 * A section may appear once (a route section once per METHOD /path) and a
 * key once per section.  Application sections and keys exist only once
 * idem_cfg_allow() has registered them.
 *
 * Every string in struct idem_cfg is malloc'd and owned by it, defaults
 * included, so whoever replaces one frees the old value first.  Parse into
 * a freshly initialised cfg; after an error it is partly filled and must
 * still be released with idem_cfg_free().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "peer.h"

#define CFG_LINE_MAX	4096
#define CFG_FILE_MAX	((size_t)1 << 20)
#define CFG_METHOD_MAX	32
#define MS_SECOND	1000LL
#define MS_MINUTE	(60 * MS_SECOND)
#define MS_HOUR		(60 * MS_MINUTE)
#define MS_DAY		(24 * MS_HOUR)
/* Anything longer is a typo; the bound also keeps the arithmetic safe. */
#define MS_MAX		(3650 * MS_DAY)
#define MIB		((size_t)1 << 20)

enum cfg_sect {
	S_NONE,
	S_SERVER,
	S_DATABASE,
	S_IDEM,
	S_METRICS,
	S_OPENAPI,
	S_WEBHOOKS,
	S_ROUTE,
	S_APP,
	S_IGNORE,	/* a section of another program (any_app_keys) */
	S_INBOX,	/* [inbox "NAME"] (inbox.c) */
};

enum cfg_type {
	T_UINT,		/* unsigned, range */
	T_LONG,		/* long, range */
	T_SIZE,		/* size_t, range */
	T_DUR,		/* long long milliseconds */
	T_STR,		/* char * */
	T_CHOICE,	/* char *, one of choices ("a|b|c") */
	T_ADDRS,	/* char *, comma-separated IP addresses */
	T_URIBASE,	/* char *, a URI (reference) ending in '/' */
	T_URL,		/* char *, an http(s) URL or a path starting with '/' */
	T_MODE,		/* unsigned, a socket file's octal mode */
	T_BOOL,		/* int, on/off (true/false, yes/no, 1/0) */
};

struct cfg_key {
	enum cfg_sect	 sect;
	const char	*name;
	enum cfg_type	 type;
	size_t		 off;
	long long	 min, max;
	const char	*choices;	/* T_CHOICE */
};

#define OFF(f)	offsetof(struct idem_cfg, f)

static const struct cfg_key cfg_keys[] = {
	{ S_SERVER, "threads", T_UINT, OFF(threads), 1, 256, NULL },
	{ S_SERVER, "max_body", T_SIZE, OFF(max_body), 1, 64 * (long long)MIB,
	    NULL },
	{ S_SERVER, "max_json_values", T_UINT, OFF(max_json_values), 1,
	    10000000, NULL },
	{ S_SERVER, "request_timeout", T_DUR, OFF(request_timeout_ms), 0, 0,
	    NULL },
	{ S_SERVER, "max_params", T_SIZE, OFF(max_params), 1024,
	    1 * (long long)MIB, NULL },
	{ S_SERVER, "read_timeout", T_DUR, OFF(read_timeout_ms), 0, 0, NULL },
	{ S_SERVER, "write_timeout", T_DUR, OFF(write_timeout_ms), 0, 0, NULL },
	{ S_SERVER, "max_buffered", T_SIZE, OFF(max_buffered), (long long)MIB,
	    65536 * (long long)MIB, NULL },
	{ S_SERVER, "listen", T_STR, OFF(listen), 0, 0, NULL },
	{ S_SERVER, "log_level", T_CHOICE, OFF(log_level), 0, 0,
	    "debug|info|warn|error" },
	{ S_SERVER, "problem_base", T_URIBASE, OFF(problem_base), 0, 0, NULL },
	{ S_DATABASE, "conninfo", T_STR, OFF(conninfo), 0, 0, NULL },
	{ S_DATABASE, "pool_size", T_UINT, OFF(pool_size), 1, 1024, NULL },
	{ S_DATABASE, "acquire_timeout", T_DUR, OFF(acquire_timeout_ms), 0, 0,
	    NULL },
	{ S_DATABASE, "prepared_statements", T_CHOICE,
	    OFF(prepared_statements), 0, 0, "on|off|auto" },
	{ S_IDEM, "ttl", T_DUR, OFF(ttl_ms), 0, 0, NULL },
	/* Below the web servers' FastCGI read timeouts (40 s and more). */
	{ S_IDEM, "max_wait", T_DUR, OFF(max_wait_ms), 0, 30000, NULL },
	{ S_IDEM, "max_waiters", T_UINT, OFF(max_waiters), 0,
	    IDEM_WAITERS_MAX, NULL },
	{ S_IDEM, "max_waiters_per_tenant", T_UINT,
	    OFF(max_waiters_per_tenant), 0, IDEM_WAITERS_MAX, NULL },
	{ S_IDEM, "lock_timeout", T_DUR, OFF(lock_timeout_ms), 0, 0, NULL },
	/* The lease; lock_timeout above is its deprecated alias. */
	{ S_IDEM, "lease", T_DUR, OFF(lock_timeout_ms), 0, 0, NULL },
	{ S_IDEM, "evict_interval", T_DUR, OFF(evict_interval_ms), 0, 0,
	    NULL },
	{ S_IDEM, "evict_batch", T_LONG, OFF(evict_batch), 1, 1000000, NULL },
	{ S_IDEM, "completer_max_attempts", T_LONG,
	    OFF(completer_max_attempts), 0, 1000000, NULL },
	{ S_IDEM, "completer_max_age", T_DUR, OFF(completer_max_age_ms), 0, 0,
	    NULL },
	{ S_IDEM, "completer_backoff", T_DUR, OFF(completer_backoff_ms), 0, 0,
	    NULL },
	{ S_IDEM, "completer_backoff_max", T_DUR,
	    OFF(completer_backoff_max_ms), 0, 0, NULL },
	{ S_METRICS, "allow", T_ADDRS, OFF(metrics_allow), 0, 0, NULL },
	{ S_METRICS, "listen", T_STR, OFF(metrics_listen), 0, 0, NULL },
	{ S_SERVER, "allow", T_ADDRS, OFF(allow), 0, 0, NULL },
	{ S_SERVER, "socket_mode", T_MODE, OFF(socket_mode), 0, 0, NULL },
	{ S_SERVER, "socket_group", T_STR, OFF(socket_group), 0, 0, NULL },
	{ S_METRICS, "socket_mode", T_MODE, OFF(metrics_socket_mode), 0, 0,
	    NULL },
	{ S_METRICS, "socket_group", T_STR, OFF(metrics_socket_group), 0, 0,
	    NULL },
	{ S_METRICS, "allow_uid", T_STR, OFF(metrics_allow_uid), 0, 0, NULL },
	{ S_OPENAPI, "server_url", T_URL, OFF(openapi_server_url), 0, 0, NULL },
	{ S_OPENAPI, "license", T_STR, OFF(openapi_license), 0, 0, NULL },
	{ S_WEBHOOKS, "dispatcher", T_BOOL, OFF(wh_dispatcher), 0, 0, NULL },
	{ S_WEBHOOKS, "allow_private", T_BOOL, OFF(wh_allow_private), 0, 0,
	    NULL },
	{ S_WEBHOOKS, "batch", T_LONG, OFF(wh_batch), 1, 1000, NULL },
	{ S_WEBHOOKS, "interval", T_DUR, OFF(wh_interval_ms), 0, 0, NULL },
	/* An endpoint that needs more than a minute is down. */
	{ S_WEBHOOKS, "timeout", T_DUR, OFF(wh_timeout_ms), 0, 60000, NULL },
	{ S_WEBHOOKS, "max_response", T_SIZE, OFF(wh_max_response), 1,
	    16 * (long long)MIB, NULL },
	{ S_WEBHOOKS, "max_attempts", T_LONG, OFF(wh_max_attempts), 0,
	    1000000, NULL },
	{ S_WEBHOOKS, "max_age", T_DUR, OFF(wh_max_age_ms), 0, 0, NULL },
	{ S_WEBHOOKS, "backoff", T_DUR, OFF(wh_backoff_ms), 0, 0, NULL },
	{ S_WEBHOOKS, "backoff_max", T_DUR, OFF(wh_backoff_max_ms), 0, 0,
	    NULL },
	{ S_WEBHOOKS, "retention", T_DUR, OFF(wh_retention_ms), 0, 0, NULL },
	{ S_WEBHOOKS, "ordered", T_BOOL, OFF(wh_ordered), 0, 0, NULL },
};
#define NKEYS	(sizeof(cfg_keys) / sizeof(cfg_keys[0]))

static const char *const sect_names[] = {
	[S_SERVER] = "server",
	[S_DATABASE] = "database",
	[S_IDEM] = "idempotency",
	[S_METRICS] = "metrics",
	[S_OPENAPI] = "openapi",
	[S_WEBHOOKS] = "webhooks",
	[S_ROUTE] = "route",
};

/* Per-application-key parse state, parallel to the cfg->app list. */
struct app_state {
	unsigned long	 line;		/* where it was set, 0: not yet */
	int		 sect_seen;	/* its section header was read */
};

struct parse {
	struct idem_cfg		*cfg;
	const char		*name;
	char			*err;
	size_t			 errlen;
	unsigned long		 line;
	enum cfg_sect		 sect;
	const char		*app_sect;	/* S_APP: the section name */
	struct idem_cfg_route	*route;		/* S_ROUTE: its record */
	struct idem_cfg_inbox	*inbox;		/* S_INBOX: its record */
	unsigned long		 key_line[NKEYS];
	int			 sect_seen[S_ROUTE];
	struct app_state	*app;
	size_t			 napp;
};

static int	 perr(struct parse *, unsigned long, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static int	 parse_int(const char *, long long, long long, long long *);


/* Report "name:line: message" and return -1. */
static int
perr(struct parse *ps, unsigned long line, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	if (ps->err == NULL || ps->errlen == 0)
		return -1;
	n = snprintf(ps->err, ps->errlen, "%s:%lu: ",
	    ps->name != NULL ? ps->name : "config", line);
	if (n < 0 || (size_t)n >= ps->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Replace *field with a copy of value. */
static int
set_str(char **field, const char *value)
{
	char	*s;

	if ((s = strdup(value)) == NULL)
		return -1;
	free(*field);
	*field = s;
	return 0;
}

void
idem_cfg_init(struct idem_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->threads = 8;
	cfg->max_body = MIB;
	cfg->max_json_values = IDEM_JSON_MAX_VALUES;
	cfg->request_timeout_ms = 30 * MS_SECOND;
	cfg->max_params = 64 * 1024;
	cfg->read_timeout_ms = 10 * MS_SECOND;
	cfg->write_timeout_ms = 10 * MS_SECOND;
	cfg->max_buffered = 32 * MIB;
	/* NULL here on out of memory; idem_cfg_parse() then reports it. */
	cfg->log_level = strdup("info");
	cfg->prepared_statements = strdup("auto");
	/* Relative: the app serves these documents itself (problem.c). */
	cfg->problem_base = strdup("/problems/");
	cfg->pool_size = 0;
	cfg->acquire_timeout_ms = 2 * MS_SECOND;
	cfg->ttl_ms = 24 * MS_HOUR;
	cfg->max_wait_ms = 10 * MS_SECOND;
	cfg->max_waiters = 4;
	/* One tenant's duplicates never take every waiter slot. */
	cfg->max_waiters_per_tenant = 2;
	cfg->lock_timeout_ms = 10 * MS_SECOND;	/* the lease */
	cfg->evict_interval_ms = 5 * MS_MINUTE;
	cfg->evict_batch = 10000;
	cfg->completer_max_attempts = 10;
	cfg->completer_max_age_ms = 24 * MS_HOUR;
	cfg->completer_backoff_ms = 10 * MS_SECOND;
	cfg->completer_backoff_max_ms = 10 * MS_MINUTE;
	cfg->metrics_allow = strdup("127.0.0.1");
	cfg->wh_dispatcher = 1;
	cfg->wh_batch = 10;
	cfg->wh_interval_ms = MS_SECOND;
	cfg->wh_timeout_ms = 10 * MS_SECOND;
	cfg->wh_max_response = 64 * 1024;
	cfg->wh_max_attempts = 100;
	cfg->wh_max_age_ms = 3 * MS_DAY;
	cfg->wh_backoff_ms = 5 * MS_SECOND;
	cfg->wh_backoff_max_ms = MS_HOUR;
	cfg->wh_retention_ms = 7 * MS_DAY;
	/* Owner and group: the web server's user joins the group. */
	cfg->socket_mode = 0660;
	cfg->metrics_socket_mode = 0660;
}

static enum cfg_sect
builtin_sect(const char *name)
{
	int	 s;

	for (s = S_SERVER; s <= S_ROUTE; s++)
		if (strcmp(name, sect_names[s]) == 0)
			return (enum cfg_sect)s;
	return S_NONE;
}

int
idem_cfg_allow(struct idem_cfg *cfg, const char *section, const char *key)
{
	return idem_cfg_allow_typed(cfg, section, key, IDEM_CONFIG_STRING);
}

int
idem_cfg_allow_typed(struct idem_cfg *cfg, const char *section,
    const char *key, enum idem_config_type type)
{
	struct idem_cfg_kv	*kv, **tail;

	/* Built-in sections are never application sections. */
	if (cfg == NULL || section == NULL || key == NULL ||
	    *section == '\0' || *key == '\0' ||
	    builtin_sect(section) != S_NONE || type < IDEM_CONFIG_STRING ||
	    type > IDEM_CONFIG_BOOL)
		return -1;
	for (tail = &cfg->app; *tail != NULL; tail = &(*tail)->next)
		if (strcmp((*tail)->section, section) == 0 &&
		    strcmp((*tail)->key, key) == 0) {
			(*tail)->type = type;
			return 0;
		}
	if ((kv = calloc(1, sizeof(*kv))) == NULL)
		return -1;
	if ((kv->section = strdup(section)) == NULL ||
	    (kv->key = strdup(key)) == NULL) {
		free(kv->section);
		free(kv);
		return -1;
	}
	kv->type = type;
	*tail = kv;
	return 0;
}

int
idem_cfg_value_parse(enum idem_config_type type, const char *text,
    union idem_cfg_value *out, const char **why)
{
	static const char *const yes[] = { "on", "true", "yes", "1" };
	static const char *const no[] = { "off", "false", "no", "0" };
	size_t	i;

	*why = NULL;
	switch (type) {
	case IDEM_CONFIG_STRING:
		return 0;
	case IDEM_CONFIG_INT:
		if (parse_int(text, 0, LLONG_MAX, &out->i) == 0)
			return 0;
		*why = "a whole number (0 or more)";
		return -1;
	case IDEM_CONFIG_DURATION:
		if (idem_parse_duration(text, &out->i) == 0)
			return 0;
		*why = "a duration (a number with ms, s, m, h or d; none: "
		    "seconds)";
		return -1;
	case IDEM_CONFIG_SIZE:
		if (idem_parse_size(text, &out->size) == 0)
			return 0;
		*why = "a size (a number with K, M or G; none: bytes)";
		return -1;
	case IDEM_CONFIG_BOOL:
		for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
			if (strcmp(text, yes[i]) == 0) {
				out->b = 1;
				return 0;
			}
			if (strcmp(text, no[i]) == 0) {
				out->b = 0;
				return 0;
			}
		}
		*why = "on or off (true/false, yes/no, 1/0)";
		return -1;
	}
	*why = "a known type";
	return -1;
}

int
idem_parse_duration(const char *s, long long *ms)
{
	long long	 n = 0, mult;
	int		 d;

	if (s == NULL || ms == NULL || !is_digit(*s))
		return -1;
	for (; is_digit(*s); s++) {
		d = *s - '0';
		/* Stop at MS_MAX already: no unit makes a value smaller. */
		if (n > (MS_MAX - d) / 10)
			return -1;
		n = n * 10 + d;
	}
	if (*s == '\0' || strcmp(s, "s") == 0)
		mult = MS_SECOND;
	else if (strcmp(s, "ms") == 0)
		mult = 1;
	else if (strcmp(s, "m") == 0)
		mult = MS_MINUTE;
	else if (strcmp(s, "h") == 0)
		mult = MS_HOUR;
	else if (strcmp(s, "d") == 0)
		mult = MS_DAY;
	else
		return -1;
	if (n == 0 || n > MS_MAX / mult)
		return -1;
	*ms = n * mult;
	return 0;
}

int
idem_parse_size(const char *s, size_t *bytes)
{
	static const struct {
		const char	*unit;
		unsigned	 shift;
	} units[] = {
		{ "", 0 }, { "B", 0 },
		{ "K", 10 }, { "KB", 10 }, { "KiB", 10 },
		{ "M", 20 }, { "MB", 20 }, { "MiB", 20 },
		{ "G", 30 }, { "GB", 30 }, { "GiB", 30 },
	};
	size_t		 n = 0, i, mult;
	unsigned	 d;

	if (s == NULL || bytes == NULL || !is_digit(*s))
		return -1;
	for (; is_digit(*s); s++) {
		d = (unsigned)(*s - '0');
		if (n > (SIZE_MAX - d) / 10)
			return -1;
		n = n * 10 + d;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(s, units[i].unit) == 0)
			break;
	if (i == sizeof(units) / sizeof(units[0]))
		return -1;
	mult = (size_t)1 << units[i].shift;
	if (n == 0 || n > SIZE_MAX / mult)
		return -1;
	*bytes = n * mult;
	return 0;
}

/* Strict decimal in [min, max]: no sign, no blanks, no leading '+'. */
static int
parse_int(const char *s, long long min, long long max, long long *out)
{
	long long	 n = 0;
	int		 d;

	if (!is_digit(*s))
		return -1;
	for (; is_digit(*s); s++) {
		d = *s - '0';
		if (n > (LLONG_MAX - d) / 10)
			return -1;
		n = n * 10 + d;
	}
	if (*s != '\0' || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

/*
 * "a, b, c" of IPv4/IPv6 addresses; each is checked, the raw text kept.
 * Only SP may surround them: the request-time matcher splits on SP and ','.
 */
static int
check_addrs(const char *s)
{
	unsigned char	 bin[sizeof(struct in6_addr)];
	char		 a[INET6_ADDRSTRLEN + 1];
	const char	*e;
	size_t		 n;

	for (;;) {
		while (*s == ' ')
			s++;
		for (e = s; *e != '\0' && *e != ',' && *e != ' '; e++)
			;
		n = (size_t)(e - s);
		if (n == 0 || n >= sizeof(a))
			return -1;
		memcpy(a, s, n);
		a[n] = '\0';
		if (inet_pton(AF_INET, a, bin) != 1 &&
		    inet_pton(AF_INET6, a, bin) != 1)
			return -1;
		while (*e == ' ')
			e++;
		if (*e == '\0')
			return 0;
		if (*e != ',')
			return -1;
		s = e + 1;
	}
}

/* [server] problem_base: it goes into JSON strings and between the <>
 * of a Link header. */
static int
uri_base_ok(const char *s)
{
	size_t	n = strlen(s), i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f ||
		    strchr("\"<>\\`{}|^", s[i]) != NULL)
			return 0;
	return n >= 1 && s[n - 1] == '/' &&
	    (s[0] == '/' || strstr(s, "://") != NULL ||
	    strncmp(s, "urn:", 4) == 0 || strncmp(s, "tag:", 4) == 0);
}

/* [openapi] server_url: a URL the document's clients resolve paths on. */
static int
url_ok(const char *s)
{
	size_t	n = strlen(s), i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f ||
		    strchr("\"<>\\`{}|^", s[i]) != NULL)
			return 0;
	return s[0] == '/' || (strncmp(s, "http://", 7) == 0 && n > 7) ||
	    (strncmp(s, "https://", 8) == 0 && n > 8);
}

/* Is v one of the '|'-separated words of choices? */
static int
is_choice(const char *choices, const char *v)
{
	const char	*p = choices, *e;
	size_t		 n = strlen(v);

	for (;;) {
		e = strchr(p, '|');
		if ((size_t)((e ? e : p + strlen(p)) - p) == n &&
		    strncmp(p, v, n) == 0)
			return 1;
		if (e == NULL)
			return 0;
		p = e + 1;
	}
}

/* "name must be a, b or c" */
static int
choice_err(struct parse *ps, const struct cfg_key *k)
{
	char		 list[128];
	const char	*last = strrchr(k->choices, '|');
	size_t		 i, o = 0;

	for (i = 0; k->choices[i] != '\0' && o + 5 < sizeof(list); i++) {
		if (k->choices + i == last) {
			memcpy(list + o, " or ", 4);
			o += 4;
		} else if (k->choices[i] == '|') {
			memcpy(list + o, ", ", 2);
			o += 2;
		} else
			list[o++] = k->choices[i];
	}
	list[o] = '\0';
	return perr(ps, ps->line, "%s must be %s", k->name, list);
}

static int
set_builtin(struct parse *ps, const struct cfg_key *k, const char *v)
{
	char		*base = (char *)ps->cfg + k->off;
	long long	 n, ms;
	size_t		 sz;

	switch (k->type) {
	case T_UINT:
	case T_LONG:
		if (parse_int(v, k->min, k->max, &n) == -1)
			return perr(ps, ps->line,
			    "%s must be an integer from %lld to %lld",
			    k->name, k->min, k->max);
		if (k->type == T_UINT)
			*(unsigned *)(void *)base = (unsigned)n;
		else
			*(long *)(void *)base = (long)n;
		return 0;
	case T_MODE:
		if (idem_peer_parse_mode(v, (unsigned *)(void *)base) == -1)
			return perr(ps, ps->line, "%s must be an octal file "
			    "mode such as 0660, at most 0777", k->name);
		return 0;
	case T_SIZE:
		if (idem_parse_size(v, &sz) == -1 ||
		    sz < (size_t)k->min || sz > (size_t)k->max)
			return perr(ps, ps->line,
			    "%s must be a size such as 512KiB or 1MiB, "
			    "at most %lldMiB", k->name,
			    k->max / (long long)MIB);
		*(size_t *)(void *)base = sz;
		return 0;
	case T_DUR:
		if (idem_parse_duration(v, &ms) == -1)
			return perr(ps, ps->line,
			    "%s must be a duration such as 250ms, 30s, 5m, "
			    "24h or 7d (at most 3650d)", k->name);
		if (k->max > 0 && ms > k->max)
			return perr(ps, ps->line, "%s must be at most %llds",
			    k->name, k->max / 1000);
		*(long long *)(void *)base = ms;
		return 0;
	case T_BOOL: {
		union idem_cfg_value	 b;
		const char		*why;

		if (idem_cfg_value_parse(IDEM_CONFIG_BOOL, v, &b, &why) == -1)
			return perr(ps, ps->line, "%s must be %s", k->name, why);
		*(int *)(void *)base = b.b;
		return 0;
	}
	case T_CHOICE:
		if (!is_choice(k->choices, v))
			return choice_err(ps, k);
		break;
	case T_ADDRS:
		if (check_addrs(v) == -1)
			return perr(ps, ps->line, "%s must be a comma-separated "
			    "list of IPv4/IPv6 addresses", k->name);
		break;
	case T_URIBASE:
		if (!uri_base_ok(v))
			return perr(ps, ps->line, "%s must be an absolute URI or "
			    "a path starting with '/', ending in '/', without "
			    "blanks, quotes, '<' or '>'", k->name);
		break;
	case T_URL:
		if (!url_ok(v))
			return perr(ps, ps->line, "%s must be an http:// or "
			    "https:// URL or a path starting with '/', without "
			    "blanks, quotes, '<' or '>'", k->name);
		break;
	case T_STR:
		break;
	}
	if (set_str((char **)(void *)base, v) == -1)
		return perr(ps, ps->line, "out of memory");
	return 0;
}

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

static int
parse_section(struct parse *ps, char *s, size_t len)
{
	struct idem_cfg_route	*r, **tail;
	struct idem_cfg_kv	*kv;
	enum cfg_sect		 sect;
	char			*method, *path;
	size_t			 i;
	int			 found;
	char			 why[256];

	if (s[len - 1] != ']')
		return perr(ps, ps->line, strchr(s, ']') != NULL ?
		    "text after section header" :
		    "unterminated section header");
	s[len - 1] = '\0';
	s++;
	if (*s == '\0')
		return perr(ps, ps->line, "empty section name");

	ps->route = NULL;
	ps->app_sect = NULL;
	switch (idem_inbox_section(&ps->cfg->inboxes, s, ps->line, &ps->inbox,
	    why, sizeof(why))) {
	case IDEM_INBOX_SECT_OK:
		ps->sect = S_INBOX;
		return 0;
	case IDEM_INBOX_SECT_ERROR:
		return perr(ps, ps->line, "%s", why);
	case IDEM_INBOX_SECT_OTHER:
		break;
	}
	if (strncmp(s, "route", 5) == 0 && (s[5] == '\0' || s[5] == ' ' ||
	    s[5] == '\t' || s[5] == '"')) {
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

	if ((sect = builtin_sect(s)) != S_NONE) {
		if (ps->sect_seen[sect])
			return perr(ps, ps->line, "duplicate section [%s]", s);
		ps->sect_seen[sect] = 1;
		ps->sect = sect;
		return 0;
	}

	found = 0;
	for (kv = ps->cfg->app, i = 0; kv != NULL; kv = kv->next, i++) {
		if (strcmp(kv->section, s) != 0)
			continue;
		if (ps->app[i].sect_seen)
			return perr(ps, ps->line, "duplicate section [%s]", s);
		ps->app[i].sect_seen = 1;
		ps->app_sect = kv->section;
		found = 1;
	}
	if (!found && ps->cfg->any_app_keys) {
		/* Another program's section (idemctl reads the app's file). */
		ps->sect = S_IGNORE;
		return 0;
	}
	if (!found)
		return perr(ps, ps->line, "unknown section [%.64s]", s);
	ps->sect = S_APP;
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

static int
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

/* [inbox "NAME"]: tolerance here (a duration, 1s to 1h), the rest in
 * inbox.c. */
static int
parse_inbox_key(struct parse *ps, const char *key, const char *val)
{
	struct idem_cfg_inbox	*ib = ps->inbox;
	char			 why[256];

	if (strcmp(key, "tolerance") != 0)
		return idem_inbox_key(ib, key, val, ps->line, why,
		    sizeof(why)) == 0 ? 0 : perr(ps, ps->line, "%s", why);
	if (ib->tolerance_line != 0)
		return perr(ps, ps->line, "duplicate key tolerance (first on "
		    "line %lu)", ib->tolerance_line);
	if (idem_parse_duration(val, &ib->tolerance_ms) == -1 ||
	    ib->tolerance_ms < MS_SECOND || ib->tolerance_ms > MS_HOUR)
		return perr(ps, ps->line, "tolerance must be a duration from "
		    "1s to 1h, such as 5m");
	ib->tolerance_line = ps->line;
	return 0;
}

static int
parse_keyval(struct parse *ps, char *s)
{
	struct idem_cfg_kv	*kv;
	union idem_cfg_value	 typed;
	const char		*why;
	char			*eq, *key, *val, *e;
	size_t			 i;

	if ((eq = strchr(s, '=')) == NULL)
		return perr(ps, ps->line, "expected key = value");
	*eq = '\0';
	key = s;
	for (e = eq; e > key && is_blank(e[-1]); e--)
		;
	*e = '\0';
	for (val = eq + 1; is_blank(*val); val++)
		;
	if (*key == '\0')
		return perr(ps, ps->line, "missing key before '='");
	if (*val == '\0')
		return perr(ps, ps->line, "empty value for %.64s", key);

	switch (ps->sect) {
	case S_NONE:
		return perr(ps, ps->line, "%.64s outside of any section", key);
	case S_IGNORE:
		return 0;
	case S_ROUTE:
		return parse_route_key(ps, key, val);
	case S_INBOX:
		return parse_inbox_key(ps, key, val);
	case S_APP:
		for (kv = ps->cfg->app, i = 0; kv != NULL; kv = kv->next, i++)
			if (strcmp(kv->section, ps->app_sect) == 0 &&
			    strcmp(kv->key, key) == 0)
				break;
		if (kv == NULL)
			return perr(ps, ps->line, "unknown key %.64s in [%.64s]",
			    key, ps->app_sect);
		if (ps->app[i].line != 0)
			return perr(ps, ps->line, "duplicate key %.64s "
			    "(first on line %lu)", key, ps->app[i].line);
		if (idem_cfg_value_parse(kv->type, val, &typed, &why) == -1)
			return perr(ps, ps->line, "%.64s: expected %s, got "
			    "\"%.64s\"", key, why, val);
		if (set_str(&kv->value, val) == -1)
			return perr(ps, ps->line, "out of memory");
		ps->app[i].line = ps->line;
		return 0;
	default:
		break;
	}

	for (i = 0; i < NKEYS; i++)
		if (cfg_keys[i].sect == ps->sect &&
		    strcmp(cfg_keys[i].name, key) == 0)
			break;
	if (i == NKEYS)
		return perr(ps, ps->line, "unknown key %.64s in [%s]", key,
		    sect_names[ps->sect]);
	if (ps->key_line[i] != 0)
		return perr(ps, ps->line, "duplicate key %s (first on line %lu)",
		    key, ps->key_line[i]);
	if (set_builtin(ps, &cfg_keys[i], val) == -1)
		return -1;
	ps->key_line[i] = ps->line;
	return 0;
}

/* One line, len bytes without its terminator. */
static int
parse_line(struct parse *ps, const char *text, size_t len)
{
	char	 buf[CFG_LINE_MAX + 1], *s, *e;
	size_t	 i;

	if (len > CFG_LINE_MAX)
		return perr(ps, ps->line, "line longer than %d bytes",
		    CFG_LINE_MAX);
	for (i = 0; i < len; i++) {
		if (text[i] == '\0')
			return perr(ps, ps->line, "NUL byte");
		if (((unsigned char)text[i] < 0x20 && text[i] != '\t') ||
		    text[i] == 0x7f)
			return perr(ps, ps->line, "control character");
	}
	memcpy(buf, text, len);
	buf[len] = '\0';

	for (s = buf; is_blank(*s); s++)
		;
	if (*s == '\0' || *s == '#' || *s == ';')
		return 0;
	for (e = s + 1; *e != '\0'; e++)
		if ((*e == '#' || *e == ';') && is_blank(e[-1])) {
			*e = '\0';
			break;
		}
	for (e = s + strlen(s); e > s && is_blank(e[-1]); e--)
		;
	*e = '\0';

	if (*s == '[')
		return parse_section(ps, s, (size_t)(e - s));
	return parse_keyval(ps, s);
}

static unsigned long
key_line(const struct parse *ps, const char *name)
{
	size_t	 i;

	for (i = 0; i < NKEYS; i++)
		if (strcmp(cfg_keys[i].name, name) == 0)
			return ps->key_line[i];
	return 0;
}

/* [webhooks]: what no single key's range can say (a duration is never
 * 0: the parser refuses it). */
static int
check_webhooks(struct parse *ps)
{
	const struct idem_cfg	*c = ps->cfg;
	unsigned long		 l;

	if (c->wh_backoff_max_ms < c->wh_backoff_ms) {
		l = key_line(ps, "backoff_max");
		return perr(ps, l != 0 ? l : key_line(ps, "backoff"),
		    "[webhooks] backoff_max must be at least backoff");
	}
	return 0;
}

int
idem_cfg_parse(struct idem_cfg *cfg, const char *name, const char *text,
    size_t len, char *err, size_t errlen)
{
	struct parse		 ps;
	struct idem_cfg_kv	*kv;
	struct idem_cfg_route	*r;
	const char		*nl;
	size_t			 off, n;
	unsigned long		 lock_line, req_line;
	char			 ebuf[256];
	int			 rc = -1;

	idem_errf(err, errlen, "%s", "");
	memset(&ps, 0, sizeof(ps));
	ps.cfg = cfg;
	ps.name = name;
	ps.err = err;
	ps.errlen = errlen;
	if (cfg == NULL || (text == NULL && len > 0))
		return perr(&ps, 0, "invalid arguments");
	if (cfg->log_level == NULL || cfg->prepared_statements == NULL ||
	    cfg->metrics_allow == NULL ||
	    (name != NULL && set_str(&cfg->file, name) == -1))
		return perr(&ps, 0, "out of memory");
	/* An editor's UTF-8 byte order mark is not part of the first line. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	for (kv = cfg->app; kv != NULL; kv = kv->next)
		ps.napp++;
	if (ps.napp > 0 &&
	    (ps.app = calloc(ps.napp, sizeof(*ps.app))) == NULL)
		return perr(&ps, 0, "out of memory");

	for (off = 0; off < len; off += n + 1) {
		ps.line++;
		nl = memchr(text + off, '\n', len - off);
		n = nl != NULL ? (size_t)(nl - (text + off)) : len - off;
		if (parse_line(&ps, text + off,
		    n > 0 && text[off + n - 1] == '\r' ? n - 1 : n) == -1)
			goto out;
	}

	/* No request could ever arrive whole, no answer leave. */
	if (cfg->read_timeout_ms <= 0 || cfg->write_timeout_ms <= 0) {
		perr(&ps, key_line(&ps, cfg->read_timeout_ms <= 0 ?
		    "read_timeout" : "write_timeout"), "%s must be more than 0",
		    cfg->read_timeout_ms <= 0 ? "read_timeout" :
		    "write_timeout");
		goto out;
	}
	/* A large body may take half of it (budget.h): one of max_body
	 * must fit.  Unset, it grows with max_body. */
	if (cfg->max_buffered / 2 < cfg->max_body &&
	    key_line(&ps, "max_buffered") == 0)
		cfg->max_buffered = 2 * cfg->max_body;
	if (cfg->max_buffered / 2 < cfg->max_body) {
		perr(&ps, key_line(&ps, "max_buffered"), "max_buffered (%zu "
		    "bytes) must be at least twice max_body (%zu bytes)",
		    cfg->max_buffered, cfg->max_body);
		goto out;
	}
	/*
	 * The lease no longer bounds the request (the heartbeat renews it
	 * while its owner lives); lock_timeout is its deprecated name.
	 */
	lock_line = key_line(&ps, "lease");
	req_line = key_line(&ps, "request_timeout");
	if (lock_line != 0 && key_line(&ps, "lock_timeout") != 0) {
		perr(&ps, lock_line > key_line(&ps, "lock_timeout") ? lock_line :
		    key_line(&ps, "lock_timeout"), "lease and lock_timeout "
		    "both set (lock_timeout is a deprecated alias of lease)");
		goto out;
	}
	if (lock_line == 0 && (lock_line = key_line(&ps, "lock_timeout")) != 0)
		warn_deprecated(cfg, name, lock_line);
	if (check_route_limits(&ps, NULL, lock_line, req_line,
	    key_line(&ps, "ttl")) == -1)
		goto out;
	for (r = cfg->routes; r != NULL; r = r->next)
		if (check_route_limits(&ps, r, lock_line, req_line,
		    key_line(&ps, "ttl")) == -1)
			goto out;
	if (check_ttl_floor(&ps, cfg->ttl_ms, key_line(&ps, "ttl"), NULL) == -1)
		goto out;
	for (r = cfg->routes; r != NULL; r = r->next)
		if (check_ttl_floor(&ps, r->ttl_ms, r->key_line[0], r) == -1)
			goto out;
	if (check_webhooks(&ps) == -1)
		goto out;
	if (idem_inbox_finish(cfg->inboxes, &lock_line, ebuf,
	    sizeof(ebuf)) == -1) {
		perr(&ps, lock_line, "%s", ebuf);
		goto out;
	}
	rc = 0;
out:
	free(ps.app);
	return rc;
}

int
idem_cfg_load(struct idem_cfg *cfg, const char *path, char *err,
    size_t errlen)
{
	struct idem_buf	 b = { NULL, 0, 0 };
	char		 chunk[65536], ebuf[128];
	ssize_t		 n;
	int		 fd, rc;

	idem_errf(err, errlen, "%s", "");
	if (path == NULL) {
		idem_errf(err, errlen, "no config file given");
		return -1;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		idem_errf(err, errlen, "%s: cannot open: %s", path,
		    strerror_r(errno, ebuf, sizeof(ebuf)));
		return -1;
	}
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			idem_errf(err, errlen, "%s: cannot read: %s", path,
			    strerror_r(errno, ebuf, sizeof(ebuf)));
			goto fail;
		}
		if (n == 0)
			break;
		if ((size_t)n > CFG_FILE_MAX - b.len) {
			idem_errf(err, errlen, "%s: larger than 1 MiB", path);
			goto fail;
		}
		if (idem_buf_add(&b, chunk, (size_t)n) == -1) {
			idem_errf(err, errlen, "%s: out of memory", path);
			goto fail;
		}
	}
	close(fd);
	rc = idem_cfg_parse(cfg, path, b.p != NULL ? b.p : "", b.len, err,
	    errlen);
	idem_buf_free(&b);
	return rc;
fail:
	close(fd);
	idem_buf_free(&b);
	return -1;
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

const char *
idem_cfg_app_get(const struct idem_cfg *cfg, const char *section,
    const char *key)
{
	const struct idem_cfg_kv	*kv;

	if (cfg == NULL || section == NULL || key == NULL)
		return NULL;
	for (kv = cfg->app; kv != NULL; kv = kv->next)
		if (strcmp(kv->section, section) == 0 &&
		    strcmp(kv->key, key) == 0)
			return kv->value;
	return NULL;
}

int
idem_cfg_app_typed(const struct idem_cfg *cfg, const char *section,
    const char *key, enum idem_config_type type, union idem_cfg_value *out)
{
	const struct idem_cfg_kv	*kv;
	const char			*why;

	if (cfg == NULL || section == NULL || key == NULL)
		return -1;
	for (kv = cfg->app; kv != NULL; kv = kv->next)
		if (strcmp(kv->section, section) == 0 &&
		    strcmp(kv->key, key) == 0)
			break;
	if (kv == NULL)
		return -1;
	if (kv->value == NULL)
		return 0;
	return idem_cfg_value_parse(type, kv->value, out, &why) == 0 ? 1 : -1;
}

void
idem_cfg_free(struct idem_cfg *cfg)
{
	struct idem_cfg_route	*r, *rn;
	struct idem_cfg_kv	*kv, *kn;
	size_t			 i;

	if (cfg == NULL)
		return;
	free(cfg->listen);
	free(cfg->log_level);
	free(cfg->prepared_statements);
	free(cfg->problem_base);
	free(cfg->openapi_server_url);
	free(cfg->openapi_license);
	free(cfg->conninfo);
	free(cfg->metrics_allow);
	free(cfg->metrics_listen);
	free(cfg->allow);
	free(cfg->socket_group);
	free(cfg->metrics_socket_group);
	free(cfg->metrics_allow_uid);
	free(cfg->file);
	for (r = cfg->routes; r != NULL; r = rn) {
		rn = r->next;
		free(r->method);
		free(r->path);
		for (i = 0; i < r->nexclude; i++)
			free(r->exclude[i]);
		free(r->exclude);
		free(r);
	}
	idem_inbox_free(cfg->inboxes);
	for (kv = cfg->app; kv != NULL; kv = kn) {
		kn = kv->next;
		free(kv->section);
		free(kv->key);
		free(kv->value);
		free(kv);
	}
	memset(cfg, 0, sizeof(*cfg));
}

enum idem_prepared
idem_cfg_prepared(const struct idem_cfg *cfg)
{
	if (strcmp(cfg->prepared_statements, "on") == 0)
		return IDEM_PREPARED_ON;
	if (strcmp(cfg->prepared_statements, "off") == 0)
		return IDEM_PREPARED_OFF;
	return IDEM_PREPARED_AUTO;
}
