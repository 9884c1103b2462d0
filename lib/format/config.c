/*
 * config.c - the config file's built-in keys: their table, defaults and
 * handlers, the checks no single key can make, application keys.  The
 * reader is config_ini.c (syntax), config_value.c (values) and
 * config_route.c (route sections).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_private.h"
#include "peer.h"

enum cfg_type {
	T_UINT,		/* unsigned, range */
	T_LONG,		/* long, range */
	T_SIZE,		/* size_t, range */
	T_DUR,		/* long long milliseconds */
	T_STR,		/* char * (and so up to T_URL: idem_cfg_free) */
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

/* A row: a key without bounds; one within [lo, hi]; one of the choices
 * "a|b|c" (T_CHOICE). */
#define KEY(s, name, type, f)		{ s, name, type, OFF(f), 0, 0, NULL }
#define RANGE(s, name, type, f, lo, hi)	{ s, name, type, OFF(f), lo, hi, NULL }
#define CHOICE(s, name, f, ch)		{ s, name, T_CHOICE, OFF(f), 0, 0, ch }
#define MIB_LL	((long long)MIB)

static const struct cfg_key cfg_keys[] = {
	RANGE(S_SERVER, "threads", T_UINT, threads, 1, 256),
	RANGE(S_SERVER, "max_body", T_SIZE, max_body, 1, 64 * MIB_LL),
	RANGE(S_SERVER, "max_json_values", T_UINT, max_json_values, 1,
	    10000000),
	KEY(S_SERVER, "request_timeout", T_DUR, request_timeout_ms),
	RANGE(S_SERVER, "max_params", T_SIZE, max_params, 1024, 1 * MIB_LL),
	KEY(S_SERVER, "read_timeout", T_DUR, read_timeout_ms),
	KEY(S_SERVER, "write_timeout", T_DUR, write_timeout_ms),
	RANGE(S_SERVER, "max_buffered", T_SIZE, max_buffered, MIB_LL,
	    65536 * MIB_LL),
	KEY(S_SERVER, "listen", T_STR, listen),
	CHOICE(S_SERVER, "log_level", log_level, "debug|info|warn|error"),
	KEY(S_SERVER, "problem_base", T_URIBASE, problem_base),
	KEY(S_DATABASE, "conninfo", T_STR, conninfo),
	RANGE(S_DATABASE, "pool_size", T_UINT, pool_size, 1, 1024),
	KEY(S_DATABASE, "acquire_timeout", T_DUR, acquire_timeout_ms),
	CHOICE(S_DATABASE, "prepared_statements", prepared_statements,
	    "on|off|auto"),
	KEY(S_IDEM, "ttl", T_DUR, ttl_ms),
	/* Below the web servers' FastCGI read timeouts (40 s and more). */
	RANGE(S_IDEM, "max_wait", T_DUR, max_wait_ms, 0, 30000),
	RANGE(S_IDEM, "max_waiters", T_UINT, max_waiters, 0, IDEM_WAITERS_MAX),
	RANGE(S_IDEM, "max_waiters_per_tenant", T_UINT, max_waiters_per_tenant,
	    0, IDEM_WAITERS_MAX),
	KEY(S_IDEM, "lock_timeout", T_DUR, lock_timeout_ms),
	/* The lease; lock_timeout above is its deprecated alias. */
	KEY(S_IDEM, "lease", T_DUR, lock_timeout_ms),
	KEY(S_IDEM, "evict_interval", T_DUR, evict_interval_ms),
	RANGE(S_IDEM, "evict_batch", T_LONG, evict_batch, 1, 1000000),
	RANGE(S_IDEM, "completer_max_attempts", T_LONG, completer_max_attempts,
	    0, 1000000),
	KEY(S_IDEM, "completer_max_age", T_DUR, completer_max_age_ms),
	KEY(S_IDEM, "completer_backoff", T_DUR, completer_backoff_ms),
	KEY(S_IDEM, "completer_backoff_max", T_DUR, completer_backoff_max_ms),
	KEY(S_METRICS, "allow", T_ADDRS, metrics_allow),
	KEY(S_METRICS, "listen", T_STR, metrics_listen),
	KEY(S_SERVER, "allow", T_ADDRS, allow),
	KEY(S_SERVER, "socket_mode", T_MODE, socket_mode),
	KEY(S_SERVER, "socket_group", T_STR, socket_group),
	KEY(S_METRICS, "socket_mode", T_MODE, metrics_socket_mode),
	KEY(S_METRICS, "socket_group", T_STR, metrics_socket_group),
	KEY(S_METRICS, "allow_uid", T_STR, metrics_allow_uid),
	KEY(S_OPENAPI, "server_url", T_URL, openapi_server_url),
	KEY(S_OPENAPI, "license", T_STR, openapi_license),
	KEY(S_WEBHOOKS, "dispatcher", T_BOOL, wh_dispatcher),
	KEY(S_WEBHOOKS, "allow_private", T_BOOL, wh_allow_private),
	RANGE(S_WEBHOOKS, "batch", T_LONG, wh_batch, 1, 1000),
	KEY(S_WEBHOOKS, "interval", T_DUR, wh_interval_ms),
	/* An endpoint that needs more than a minute is down. */
	RANGE(S_WEBHOOKS, "timeout", T_DUR, wh_timeout_ms, 0, 60000),
	RANGE(S_WEBHOOKS, "max_response", T_SIZE, wh_max_response, 1,
	    16 * MIB_LL),
	RANGE(S_WEBHOOKS, "max_attempts", T_LONG, wh_max_attempts, 0, 1000000),
	KEY(S_WEBHOOKS, "max_age", T_DUR, wh_max_age_ms),
	KEY(S_WEBHOOKS, "backoff", T_DUR, wh_backoff_ms),
	KEY(S_WEBHOOKS, "backoff_max", T_DUR, wh_backoff_max_ms),
	KEY(S_WEBHOOKS, "retention", T_DUR, wh_retention_ms),
	KEY(S_WEBHOOKS, "ordered", T_BOOL, wh_ordered),
	RANGE(S_WEBHOOKS, "max_endpoints", T_LONG, wh_max_endpoints, 1, 10000),
	RANGE(S_WEBHOOKS, "concurrency", T_LONG, wh_concurrency, 1, 64),
	KEY(S_WEBHOOKS, "disable_after", T_DUR, wh_disable_after_ms),
};
#define NKEYS	(sizeof(cfg_keys) / sizeof(cfg_keys[0]))

