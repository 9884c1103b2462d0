/*
 * backoff.h - the completer's retry schedule and its give-up rule, and
 * eviction's pace, as pure functions (no clock, no randomness of their
 * own) so that a table can test them.
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

/*
 * Eviction's pace.  A backlog of expired keys is evicted in batches with a
 * pause after each, so that eviction takes duty percent of the time and
 * requests the rest.  The duty starts at IDEM_EVICT_DUTY_MIN; a janitor run
 * that ends with a backlog left doubles it, up to IDEM_EVICT_DUTY_MAX, so a
 * backlog that grows faster than the pace evicts it is met with more; a run
 * that clears the backlog sets it back.  At the least duty eviction still
 * deletes a quarter of its flat-out rate (tens of thousands of keys a
 * second here), far above any rate at which keys expire.
 */
#define IDEM_EVICT_DUTY_MIN	25	/* percent */
#define IDEM_EVICT_DUTY_MAX	75

/* The duty of the next run after a run at duty that left a backlog (1) or
 * did not (0). */
int		idem_evict_duty(int duty, int backlog_left);
/* The pause after a batch that took batch_us at duty percent. */
long long	idem_evict_pause_us(long long batch_us, int duty);

#endif
