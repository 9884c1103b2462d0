/*
 * config_private.h - what the parts of the config file's reader share:
 * config.c (the keys: their table, defaults and handlers), config_value.c
 * (value parsers and the error report), config_route.c (route sections
 * and their policy), config_ini.c (the INI syntax, the reader's entry).
 * Calls go one way: config_ini.c -> config_route.c -> config.c ->
 * config_value.c.
 */
#ifndef IDEM_CONFIG_PRIVATE_H
#define IDEM_CONFIG_PRIVATE_H

#include <stddef.h>

#include "internal.h"

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

/* The library's own symbols for the parts' helpers (function-like: a
 * struct member of the same name stays itself); their code keeps its
 * short names. */
#define perr(...)	idem_cfg_perr(__VA_ARGS__)
#define is_blank(a)	idem_cfg_is_blank(a)
#define is_digit(a)	idem_cfg_is_digit(a)
#define set_str(a, b)	idem_cfg_set_str(a, b)
#define parse_int(a, b, c, d)	idem_cfg_parse_int(a, b, c, d)
#define check_addrs(a)	idem_cfg_check_addrs(a)
#define uri_base_ok(a)	idem_cfg_uri_base_ok(a)
#define url_ok(a)	idem_cfg_url_ok(a)
#define is_choice(a, b)	idem_cfg_is_choice(a, b)
#define builtin_sect(a)	idem_cfg_builtin_sect(a)
#define builtin_key(a, b, c)	idem_cfg_builtin_key(a, b, c)
#define key_line(a, b)	idem_cfg_key_line(a, b)
#define check_server(a)	idem_cfg_check_server(a)
#define check_webhooks(a)	idem_cfg_check_webhooks(a)
#define route_section(a, b)	idem_cfg_route_section(a, b)
#define parse_route_key(a, b, c)	idem_cfg_parse_route_key(a, b, c)
#define check_routes(a)	idem_cfg_check_routes(a)

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
	unsigned long		*key_line;	/* cfg_nkeys: where each key
						 * was set, 0: not yet */
	int			 sect_seen[S_ROUTE];
	struct app_state	*app;
	size_t			 napp;
};

/* config_value.c */
/* Report "name:line: message" and return -1. */
int	 perr(struct parse *, unsigned long, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
int	 is_blank(char);
int	 is_digit(char);
/* Replace *field with a copy of value. */
int	 set_str(char **, const char *);
/* Strict decimal in [min, max]: no sign, no blanks, no leading '+'. */
int	 parse_int(const char *, long long, long long, long long *);
/* Values of a few keys: 1 (or 0) when good; -1 for check_addrs. */
int	 check_addrs(const char *);
int	 uri_base_ok(const char *);
int	 url_ok(const char *);
int	 is_choice(const char *, const char *);

/* config.c */
extern const size_t cfg_nkeys;	/* the built-in keys */
void	idem_cfg_table_key(size_t i, const char **section, const char **key);
enum cfg_sect builtin_sect(const char *);
/* A built-in section's key = val. */
int	 builtin_key(struct parse *, const char *, const char *);
/* The line that set the built-in key name, 0: not set. */
unsigned long key_line(const struct parse *, const char *);
/* What no single key's range can say, after the whole file. */
int	 check_server(struct parse *);
int	 check_webhooks(struct parse *);

/* config_route.c */
/* [route "METHOD /path"] in s (cut up in place); 1 when s is not a route
 * section's name, 0 when read, -1 on an error. */
int	 route_section(struct parse *, char *);
int	 parse_route_key(struct parse *, const char *, const char *);
/* The routes' limits and ttls, and lease against lock_timeout. */
int	 check_routes(struct parse *);

#endif