static const char *const sect_names[] = {
	[S_SERVER] = "server", [S_DATABASE] = "database",
	[S_IDEM] = "idempotency", [S_METRICS] = "metrics",
	[S_OPENAPI] = "openapi", [S_WEBHOOKS] = "webhooks",
	[S_ROUTE] = "route",
};

const size_t cfg_nkeys = NKEYS;

/* The table's i-th key (i < cfg_nkeys), for idem_cfg_key_nth(). */
void
idem_cfg_table_key(size_t i, const char **section, const char **key)
{
	*section = sect_names[cfg_keys[i].sect];
	*key = cfg_keys[i].name;
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
	cfg->wh_max_endpoints = 16;
	cfg->wh_concurrency = 8;
	cfg->wh_disable_after_ms = 5 * MS_DAY;
	/* Owner and group: the web server's user joins the group. */
	cfg->socket_mode = 0660;
	cfg->metrics_socket_mode = 0660;
}

enum cfg_sect
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

const char *
idem_cfg_allow_refusal(const char *section, const char *key,
    enum idem_config_type type)
{
	if (section == NULL || key == NULL || *section == '\0' ||
	    *key == '\0')
		return "the section and the key must not be empty";
	/* Built-in sections are never application sections. */
	if (builtin_sect(section) != S_NONE)
		return "the section is the library's (see idem.conf(5))";
	if (type < IDEM_CONFIG_STRING || type > IDEM_CONFIG_BOOL)
		return "no such enum idem_config_type";
	return NULL;
}

int
idem_cfg_allow_typed(struct idem_cfg *cfg, const char *section,
    const char *key, enum idem_config_type type)
{
	struct idem_cfg_kv	*kv, **tail;

	if (cfg == NULL || idem_cfg_allow_refusal(section, key, type) != NULL)
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


/* What a string value v of type must be if it is not; NULL if it is. */
static const char *
str_refusal(enum cfg_type type, const char *v)
{
	if (type == T_ADDRS && check_addrs(v) == -1)
		return "a comma-separated list of IPv4/IPv6 addresses";
	if (type == T_URIBASE && !uri_base_ok(v))
		return "an absolute URI or a path starting with '/', ending in "
		    "'/', without blanks, quotes, '<' or '>'";
	if (type == T_URL && !url_ok(v))
		return "an http:// or https:// URL or a path starting with '/', "
		    "without blanks, quotes, '<' or '>'";
	return NULL;
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
	const char	*why;
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
	case T_URIBASE:
	case T_URL:
		if ((why = str_refusal(k->type, v)) != NULL)
			return perr(ps, ps->line, "%s must be %s", k->name, why);
		break;
	case T_STR:
		break;
	}
	if (set_str((char **)(void *)base, v) == -1)
		return perr(ps, ps->line, "out of memory");
	return 0;
}


/* A built-in section's key = val: its handler, once per key. */
int
builtin_key(struct parse *ps, const char *key, const char *val)
{
	size_t	 i;

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


unsigned long
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
int
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


/* [server]: no request could ever arrive whole, no answer leave; a
 * large body may take half of max_buffered (budget.h): one of max_body
 * must fit.  Unset, max_buffered grows with max_body. */
int
check_server(struct parse *ps)
{
	struct idem_cfg	*cfg = ps->cfg;

	if (cfg->read_timeout_ms <= 0 || cfg->write_timeout_ms <= 0)
		return perr(ps, key_line(ps, cfg->read_timeout_ms <= 0 ?
		    "read_timeout" : "write_timeout"), "%s must be more than 0",
		    cfg->read_timeout_ms <= 0 ? "read_timeout" :
		    "write_timeout");
	if (cfg->max_buffered / 2 < cfg->max_body &&
	    key_line(ps, "max_buffered") == 0)
		cfg->max_buffered = 2 * cfg->max_body;
	if (cfg->max_buffered / 2 < cfg->max_body)
		return perr(ps, key_line(ps, "max_buffered"), "max_buffered "
		    "(%zu bytes) must be at least twice max_body (%zu bytes)",
		    cfg->max_buffered, cfg->max_body);
	return 0;
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
	/* The strings the keys set (each member is one key's), the file. */
	for (i = 0; i < NKEYS; i++)
		if (cfg_keys[i].type >= T_STR && cfg_keys[i].type <= T_URL)
			free(*(char **)(void *)((char *)cfg + cfg_keys[i].off));
	free(cfg->file);
	idem_inbox_free(cfg->inboxes);
	for (r = cfg->routes; r != NULL; r = rn) {
		rn = r->next;
		free(r->method);
		free(r->path);
		for (i = 0; i < r->nexclude; i++)
			free(r->exclude[i]);
		free(r->exclude);
		free(r);
	}
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
