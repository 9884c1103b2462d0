/*
 * test_delivery.c - the dispatcher's decisions (lib/pure/delivery.c):
 * fair takes across tenants, Retry-After, disabling; one table row per
 * case.
 */
#include <string.h>

#include "delivery.h"
#include "tap.h"

static const struct {
	long	 concurrency, tenants, want;
} shares[] = {
	{ 8, 1, 4 },		/* alone: half, the other half kept free */
	{ 8, 2, 3 },
	{ 8, 3, 2 },
	{ 8, 7, 1 },
	{ 8, 100, 1 },		/* never 0 */
	{ 8, 0, 4 },		/* nobody yet: as one */
	{ 1, 1, 1 },
	{ 0, 1, 1 },
	{ 64, 1, 32 },
	{ 9, 2, 3 },
};

#define MAXC	12

static const struct {
	const char	*what;
	struct idem_candidate c[MAXC];	/* ends at tenant 0 */
	long long	 inflight[MAXC];	/* ends at 0 */
	long		 concurrency, free;
	long long	 after, want_after;
	const char	*want;		/* the indexes taken, in order */
} picks[] = {
	{ "one tenant alone: its share (4 of 8)",
	  { { 1, 1 }, { 1, 2 }, { 1, 3 }, { 1, 4 }, { 1, 5 }, { 1, 6 } },
	  { 0 }, 8, 8, 0, 1, "0123" },
	{ "a second tenant while the first holds 4: the second gets 3",
	  { { 2, 1 }, { 2, 2 }, { 2, 3 }, { 2, 4 }, { 1, 1 } },
	  { 1, 1, 1, 1 }, 8, 4, 1, 2, "012" },
	{ "two tenants: round-robin by rank",
	  { { 1, 1 }, { 1, 2 }, { 2, 1 }, { 2, 2 } },
	  { 0 }, 8, 8, 0, 2, "0213" },
	{ "round-robin starts after the last tenant served",
	  { { 1, 1 }, { 2, 1 }, { 3, 1 } },
	  { 0 }, 8, 1, 1, 2, "1" },
	{ "and wraps around",
	  { { 1, 1 }, { 2, 1 }, { 3, 1 } },
	  { 0 }, 8, 2, 3, 2, "01" },
	{ "no free slot: nothing",
	  { { 1, 1 } }, { 0 }, 8, 0, 5, 5, "" },
	{ "no candidate: nothing, after unchanged",
	  { { 0, 0 } }, { 0 }, 8, 8, 5, 5, "" },
	{ "a tenant over its share takes none, the others do",
	  { { 1, 1 }, { 2, 1 } }, { 1, 1, 1, 1, 1 }, 8, 3, 0, 2, "1" },
	{ "concurrency 1: one call in all",
	  { { 1, 1 }, { 2, 1 } }, { 0 }, 1, 1, 0, 1, "0" },
	{ "free bounds the take",
	  { { 1, 1 }, { 2, 1 }, { 3, 1 }, { 4, 1 } }, { 0 }, 64, 2, 0, 2,
	  "01" },
	{ "ranks given out of order are taken by rank",
	  { { 1, 3 }, { 1, 1 }, { 1, 2 } }, { 0 }, 8, 2, 0, 1, "12" },
};

static void
test_picks(void)
{
	size_t	i, k, n, nin, take[MAXC], got;
	char	s[MAXC + 1];

	for (i = 0; i < sizeof(picks) / sizeof(picks[0]); i++) {
		long long after = picks[i].after;

		for (n = 0; n < MAXC && picks[i].c[n].tenant != 0; n++)
			;
		for (nin = 0; nin < MAXC && picks[i].inflight[nin] != 0; nin++)
			;
		got = idem_fair_pick(picks[i].c, n, picks[i].inflight, nin,
		    picks[i].concurrency, picks[i].free, &after, take);
		for (k = 0; k < got; k++)
			s[k] = (char)('0' + take[k]);
		s[got] = '\0';
		TAP_STREQ(s, picks[i].want, "pick: %s", picks[i].what);
		TAP_OK(after == picks[i].want_after, "pick: %s: after %lld "
		    "(got %lld)", picks[i].what, picks[i].want_after, after);
	}
}

/* Sun, 06 Nov 1994 08:49:37 GMT */
#define T1994	784111777LL

