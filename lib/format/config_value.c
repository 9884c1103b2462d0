/*
 * config_value.c - the config file's value parsers (integers, durations,
 * sizes, addresses, URLs, choices, application values) and the
 * "name:line: message" error every part reports with.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_private.h"

/* Report "name:line: message" and return -1. */
int
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

int
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Replace *field with a copy of value. */
int
set_str(char **field, const char *value)
{
	char	*s;

	if ((s = strdup(value)) == NULL)
		return -1;
	free(*field);
	*field = s;
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

/* The decimal number at *sp, one digit or more, into *n, *sp past it; -1
 * if there is no digit or the number exceeds max. */
static int
digits(const char **sp, long long max, long long *n)
{
	const char	*s = *sp;
	int		 d;

	if (!is_digit(*s))
		return -1;
	for (*n = 0; is_digit(*s); s++) {
		d = *s - '0';
		if (*n > (max - d) / 10)
			return -1;
		*n = *n * 10 + d;
	}
	*sp = s;
	return 0;
}

int
idem_parse_duration(const char *s, long long *ms)
{
	long long	 n, mult;

	/* Stop at MS_MAX already: no unit makes a value smaller. */
	if (s == NULL || ms == NULL || digits(&s, MS_MAX, &n) == -1)
		return -1;
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
int
parse_int(const char *s, long long min, long long max, long long *out)
{
	long long	 n;

	if (digits(&s, LLONG_MAX, &n) == -1)
		return -1;
	if (*s != '\0' || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}


/*
 * "a, b, c" of IPv4/IPv6 addresses; each is checked, the raw text kept.
 * Only SP may surround them: the request-time matcher splits on SP and ','.
 */
int
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

/* No blank, control or non-ASCII byte, nor one a URI never holds as
 * is: s may go into JSON strings and between the <> of a Link header. */
static int
uri_chars_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f ||
		    strchr("\"<>\\`{}|^", *s) != NULL)
			return 0;
	return 1;
}

/* [server] problem_base: a URI (reference) ending in '/'. */
int
uri_base_ok(const char *s)
{
	size_t	n = strlen(s);

	return uri_chars_ok(s) && n >= 1 && s[n - 1] == '/' &&
	    (s[0] == '/' || strstr(s, "://") != NULL ||
	    strncmp(s, "urn:", 4) == 0 || strncmp(s, "tag:", 4) == 0);
}

/* [openapi] server_url: a URL the document's clients resolve paths on. */
int
url_ok(const char *s)
{
	size_t	n = strlen(s);

	return uri_chars_ok(s) && (s[0] == '/' ||
	    (strncmp(s, "http://", 7) == 0 && n > 7) ||
	    (strncmp(s, "https://", 8) == 0 && n > 8));
}

/* Is v one of the '|'-separated words of choices? */
int
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

