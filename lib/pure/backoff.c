/*
 * backoff.c - the completer's retry schedule (exponential, capped, with
 * jitter) and when it stops retrying a record and asks for an operator;
 * eviction's pace (how long to pause after a batch).
 */
#include "config.h"	/* configure's switches: rebuilt when they change */
#include "backoff.h"

long long
idem_backoff_ms(long attempts, long long base_ms, long long max_ms,
    uint32_t rnd)
{
	long long	d, half;
	long		i;

	if (base_ms <= 0)
		return 0;
	if (max_ms < base_ms)
		max_ms = base_ms;
	d = base_ms;
	/* Doubling stops at the cap, so it cannot overflow. */
	for (i = 1; i < attempts && d < max_ms; i++)
		d = d > max_ms / 2 ? max_ms : d * 2;
	if (d > max_ms)
		d = max_ms;
	half = d / 2;
	return d - half + (long long)(rnd % (uint64_t)(half + 1));
}

enum idem_giveup
idem_giveup(int hopeless, long attempts, long max_attempts, long long age_ms,
    long long max_age_ms)
{
	if (hopeless)
		return IDEM_GIVEUP_HOPELESS;
	if (max_attempts > 0 && attempts >= max_attempts)
		return IDEM_GIVEUP_ATTEMPTS;
	if (max_age_ms > 0 && age_ms >= max_age_ms)
		return IDEM_GIVEUP_AGE;
	return IDEM_GIVEUP_RETRY;
}

const char *
idem_giveup_name(enum idem_giveup g)
{
	switch (g) {
	case IDEM_GIVEUP_RETRY:
		return "retry";
	case IDEM_GIVEUP_HOPELESS:
		return "hopeless";
	case IDEM_GIVEUP_ATTEMPTS:
		return "max_attempts";
	case IDEM_GIVEUP_AGE:
		return "max_age";
	}
	return "?";
}

int
idem_evict_duty(int duty, int backlog_left)
{
	if (!backlog_left || duty < IDEM_EVICT_DUTY_MIN)
		return IDEM_EVICT_DUTY_MIN;
	return duty > IDEM_EVICT_DUTY_MAX / 2 ? IDEM_EVICT_DUTY_MAX :
	    duty * 2;
}

long long
idem_evict_pause_us(long long batch_us, int duty)
{
	if (batch_us <= 0)
		return 0;
	if (duty < IDEM_EVICT_DUTY_MIN)
		duty = IDEM_EVICT_DUTY_MIN;
	if (duty > IDEM_EVICT_DUTY_MAX)
		duty = IDEM_EVICT_DUTY_MAX;
	/* batch / (batch + pause) = duty / 100 */
	return batch_us * (100 - duty) / duty;
}