static const struct {
	const char		*value;
	long long		 now;
	enum idem_retry_after	 want;
	long long		 ms;
} ras[] = {
	{ NULL, T1994, IDEM_RETRY_AFTER_NONE, 0 },
	{ "3", T1994, IDEM_RETRY_AFTER_DELAY, 3000 },
	{ "0", T1994, IDEM_RETRY_AFTER_DELAY, 0 },
	{ "120", T1994, IDEM_RETRY_AFTER_DELAY, 120000 },
	{ "99999999999999999999999", T1994, IDEM_RETRY_AFTER_DELAY,
	  IDEM_RETRY_AFTER_MAX_MS },				/* no overflow */
	{ "Sun, 06 Nov 1994 08:49:40 GMT", T1994, IDEM_RETRY_AFTER_DELAY,
	  3000 },						/* IMF-fixdate */
	{ "Sunday, 06-Nov-94 08:49:40 GMT", T1994, IDEM_RETRY_AFTER_DELAY,
	  3000 },						/* RFC 850 */
	{ "Sun Nov  6 08:49:40 1994", T1994, IDEM_RETRY_AFTER_DELAY, 3000 },
	{ "Sun Nov 16 08:49:37 1994", T1994, IDEM_RETRY_AFTER_DELAY,
	  864000000 },						/* asctime */
	{ "Sun, 06 Nov 1994 08:49:30 GMT", T1994, IDEM_RETRY_AFTER_DELAY,
	  0 },							/* past */
	{ "Tue, 29 Feb 2028 00:00:00 GMT", 1835395200LL - 60,
	  IDEM_RETRY_AFTER_DELAY, 60000 },			/* leap day */
	{ "Thu, 01 Jan 1970 00:00:00 GMT", T1994, IDEM_RETRY_AFTER_DELAY, 0 },
	/* RFC 850 years: at most 50 years ahead, else the century before */
	{ "Thursday, 01-Jan-26 00:00:10 GMT", 1767225600LL,
	  IDEM_RETRY_AFTER_DELAY, 10000 },
	{ "Friday, 01-Jan-44 00:00:00 GMT", 1767225600LL,
	  IDEM_RETRY_AFTER_DELAY, IDEM_RETRY_AFTER_MAX_MS },	/* 2044 */
	{ "Friday, 01-Jan-99 00:00:00 GMT", 1767225600LL,
	  IDEM_RETRY_AFTER_DELAY, 0 },				/* 1999 */
	{ "", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "-1", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "3 ", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "3.5", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "soon", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sun, 06 Nov 1994 08:49:40 UTC", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sun, 31 Nov 1994 08:49:40 GMT", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sun, 29 Feb 1900 08:49:40 GMT", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sun, 06 Nov 1994 24:00:00 GMT", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sun, 06 Nov 1994 08:49:40 GMT x", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sun, 6 Nov 1994 08:49:40 GMT", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sux, 06 Nov 1994 08:49:40 GMT", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sun Nov  6 08:49:40 1994 GMT", T1994, IDEM_RETRY_AFTER_BAD, 0 },
	{ "Sunday, 06 Nov 1994 08:49:40 GMT", T1994, IDEM_RETRY_AFTER_BAD,
	  0 },
};

static const struct {
	long long	 backoff, ra, max, want;
} delays[] = {
	{ 100, -1, 10000, 100 },	/* no Retry-After: the backoff */
	{ 100, 3000, 10000, 3000 },	/* no sooner than it says */
	{ 5000, 3000, 10000, 5000 },	/* the backoff when longer */
	{ 100, 3600000, 2000, 2000 },	/* capped at backoff_max */
	{ 100, 0, 10000, 100 },
};

static const struct {
	int				 status;
	long long			 failing, after;
	enum idem_endpoint_verdict	 want;
} verdicts[] = {
	{ 410, 0, 432000000, IDEM_ENDPOINT_GONE },
	{ 410, 0, 0, IDEM_ENDPOINT_GONE },
	{ 500, 0, 432000000, IDEM_ENDPOINT_KEEP },
	{ 500, 431999999, 432000000, IDEM_ENDPOINT_KEEP },
	{ 500, 432000000, 432000000, IDEM_ENDPOINT_FAILING },
	{ 0, 432000001, 432000000, IDEM_ENDPOINT_FAILING },
	{ 503, 1LL << 40, 0, IDEM_ENDPOINT_KEEP },	/* 0: never */
	{ 404, 10, 5, IDEM_ENDPOINT_FAILING },
};

int
main(void)
{
	size_t		i;
	long long	ms;

	for (i = 0; i < sizeof(shares) / sizeof(shares[0]); i++)
		TAP_OK(idem_fair_share(shares[i].concurrency,
		    shares[i].tenants) == shares[i].want, "share of %ld with "
		    "%ld tenants: %ld", shares[i].concurrency,
		    shares[i].tenants, shares[i].want);
	test_picks();
	for (i = 0; i < sizeof(ras) / sizeof(ras[0]); i++) {
		enum idem_retry_after r = idem_retry_after_parse(ras[i].value,
		    ras[i].now, &ms);

		TAP_OK(r == ras[i].want && ms == ras[i].ms, "Retry-After "
		    "\"%s\": %d, %lld ms (got %d, %lld)", ras[i].value ?
		    ras[i].value : "(none)", ras[i].want, ras[i].ms, r, ms);
	}
	for (i = 0; i < sizeof(delays) / sizeof(delays[0]); i++)
		TAP_OK(idem_retry_delay_ms(delays[i].backoff, delays[i].ra,
		    delays[i].max) == delays[i].want, "delay: backoff %lld, "
		    "Retry-After %lld, max %lld: %lld", delays[i].backoff,
		    delays[i].ra, delays[i].max, delays[i].want);
	for (i = 0; i < sizeof(verdicts) / sizeof(verdicts[0]); i++)
		TAP_OK(idem_endpoint_verdict(verdicts[i].status,
		    verdicts[i].failing, verdicts[i].after) == verdicts[i].want,
		    "endpoint: status %d failing %lld ms, disable_after %lld: "
		    "%s", verdicts[i].status, verdicts[i].failing,
		    verdicts[i].after, idem_endpoint_verdict_name(
		    verdicts[i].want) ? idem_endpoint_verdict_name(
		    verdicts[i].want) : "keep");
	return TAP_DONE();
}
