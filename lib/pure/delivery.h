/*
 * delivery.h - the dispatcher's decisions (dispatcher.c) as pure
 * functions, so that tables test them (tests/unit/test_delivery.c): which
 * due deliveries to take next across tenants, when to try again after a
 * receiver's Retry-After, and whether an endpoint is to be disabled.
 */
#ifndef IDEM_DELIVERY_H
#define IDEM_DELIVERY_H

#include <stddef.h>

/* A due delivery the dispatcher may take: its tenant (api_key_id) and
 * its rank among that tenant's candidates (1: the one due first). */
struct idem_candidate {
	long long	 tenant;
	long		 rank;
};

/*
 * A tenant's share of the concurrency calls a dispatcher has in flight
 * when tenants tenants have work (calls in flight or deliveries due): an
 * equal part for each, and one part more kept free for a tenant whose
 * work arrives next, so that it finds a free slot at once even while the
 * others' endpoints hold theirs until the timeout.  At least 1.
 */
long		 idem_fair_share(long concurrency, long tenants);

/* The most candidates one pick looks at (the rest are ignored). */
#define IDEM_FAIR_MAX	256

/*
 * Which candidates to take, round-robin across tenants: by rank, then by
 * tenant in the order after *after (the last tenant served, wrapping
 * around), each tenant only while its calls in flight are below its
 * share, up to free.  inflight[ninflight]: the tenant of each call in
 * flight.  The indexes of the ones taken go to take[] in the order taken;
 * *after becomes the last tenant taken.  Returns how many.
 */
size_t		 idem_fair_pick(const struct idem_candidate *c, size_t n,
		    const long long *inflight, size_t ninflight,
		    long concurrency, long free, long long *after,
		    size_t *take);

/* What a Retry-After header value says. */
enum idem_retry_after {
	IDEM_RETRY_AFTER_NONE = 0,	/* NULL: no header */
	IDEM_RETRY_AFTER_DELAY,		/* delay-seconds or an HTTP-date */
	IDEM_RETRY_AFTER_BAD		/* neither: ignored */
};

/*
 * Parse a Retry-After value (RFC 9110 10.2.3): delay-seconds (digits) or
 * an HTTP-date in any of its three forms (IMF-fixdate, RFC 850, asctime),
 * at now_s (Unix seconds).  *ms: the milliseconds to wait, 0 for a date
 * past; at most IDEM_RETRY_AFTER_MAX_MS.
 */
#define IDEM_RETRY_AFTER_MAX_MS	(366LL * 86400 * 1000)
enum idem_retry_after idem_retry_after_parse(const char *value,
		    long long now_s, long long *ms);

/*
 * The delay before the next attempt: the backoff, or the receiver's
 * retry_after_ms (< 0: none) when longer, capped at max_ms.
 */
long long	 idem_retry_delay_ms(long long backoff_ms,
		    long long retry_after_ms, long long max_ms);

/* What becomes of an endpoint after one attempt that failed. */
enum idem_endpoint_verdict {
	IDEM_ENDPOINT_KEEP = 0,		/* still enabled */
	IDEM_ENDPOINT_GONE,		/* answered 410 Gone: disabled */
	IDEM_ENDPOINT_FAILING		/* failing for disable_after */
};

/*
 * status: the answer's HTTP status (0: none); failing_ms: since the first
 * failure after its last success (this one included: 0 when it is that
 * first one); disable_after_ms <= 0: never for failing.
 */
enum idem_endpoint_verdict idem_endpoint_verdict(int status,
		    long long failing_ms, long long disable_after_ms);
/* The reason stored and counted: "gone", "failing" (NULL for KEEP). */
const char	*idem_endpoint_verdict_name(enum idem_endpoint_verdict v);

#endif /* IDEM_DELIVERY_H */
