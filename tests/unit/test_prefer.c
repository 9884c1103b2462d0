/*
 * test_prefer.c - the Prefer header's wait preference (RFC 7240): a table
 * of header values and what idem_prefer_wait() reads from them; a table
 * of process loads and whether idem_wait_admit() lets one more wait.
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

/* threads, max_waiters, max_per_tenant, waiters, tenant_waiters, owners */
static const struct {
	struct idem_wait_load	 l;
	enum idem_wait_admission want;
} adm[] = {
	/* The case: threads 4, one owner: two wait, the third
	 * would hold the last worker. */
	{ { 4, 4, 4, 0, 0, 1 },		IDEM_ADMIT_WAIT },
	{ { 4, 4, 4, 1, 1, 1 },		IDEM_ADMIT_WAIT },
	{ { 4, 4, 4, 2, 2, 1 },		IDEM_ADMIT_NO_WORKER },
	/* The owner in another process: threads - 1 wait here. */
	{ { 4, 4, 4, 2, 2, 0 },		IDEM_ADMIT_WAIT },
	{ { 4, 4, 4, 3, 3, 0 },		IDEM_ADMIT_NO_WORKER },
	/* Owners of other keys hold workers too. */
	{ { 8, 8, 8, 0, 0, 7 },		IDEM_ADMIT_NO_WORKER },
	{ { 8, 8, 8, 0, 0, 6 },		IDEM_ADMIT_WAIT },
	{ { 8, 8, 8, 3, 0, 3 },		IDEM_ADMIT_WAIT },
	{ { 8, 8, 8, 4, 0, 3 },		IDEM_ADMIT_NO_WORKER },
	/* Two threads with an owner: never. */
	{ { 2, 4, 2, 0, 0, 1 },		IDEM_ADMIT_NO_WORKER },
	{ { 2, 4, 2, 1, 1, 0 },		IDEM_ADMIT_NO_WORKER },
	{ { 2, 4, 2, 0, 0, 0 },		IDEM_ADMIT_WAIT },
	/* One thread (one request per process, mod_fcgid): its owner is
	 * in another process; only the waiter bounds apply. */
	{ { 1, 4, 2, 0, 0, 0 },		IDEM_ADMIT_WAIT },
	{ { 1, 4, 2, 4, 0, 0 },		IDEM_ADMIT_PROCESS_FULL },
	{ { 1, 4, 1, 1, 1, 0 },		IDEM_ADMIT_TENANT_FULL },
	{ { 1, 0, 2, 0, 0, 0 },		IDEM_ADMIT_PROCESS_FULL },
	/* max_waiters, below the worker bound. */
	{ { 16, 4, 4, 3, 0, 1 },	IDEM_ADMIT_WAIT },
	{ { 16, 4, 4, 4, 0, 1 },	IDEM_ADMIT_PROCESS_FULL },
	{ { 16, 0, 2, 0, 0, 0 },	IDEM_ADMIT_PROCESS_FULL },
	/* max_waiters_per_tenant: its tenant's, not the others'. */
	{ { 16, 8, 2, 1, 1, 1 },	IDEM_ADMIT_WAIT },
	{ { 16, 8, 2, 2, 2, 1 },	IDEM_ADMIT_TENANT_FULL },
	{ { 16, 8, 2, 5, 1, 1 },	IDEM_ADMIT_WAIT },
	{ { 16, 8, 2, 5, 2, 1 },	IDEM_ADMIT_TENANT_FULL },
	{ { 16, 8, 0, 0, 0, 0 },	IDEM_ADMIT_TENANT_FULL },
	{ { 16, 2, 8, 1, 1, 0 },	IDEM_ADMIT_WAIT },
	{ { 16, 2, 8, 2, 2, 0 },	IDEM_ADMIT_PROCESS_FULL },
	/* Several bounds at once: the first in the enum's order. */
	{ { 4, 2, 1, 2, 2, 1 },		IDEM_ADMIT_NO_WORKER },
	{ { 8, 2, 1, 2, 2, 1 },		IDEM_ADMIT_PROCESS_FULL },
	/* The largest configuration: no overflow. */
	{ { 256, 256, 256, 254, 254, 0 }, IDEM_ADMIT_WAIT },
	{ { 256, 256, 256, 255, 255, 0 }, IDEM_ADMIT_NO_WORKER },
	{ { 256, 256, 256, 0, 0, 0xffffffffu }, IDEM_ADMIT_NO_WORKER },
};

static void
test_admission(void)
{
	enum idem_wait_admission got;
	size_t			 i;

	for (i = 0; i < sizeof(adm) / sizeof(adm[0]); i++) {
		got = idem_wait_admit(&adm[i].l);
		TAP_OK(got == adm[i].want, "threads %u, max_waiters %u, per "
		    "tenant %u, waiting %u (%u of its tenant), owners %u -> %d",
		    adm[i].l.threads, adm[i].l.max_waiters,
		    adm[i].l.max_per_tenant, adm[i].l.waiters,
		    adm[i].l.tenant_waiters, adm[i].l.owners,
		    (int)adm[i].want);
		if (got != adm[i].want)
			printf("#   got %d\n", (int)got);
	}
}

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
	test_admission();
	return TAP_DONE();
}
