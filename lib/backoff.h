/*
 * backoff.h - the completer's retry schedule and its give-up rule, as pure
 * functions (no clock, no randomness of their own) so that a table can
 * test them.
 */
#ifndef IDEM_BACKOFF_H
#define IDEM_BACKOFF_H

#include <stdint.h>

/*
 * The delay before attempt number attempts + 1 of a record that failed
 * attempts times (attempts >= 1): base_ms doubled per earlier failure,
 * capped at max_ms, with "equal jitter": half of it fixed, the other half
 * chosen by rnd (any 32-bit value), so that records failing together do
 * not come back together.  The result is in [d/2, d] where d is the capped
 * delay; 0 when base_ms <= 0.
 */
long long	idem_backoff_ms(long attempts, long long base_ms,
		    long long max_ms, uint32_t rnd);

/* What becomes of a record the completer could not complete. */
enum idem_giveup {
	IDEM_GIVEUP_RETRY = 0,		/* again after the backoff */
	IDEM_GIVEUP_HOPELESS,		/* cannot succeed (tenant, route) */
	IDEM_GIVEUP_ATTEMPTS,		/* max_attempts reached */
	IDEM_GIVEUP_AGE			/* older than max_age */
};

/*
 * hopeless: the failure cannot go away by itself; attempts: made so far
 * (this one included); age_ms: since the record was created.  A limit <= 0
 * is no limit.
 */
enum idem_giveup idem_giveup(int hopeless, long attempts, long max_attempts,
		    long long age_ms, long long max_age_ms);

/* A short word for each, as stored and shown ("retry", "hopeless", ...). */
const char	*idem_giveup_name(enum idem_giveup g);

#endif
