/*
 * test_prefer.c - the Prefer header's wait preference (RFC 7240): a table
 * of header values and what idem_prefer_wait() reads from them.
 */
#include <stdio.h>

#include "internal.h"
#include "tap.h"

static const struct {
	const char		*hdr;
	enum idem_prefer_wait	 want;
	unsigned		 seconds;
} t[] = {
	{ NULL,				IDEM_PREFER_NONE, 0 },
	{ "",				IDEM_PREFER_NONE, 0 },
	{ "wait=5",			IDEM_PREFER_WAIT, 5 },
	{ "WAIT=5",			IDEM_PREFER_WAIT, 5 },
	{ "Wait = 5",			IDEM_PREFER_WAIT, 5 },
	{ " wait=5 ",			IDEM_PREFER_WAIT, 5 },
	{ "wait=\"5\"",			IDEM_PREFER_WAIT, 5 },
	{ "wait=0",			IDEM_PREFER_NONE, 0 },
	{ "wait=007",			IDEM_PREFER_WAIT, 7 },
	{ "wait=99999999999999999999",	IDEM_PREFER_WAIT, IDEM_PREFER_WAIT_CAP },
	/* among others, with parameters, in any place */
	{ "respond-async, wait=10",	IDEM_PREFER_WAIT, 10 },
	{ "return=minimal,wait=3",	IDEM_PREFER_WAIT, 3 },
	{ "handling=lenient, wait=2, return=representation",
					IDEM_PREFER_WAIT, 2 },
	{ "wait=4;foo=bar",		IDEM_PREFER_WAIT, 4 },
	{ "foo; a=\"x,wait=9\", wait=1", IDEM_PREFER_WAIT, 1 },
	{ ",, wait=6 ,",		IDEM_PREFER_WAIT, 6 },
	/* the first instance counts (RFC 7240 2) */
	{ "wait=2, wait=9",		IDEM_PREFER_WAIT, 2 },
	{ "wait=0, wait=9",		IDEM_PREFER_NONE, 0 },
	/* not wait */
	{ "respond-async",		IDEM_PREFER_NONE, 0 },
	{ "waiting=5",			IDEM_PREFER_NONE, 0 },
	{ "wai=5",			IDEM_PREFER_NONE, 0 },
	{ "x-wait=5",			IDEM_PREFER_NONE, 0 },
	/* malformed: ignored as not understood */
	{ "wait",			IDEM_PREFER_MALFORMED, 0 },
	{ "wait=",			IDEM_PREFER_MALFORMED, 0 },
	{ "wait=-1",			IDEM_PREFER_MALFORMED, 0 },
	{ "wait=1.5",			IDEM_PREFER_MALFORMED, 0 },
	{ "wait=5s",			IDEM_PREFER_MALFORMED, 0 },
	{ "wait=\"5",			IDEM_PREFER_MALFORMED, 0 },
	{ "wait=\"\"",			IDEM_PREFER_MALFORMED, 0 },
	{ "wait=5 6",			IDEM_PREFER_MALFORMED, 0 },
	{ "=5",				IDEM_PREFER_MALFORMED, 0 },
	{ "wait=5;",			IDEM_PREFER_WAIT, 5 },
	{ "(wait)=5",			IDEM_PREFER_MALFORMED, 0 },
	{ "a=\"unterminated, wait=5",	IDEM_PREFER_MALFORMED, 0 },
};

int
main(void)
{
	enum idem_prefer_wait	 got;
	unsigned		 s;
	size_t			 i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		s = 12345;
		got = idem_prefer_wait(t[i].hdr, &s);
		TAP_OK(got == t[i].want && s == t[i].seconds,
		    "Prefer: %s -> %d, %u s", t[i].hdr ? t[i].hdr : "(absent)",
		    (int)t[i].want, t[i].seconds);
		if (got != t[i].want || s != t[i].seconds)
			printf("#   got %d, %u s\n", (int)got, s);
	}
	return TAP_DONE();
}
