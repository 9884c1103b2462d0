/*
 * test_verdict.c - the exactly-once decision (lib/pure/verdict.c), one table
 * row per situation flight 1 can find a key in; and the HTTP date of the
 * Idempotency-Key-Expires header (lib/pure/clock.c).
 */
#include <string.h>

#include "internal.h"
#include "tap.h"

static const char *const names[] = {
	[IDEM_V_UNAUTHORIZED] = "unauthorized", [IDEM_V_EXECUTE] = "execute",
	[IDEM_V_RESUME] = "resume", [IDEM_V_REPLAY] = "replay",
	[IDEM_V_REUSED] = "reused", [IDEM_V_IN_FLIGHT] = "in-flight",
	[IDEM_V_RACED] = "raced", [IDEM_V_EXPIRED] = "expired",
};

/* Columns: tenant_ok lock_tried lock_got claimed inserted taken
 * has_record same_request completed remembered. */
static const struct {
	const char		*what;
	int			 phased;
	struct idem_claim_row	 row;
	enum idem_verdict	 want;
} cases[] = {
	{ "unknown API key", 0, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	    IDEM_V_UNAUTHORIZED },
	{ "unknown API key, phased", 1, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	    IDEM_V_UNAUTHORIZED },
	{ "new key, atomic: lock got, free", 0,
	    { 1, 1, 1, 1, 0, 0, 0, 0, 0, 0 }, IDEM_V_EXECUTE },
	{ "new key, phased: inserted", 1, { 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 },
	    IDEM_V_EXECUTE },
	{ "expired completed record, atomic: free again", 0,
	    { 1, 1, 1, 1, 0, 0, 1, 1, 1, 0 }, IDEM_V_EXECUTE },
	{ "lock held by another request", 0, { 1, 1, 0, 0, 0, 0, 0, 0, 0, 0 },
	    IDEM_V_IN_FLIGHT },
	{ "lock held by another request, phased", 1,
	    { 1, 1, 0, 0, 0, 0, 1, 1, 0, 0 }, IDEM_V_IN_FLIGHT },
	{ "completed, same request: replay", 0,
	    { 1, 0, 0, 0, 0, 0, 1, 1, 1, 0 }, IDEM_V_REPLAY },
	{ "completed, same request, phased: replay", 1,
	    { 1, 0, 0, 0, 0, 0, 1, 1, 1, 0 }, IDEM_V_REPLAY },
	{ "completed, other request: 422", 0, { 1, 0, 0, 0, 0, 0, 1, 0, 1, 0 },
	    IDEM_V_REUSED },
	{ "in progress, other request: 422", 1,
	    { 1, 0, 0, 0, 0, 0, 1, 0, 0, 0 }, IDEM_V_REUSED },
	{ "in progress, live lease (expired or not): 409", 1,
	    { 1, 0, 0, 0, 0, 0, 1, 1, 0, 0 }, IDEM_V_IN_FLIGHT },
	{ "in progress, lapsed lease taken over: resume", 1,
	    { 1, 1, 1, 0, 0, 1, 1, 1, 0, 0 }, IDEM_V_RESUME },
	{ "lapsed lease renewed before our lock: 409", 1,
	    { 1, 1, 1, 0, 0, 0, 1, 1, 0, 0 }, IDEM_V_IN_FLIGHT },
	{ "owner completed between lookup and lock: replay", 1,
	    { 1, 1, 1, 0, 0, 0, 1, 1, 1, 0 }, IDEM_V_REPLAY },
	{ "atomic owner committed between lookup and lock: replay", 0,
	    { 1, 1, 1, 0, 0, 0, 1, 1, 1, 0 }, IDEM_V_REPLAY },
	{ "a taken lease on an atomic route is not a resume", 0,
	    { 1, 1, 1, 0, 0, 1, 1, 1, 0, 0 }, IDEM_V_IN_FLIGHT },
	{ "phased, free yet nothing inserted: raced", 1,
	    { 1, 1, 1, 1, 0, 0, 1, 1, 0, 0 }, IDEM_V_RACED },
	{ "no record and not claimed: raced", 0,
	    { 1, 1, 1, 0, 0, 0, 0, 0, 0, 0 }, IDEM_V_RACED },
	/* [route] remember: idem_claim() returns before the lock. */
	{ "evicted, same request remembered: 410", 0,
	    { 1, 0, 0, 0, 0, 0, 0, 0, 0, 1 }, IDEM_V_EXPIRED },
	{ "evicted, same request remembered, phased: 410 (nothing "
	    "inserted)", 1, { 1, 0, 0, 0, 0, 0, 0, 0, 0, 1 }, IDEM_V_EXPIRED },
	{ "expired record not yet evicted, same request remembered: 410", 0,
	    { 1, 0, 0, 0, 0, 0, 1, 1, 1, 1 }, IDEM_V_EXPIRED },
	{ "expired record not yet evicted, remembered, phased: 410", 1,
	    { 1, 0, 0, 0, 0, 0, 1, 1, 1, 1 }, IDEM_V_EXPIRED },
	{ "remembered, but the API key is unknown: 401 first", 0,
	    { 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 }, IDEM_V_UNAUTHORIZED },
	{ "evicted, another request under the key (not remembered): "
	    "execute", 0, { 1, 1, 1, 1, 0, 0, 0, 0, 0, 0 }, IDEM_V_EXECUTE },
	{ "expired record of another request, not remembered: execute", 0,
	    { 1, 1, 1, 1, 0, 0, 1, 0, 1, 0 }, IDEM_V_EXECUTE },
	{ "expired record of another request, phased: execute (inserted)", 1,
	    { 1, 1, 1, 1, 1, 0, 1, 0, 1, 0 }, IDEM_V_EXECUTE },
	{ "window passed (not remembered), same request: execute", 0,
	    { 1, 1, 1, 1, 0, 0, 0, 0, 0, 0 }, IDEM_V_EXECUTE },
};

