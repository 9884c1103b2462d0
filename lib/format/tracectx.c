/*
 * tracectx.c - a request's W3C trace context: the trace its traceparent
 * header names (a fresh one when it is absent or invalid), a span id of
 * its own, and the traceparent of each call it makes (the same trace, a
 * new span id), so that the calls, the events it enqueues and its log
 * lines share its trace id.
 */
#include <string.h>

#include "private.h"

/* nbytes random bytes as hex, never all zero (the spec forbids it). */
static int
random_id(char *out, size_t nbytes)
{
	int	tries;

	for (tries = 0; tries < 4; tries++)
		if (idem_random_hex(out, nbytes) == 0 &&
		    strspn(out, "0") != 2 * nbytes)
			return 0;
	return -1;
}

void
idem_trace_begin(idem_req *req)
{
	struct idem_trace	t;

	if (idem_trace_parse(idem_req_header(req, "traceparent"), &t) !=
	    IDEM_TRACE_OK) {
		/* A trace of its own, recorded (the logs carry it). */
		if (random_id(t.trace_id, 16) == -1)
			goto none;
		memcpy(t.flags, "01", 3);
	}
	/* The incoming parent-id is the caller's span: this request is a
	 * span of its own. */
	if (random_id(t.span_id, 8) == -1)
		goto none;
	req->trace = t;
	return;
none:
	memset(&req->trace, 0, sizeof(req->trace));
}

int
idem_trace_child(const idem_req *req, char *out)
{
	struct idem_trace	t;

	if (req == NULL || req->trace.trace_id[0] == '\0')
		return -1;
	t = req->trace;
	if (random_id(t.span_id, 8) == -1)
		return -1;
	idem_trace_format(&t, out);
	return 0;
}
