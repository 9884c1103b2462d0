/*
 * lease.h - what an owner may conclude about its own lease from its own
 * clock: until when a lease is surely still its own, given when the
 * statement that last took or renewed it was sent.  Pure functions (the
 * caller reads the clock) so that a table can test them.
 */
#ifndef IDEM_LEASE_H
#define IDEM_LEASE_H

/* Is a lease surely still ours at an instant? */
enum idem_lease_state {
	IDEM_LEASE_SURE = 0,	/* act on it */
	IDEM_LEASE_DOUBTFUL	/* stop: it may have lapsed, or be another's */
};

/*
 * The safety margin taken off a lease of lease_ms: a tenth of it, at
 * least IDEM_LEASE_MARGIN_MIN_MS.  It covers what the owner cannot see
 * from its clock: the database's clock running a little faster than
 * ours, and the time between a check that passed and the action it
 * allowed (a descheduled thread, an external call being cut).
 */
#define IDEM_LEASE_MARGIN_MIN_MS	500
long long	idem_lease_margin_ms(long long lease_ms);

/*
 * Until when (same clock as sent_us, microseconds) a lease of lease_ms
 * is surely held when the statement that took or renewed it was sent at
 * sent_us: the database set lease_until from its now() after that
 * instant, so lease_until is at least sent_us + lease; less the margin.
 * sent_us <= 0 (never took it): 0, i.e. never sure.
 */
long long	idem_lease_sure_until_us(long long sent_us, long long lease_ms);

/* Surely ours at now_us, when it is surely held until sure_until_us? */
enum idem_lease_state idem_lease_state_at(long long sure_until_us,
		    long long now_us);

/*
 * The heartbeat's bound on one attempt to renew (connecting included),
 * for a heartbeat of interval_ms: half of it, so that a renewal that hung
 * is given up and tried once more on a new session within the same beat,
 * long before the leases it renews are in doubt (at least 100 ms).
 */
long long	idem_lease_attempt_ms(long long interval_ms);

#endif /* IDEM_LEASE_H */
