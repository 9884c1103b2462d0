/*
 * trace.h - W3C Trace Context's traceparent header (trace.c): parsed
 * strictly and written back, pure, so that a table tests it
 * (tests/unit/test_trace.c).  lib/format/tracectx.c gives a request its
 * trace from it.
 */
#ifndef IDEM_TRACE_H
#define IDEM_TRACE_H

/* "00-" 32 hex "-" 16 hex "-" 2 hex: the header of version 00. */
#define IDEM_TRACEPARENT_LEN	55

/* A trace context as lowercase hex strings (NUL-terminated). */
struct idem_trace {
	char	trace_id[33];	/* 16 bytes, not all zero */
	char	span_id[17];	/* 8 bytes, not all zero: the parent-id */
	char	flags[3];	/* trace-flags, 1 byte */
};

/* What a traceparent value is. */
enum idem_trace_verdict {
	IDEM_TRACE_OK = 0,
	IDEM_TRACE_ABSENT,	/* NULL or "" */
	IDEM_TRACE_LENGTH,	/* version 00 and not 55 bytes; a later
				 * version shorter, or longer without a '-'
				 * after its flags */
	IDEM_TRACE_FORMAT,	/* a '-' missing where the fields end */
	IDEM_TRACE_HEX,		/* a field not lowercase hex */
	IDEM_TRACE_VERSION,	/* version ff (forbidden) */
	IDEM_TRACE_ZERO_TRACE,	/* trace-id all zero */
	IDEM_TRACE_ZERO_PARENT	/* parent-id all zero */
};

/*
 * Parse s as a traceparent header value, exactly: no blanks around it,
 * lowercase hex only.  A version above 00 (not ff) is read by version
 * 00's fields, as the recommendation says, whatever follows a '-' after
 * them.  IDEM_TRACE_OK fills out; any other verdict leaves it untouched.
 */
enum idem_trace_verdict idem_trace_parse(const char *s,
	    struct idem_trace *out);
/* Why a verdict refuses the header, for a debug log line. */
const char	*idem_trace_reason(enum idem_trace_verdict v);
/* t as a version 00 traceparent into out (IDEM_TRACEPARENT_LEN + 1). */
void		 idem_trace_format(const struct idem_trace *t, char *out);

#endif /* IDEM_TRACE_H */
