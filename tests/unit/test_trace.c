/*
 * test_trace.c - W3C Trace Context's traceparent (lib/pure/trace.c): the
 * strict parser's verdict and fields for each row, and the writer's
 * round trip.
 */
#include <stdio.h>
#include <string.h>

#include "trace.h"
#include "tap.h"

#define TID	"4bf92f3577b34da6a3ce929d0e0e4736"
#define PID	"00f067aa0ba902b7"

static const struct {
	const char		*in;
	enum idem_trace_verdict	 want;
	const char		*flags;		/* when OK */
} rows[] = {
	{ "00-" TID "-" PID "-01", IDEM_TRACE_OK, "01" },
	{ "00-" TID "-" PID "-00", IDEM_TRACE_OK, "00" },
	{ "00-" TID "-" PID "-ff", IDEM_TRACE_OK, "ff" },
	/* a later version: version 00's fields, then its own after '-' */
	{ "01-" TID "-" PID "-01", IDEM_TRACE_OK, "01" },
	{ "cc-" TID "-" PID "-01-what-the-future-holds", IDEM_TRACE_OK,
	  "01" },
	{ "cc-" TID "-" PID "-01x", IDEM_TRACE_LENGTH, NULL },
	{ NULL, IDEM_TRACE_ABSENT, NULL },
	{ "", IDEM_TRACE_ABSENT, NULL },
	/* version 00 is exactly 55 bytes */
	{ "00-" TID "-" PID "-01-", IDEM_TRACE_LENGTH, NULL },
	{ "00-" TID "-" PID "-01 ", IDEM_TRACE_LENGTH, NULL },
	{ "00-" TID "-" PID "-0", IDEM_TRACE_LENGTH, NULL },
	{ " 00-" TID "-" PID "-01", IDEM_TRACE_FORMAT, NULL },
	{ "00_" TID "-" PID "-01", IDEM_TRACE_FORMAT, NULL },
	{ "00-" TID "_" PID "-01", IDEM_TRACE_FORMAT, NULL },
	{ "00-" TID "-" PID "_01", IDEM_TRACE_FORMAT, NULL },
	{ "00-" TID "0-" PID "01", IDEM_TRACE_FORMAT, NULL },
	/* lowercase hex only */
	{ "00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01", IDEM_TRACE_HEX,
	  NULL },
	{ "00-" TID "-00F067AA0BA902B7-01", IDEM_TRACE_HEX, NULL },
	{ "00-" TID "-" PID "-0g", IDEM_TRACE_HEX, NULL },
	{ "0x-" TID "-" PID "-01", IDEM_TRACE_HEX, NULL },
	{ "00-4bf92f3577b34da6a3ce929d0e0e473g-" PID "-01", IDEM_TRACE_HEX,
	  NULL },
	{ "ff-" TID "-" PID "-01", IDEM_TRACE_VERSION, NULL },
	{ "00-00000000000000000000000000000000-" PID "-01",
	  IDEM_TRACE_ZERO_TRACE, NULL },
	{ "00-" TID "-0000000000000000-01", IDEM_TRACE_ZERO_PARENT, NULL },
};

int
main(void)
{
	struct idem_trace	 t;
	enum idem_trace_verdict	 v;
	char			 out[IDEM_TRACEPARENT_LEN + 1];
	size_t			 i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		memset(&t, 'x', sizeof(t));
		v = idem_trace_parse(rows[i].in, &t);
		TAP_OK(v == rows[i].want, "\"%s\" -> %s (got %s)",
		    rows[i].in ? rows[i].in : "(null)",
		    idem_trace_reason(rows[i].want), idem_trace_reason(v));
		if (rows[i].want == IDEM_TRACE_OK && v == IDEM_TRACE_OK)
			TAP_OK(strcmp(t.trace_id, TID) == 0 &&
			    strcmp(t.span_id, PID) == 0 &&
			    strcmp(t.flags, rows[i].flags) == 0,
			    "... its fields: %s %s %s", t.trace_id,
			    t.span_id, t.flags);
		else
			TAP_OK(t.trace_id[0] == 'x' && t.flags[2] == 'x',
			    "... and the output is untouched");
	}
	/* Written as version 00, read back the same. */
	idem_trace_parse("cc-" TID "-" PID "-03-later", &t);
	idem_trace_format(&t, out);
	TAP_STREQ(out, "00-" TID "-" PID "-03", "written as version 00");
	TAP_OK(idem_trace_parse(out, &t) == IDEM_TRACE_OK &&
	    strcmp(t.flags, "03") == 0, "... and read back");
	return TAP_DONE();
}
