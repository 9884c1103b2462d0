/*
 * prefer.c - the Prefer request header (RFC 7240), read for one
 * preference: wait=N, how long a duplicate of a key in flight may wait
 * for the first request's answer; and whether the process lets it wait.
 * Pure: text in, seconds out; counts in, a verdict out.
 */
#include <string.h>
#include <strings.h>

#include "internal.h"

static int
is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static const char *
skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/*
 * A token or quoted-string at p: its content in [*b, *e) (quotes off;
 * a quoted-pair left escaped, which no delta-seconds contains).  The end
 * of it, or NULL when malformed.
 */
static const char *
word(const char *p, const char **b, const char **e)
{
	if (*p == '"') {
		*b = ++p;
		for (; *p != '"'; p++) {
			if (*p == '\0')
				return NULL;
			if (*p == '\\' && p[1] != '\0')
				p++;
		}
		*e = p;
		return p + 1;
	}
	*b = p;
	while (is_tchar((unsigned char)*p))
		p++;
	*e = p;
	return p;
}

/* delta-seconds in [b, e): 1*DIGIT, capped at IDEM_PREFER_WAIT_CAP. */
static int
delta_seconds(const char *b, const char *e, unsigned *out)
{
	unsigned long	 v = 0;

	if (b == e)
		return -1;
	for (; b < e; b++) {
		if (*b < '0' || *b > '9')
			return -1;
		v = v * 10 + (unsigned long)(*b - '0');
		if (v > IDEM_PREFER_WAIT_CAP)
			v = IDEM_PREFER_WAIT_CAP;
	}
	*out = (unsigned)v;
	return 0;
}

enum idem_prefer_wait
idem_prefer_wait(const char *hdr, unsigned *seconds)
{
	const char	*p = hdr, *nb, *ne, *vb, *ve;

	*seconds = 0;
	if (hdr == NULL)
		return IDEM_PREFER_NONE;
	for (;;) {
		/* 1#preference: empty list elements are allowed. */
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return IDEM_PREFER_NONE;
		nb = p;
		while (is_tchar((unsigned char)*p))
			p++;
		ne = p;
		if (nb == ne)
			return IDEM_PREFER_MALFORMED;
		vb = ve = NULL;
		p = skip_ows(p);
		if (*p == '=') {
			p = skip_ows(p + 1);
			if ((p = word(p, &vb, &ve)) == NULL)
				return IDEM_PREFER_MALFORMED;
			p = skip_ows(p);
		}
		/* Parameters: none is defined for wait; skipped, quotes
		 * respected. */
		while (*p == ';') {
			p = skip_ows(p + 1);
			while (is_tchar((unsigned char)*p))
				p++;
			p = skip_ows(p);
			if (*p == '=') {
				const char *b, *e;

				p = skip_ows(p + 1);
				if ((p = word(p, &b, &e)) == NULL)
					return IDEM_PREFER_MALFORMED;
				p = skip_ows(p);
			}
		}
		if (*p != ',' && *p != '\0')
			return IDEM_PREFER_MALFORMED;
		/* The first instance of a preference is the one considered
		 * (RFC 7240 2); one not understood is ignored. */
		if (ne - nb == 4 && strncasecmp(nb, "wait", 4) == 0) {
			if (vb == NULL || delta_seconds(vb, ve, seconds) == -1)
				return IDEM_PREFER_MALFORMED;
			return *seconds > 0 ? IDEM_PREFER_WAIT :
			    IDEM_PREFER_NONE;
		}
	}
}

enum idem_wait_admission
idem_wait_admit(const struct idem_wait_load *l)
{
	/* A waiter and an owner each hold a worker until the owner ends;
	 * with this one, at least one worker must stay free.  Not with one
	 * thread: such a process takes one request at a time from a server
	 * that spreads them over processes (mod_fcgid), and its owner is in
	 * another one. */
	if (l->threads > 1 &&
	    (unsigned long long)l->waiters + l->owners + 1 >= l->threads)
		return IDEM_ADMIT_NO_WORKER;
	if (l->waiters >= l->max_waiters)
		return IDEM_ADMIT_PROCESS_FULL;
	if (l->tenant_waiters >= l->max_per_tenant)
		return IDEM_ADMIT_TENANT_FULL;
	return IDEM_ADMIT_WAIT;
}