/* RFC 9110 IMF-fixdate, English names whatever the locale. */
static const struct {
	long long	 t;
	const char	*want;	/* NULL: refused */
} dates[] = {
	{ 784111777, "Sun, 06 Nov 1994 08:49:37 GMT" },	/* RFC 9110's */
	{ 0, "Thu, 01 Jan 1970 00:00:00 GMT" },
	{ 951782400, "Tue, 29 Feb 2000 00:00:00 GMT" },
	{ 1798761599, "Thu, 31 Dec 2026 23:59:59 GMT" },
	{ -1, NULL },
	{ 253402300800LL, NULL },			/* year 10000 */
};

int
main(void)
{
	enum idem_verdict	got;
	char			buf[IDEM_IMF_FIXDATE_LEN];
	size_t			i;
	int			rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		got = idem_claim_verdict(&cases[i].row, cases[i].phased);
		TAP_OK(got == cases[i].want, "%s -> %s (got %s)", cases[i].what,
		    names[cases[i].want], names[got]);
	}
	for (i = 0; i < sizeof(dates) / sizeof(dates[0]); i++) {
		rc = idem_imf_fixdate(dates[i].t, buf, sizeof(buf));
		TAP_OK(dates[i].want == NULL ? rc == -1 : rc == 0 &&
		    strcmp(buf, dates[i].want) == 0, "IMF-fixdate of %lld: %s",
		    dates[i].t, dates[i].want ? dates[i].want : "refused");
	}
	TAP_OK(idem_imf_fixdate(0, buf, sizeof(buf) - 1) == -1,
	    "IMF-fixdate: a short buffer is refused");
	/* Twice over, backwards: the remembered last date never leaks. */
	for (i = sizeof(dates) / sizeof(dates[0]); i-- > 0;) {
		rc = idem_imf_fixdate(dates[i].t, buf, sizeof(buf));
		rc |= idem_imf_fixdate(dates[i].t, buf, sizeof(buf));
		TAP_OK(dates[i].want == NULL ? rc == -1 : rc == 0 &&
		    strcmp(buf, dates[i].want) == 0, "IMF-fixdate of %lld, "
		    "again: %s", dates[i].t, dates[i].want ? dates[i].want :
		    "refused");
	}
	return TAP_DONE();
}
