/*
 * trace.c - W3C Trace Context's traceparent (trace.h): a strict parser and
 * its writer.  No clock, no randomness: the ids a request makes up come
 * from lib/format/tracectx.c.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"	/* configure's switches: rebuilt when they change */
#include "trace.h"

/* n lowercase hex digits at p: 1 (*zero set when all are '0'), or 0. */
static int
lowhex(const char *p, size_t n, int *zero)
{
	size_t	i;

	*zero = 1;
	for (i = 0; i < n; i++) {
		if (!((p[i] >= '0' && p[i] <= '9') ||
		    (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
		*zero &= p[i] == '0';
	}
	return 1;
}

enum idem_trace_verdict
idem_trace_parse(const char *s, struct idem_trace *out)
{
	size_t	len;
	int	zero, trace_zero, parent_zero;

	if (s == NULL || *s == '\0')
		return IDEM_TRACE_ABSENT;
	len = strlen(s);
	if (len < IDEM_TRACEPARENT_LEN)
		return IDEM_TRACE_LENGTH;
	if (s[2] != '-' || s[35] != '-' || s[52] != '-')
		return IDEM_TRACE_FORMAT;
	if (!lowhex(s, 2, &zero))
		return IDEM_TRACE_HEX;
	if (strncmp(s, "ff", 2) == 0)
		return IDEM_TRACE_VERSION;
	/* Version 00 is exactly its fields; a later one may add its own
	 * after a '-'. */
	if (zero ? len != IDEM_TRACEPARENT_LEN :
	    len > IDEM_TRACEPARENT_LEN && s[IDEM_TRACEPARENT_LEN] != '-')
		return IDEM_TRACE_LENGTH;
	if (!lowhex(s + 3, 32, &trace_zero) ||
	    !lowhex(s + 36, 16, &parent_zero) || !lowhex(s + 53, 2, &zero))
		return IDEM_TRACE_HEX;
	if (trace_zero)
		return IDEM_TRACE_ZERO_TRACE;
	if (parent_zero)
		return IDEM_TRACE_ZERO_PARENT;
	memcpy(out->trace_id, s + 3, 32);
	out->trace_id[32] = '\0';
	memcpy(out->span_id, s + 36, 16);
	out->span_id[16] = '\0';
	memcpy(out->flags, s + 53, 2);
	out->flags[2] = '\0';
	return IDEM_TRACE_OK;
}

const char *
idem_trace_reason(enum idem_trace_verdict v)
{
	switch (v) {
	case IDEM_TRACE_OK:
		return "valid";
	case IDEM_TRACE_ABSENT:
		return "absent";
	case IDEM_TRACE_LENGTH:
		return "not of its version's length";
	case IDEM_TRACE_FORMAT:
		return "not four fields separated by '-'";
	case IDEM_TRACE_HEX:
		return "not lowercase hex";
	case IDEM_TRACE_VERSION:
		return "version ff";
	case IDEM_TRACE_ZERO_TRACE:
		return "trace-id all zero";
	case IDEM_TRACE_ZERO_PARENT:
		return "parent-id all zero";
	}
	return "invalid";
}

void
idem_trace_format(const struct idem_trace *t, char *out)
{
	snprintf(out, IDEM_TRACEPARENT_LEN + 1, "00-%.32s-%.16s-%.2s",
	    t->trace_id, t->span_id, t->flags);
}
