/*
 * config_ini.c - the INI config file.  Everything doubtful is an error with
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
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_private.h"

static int
parse_section(struct parse *ps, char *s, size_t len)
{
	struct idem_cfg_kv	*kv;
	enum cfg_sect		 sect;
	size_t			 i;
	int			 found, rc;
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
	if ((rc = route_section(ps, s)) != 1)
		return rc;

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

/* The [inbox] sections complete (inbox.c): 0, or -1 at the line at
 * fault. */
static int
check_inboxes(struct parse *ps)
{
	unsigned long	line = 0;
	char		why[256];

	if (idem_inbox_finish(ps->cfg->inboxes, &line, why, sizeof(why)) == 0)
		return 0;
	return perr(ps, line, "%s", why);
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
	case S_INBOX:
		return parse_inbox_key(ps, key, val);
	case S_ROUTE:
		return parse_route_key(ps, key, val);
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

	return builtin_key(ps, key, val);
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


/* Each line of text (len bytes) in turn. */
static int
parse_lines(struct parse *ps, const char *text, size_t len)
{
	const char	*nl;
	size_t		 off, n;

	/* An editor's UTF-8 byte order mark is not part of the first line. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	for (off = 0; off < len; off += n + 1) {
		ps->line++;
		nl = memchr(text + off, '\n', len - off);
		n = nl != NULL ? (size_t)(nl - (text + off)) : len - off;
		if (parse_line(ps, text + off,
		    n > 0 && text[off + n - 1] == '\r' ? n - 1 : n) == -1)
			return -1;
	}
	return 0;
}

int
idem_cfg_parse(struct idem_cfg *cfg, const char *name, const char *text,
    size_t len, char *err, size_t errlen)
{
	struct parse		 ps;
	struct idem_cfg_kv	*kv;
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
	for (kv = cfg->app; kv != NULL; kv = kv->next)
		ps.napp++;
	if ((ps.key_line = calloc(cfg_nkeys, sizeof(*ps.key_line))) == NULL ||
	    (ps.napp > 0 &&
	    (ps.app = calloc(ps.napp, sizeof(*ps.app))) == NULL)) {
		free(ps.key_line);
		return perr(&ps, 0, "out of memory");
	}
	if (parse_lines(&ps, text, len) == 0 && check_server(&ps) == 0 &&
	    check_routes(&ps) == 0 && check_webhooks(&ps) == 0 &&
	    check_inboxes(&ps) == 0)
		rc = 0;
	free(ps.app);
	free(ps.key_line);
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
