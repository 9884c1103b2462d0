/*
 * heartbeat.h - a per-process thread that keeps the leases of the phased
 * requests this process runs alive, one statement per interval for all of
 * them (idem_renew(), sql/008), on a connection of its own.
 */
#ifndef IDEM_HEARTBEAT_H
#define IDEM_HEARTBEAT_H

#include <stdint.h>

struct idem_heartbeat;

/* Slots beyond one per worker: the janitor's completer runs requests. */
#define IDEM_HEARTBEAT_SPARE	4

/* Start the thread: every interval_ms, renew the leases registered.
 * NULL on failure (logged).  slots: how many requests may hold one. */
struct idem_heartbeat *idem_heartbeat_start(idem_app *app,
	    long long interval_ms, unsigned slots);
/* Stop and join it, then free it (NULL: nothing). */
void	idem_heartbeat_stop(struct idem_heartbeat *hb);

/*
 * Keep record id's lease (token, lease_ms long) alive until until_us
 * (idem_now_us()'s clock: the request's deadline), after which it is left
 * to lapse.  Returns a handle > 0, or 0 when hb is NULL or full (the lease
 * is then renewed only at phase boundaries).
 */
int	idem_heartbeat_add(struct idem_heartbeat *hb, int64_t id,
	    const char *token, long long lease_ms, long long until_us);
/* Move a handle's end (a new phase has its own deadline). */
void	idem_heartbeat_until(struct idem_heartbeat *hb, int h,
	    long long until_us);
/* When (idem_now_us()'s clock) the last renewal that renewed handle h's
 * lease was sent; 0: none yet (or h 0). */
long long idem_heartbeat_renewed_us(struct idem_heartbeat *hb, int h);
/* Leases renewed, and not renewed (a database error, or no longer
 * held), and renewal attempts that failed or were given up at their
 * deadline, since the start (hb NULL: 0, 0, 0).  For metrics.c. */
void	idem_heartbeat_counts(struct idem_heartbeat *hb,
	    unsigned long long *renewed, unsigned long long *lost,
	    unsigned long long *failed);
/* Stop renewing it (h 0: nothing). */
void	idem_heartbeat_remove(struct idem_heartbeat *hb, int h);

/*
 * Pure: the interval of a heartbeat for leases of lease_ms at the
 * shortest: a third of it, so that two renewals may be lost (or late) and
 * the lease still held.
 */
long long idem_heartbeat_interval(long long lease_ms);

#endif /* IDEM_HEARTBEAT_H */
