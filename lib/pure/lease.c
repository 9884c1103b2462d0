/*
 * lease.c - until when an owner may act on its lease, from the instants
 * its claims and renewals were sent (lease.h).
 */
#include "config.h"	/* configure's switches: rebuilt when they change */
#include "lease.h"

long long
idem_lease_margin_ms(long long lease_ms)
{
	long long	m = lease_ms / 10;

	return m < IDEM_LEASE_MARGIN_MIN_MS ? IDEM_LEASE_MARGIN_MIN_MS : m;
}

long long
idem_lease_sure_until_us(long long sent_us, long long lease_ms)
{
	long long	left_ms = lease_ms - idem_lease_margin_ms(lease_ms);

	if (sent_us <= 0 || left_ms <= 0)
		return 0;
	return sent_us + left_ms * 1000;
}

enum idem_lease_state
idem_lease_state_at(long long sure_until_us, long long now_us)
{
	/* At the instant itself it may be gone: strictly before only. */
	return now_us < sure_until_us ? IDEM_LEASE_SURE : IDEM_LEASE_DOUBTFUL;
}

long long
idem_lease_attempt_ms(long long interval_ms)
{
	long long	a = interval_ms / 2;

	return a < 100 ? 100 : a;
}
