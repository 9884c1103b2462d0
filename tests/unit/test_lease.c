/*
 * test_lease.c - until when an owner may act on its lease
 * (lib/pure/lease.c), one table row per case.
 */
#include "lease.h"
#include "tap.h"

static const struct {
	long long	 lease_ms, want;
} margins[] = {
	{ 3000, 500 },			/* the floor: lease/10 is 300 */
	{ 5000, 500 },
	{ 5001, 500 },
	{ 5010, 501 },
	{ 10000, 1000 },		/* the default lease */
	{ 60000, 6000 },
	{ 0, 500 },
};

static const struct {
	long long	 sent_us, lease_ms, want;
} untils[] = {
	{ 1000000, 3000, 3500000 },	/* sent at 1 s, 2.5 s sure */
	{ 1000000, 10000, 10000000 },	/* 9 s sure */
	{ 7, 3000, 2500007 },
	{ 0, 3000, 0 },			/* never taken: never sure */
	{ -5, 3000, 0 },
	{ 1000000, 500, 0 },		/* no lease left after the margin */
	{ 1000000, 400, 0 },
	{ 1000000, 501, 1001000 },
};

static const struct {
	long long		 until_us, now_us;
	enum idem_lease_state	 want;
} states[] = {
	{ 3500000, 0, IDEM_LEASE_SURE },
	{ 3500000, 3499999, IDEM_LEASE_SURE },
	{ 3500000, 3500000, IDEM_LEASE_DOUBTFUL },	/* the instant itself */
	{ 3500000, 3500001, IDEM_LEASE_DOUBTFUL },
	{ 0, 1, IDEM_LEASE_DOUBTFUL },			/* never sure */
	{ 0, 0, IDEM_LEASE_DOUBTFUL },
};

static const struct {
	long long	 interval_ms, want;
} attempts[] = {
	{ 1000, 500 },			/* lease 3 s */
	{ 3333, 1666 },			/* the default lease */
	{ 150, 100 },			/* the floor */
	{ 1, 100 },
};

int
main(void)
{
	size_t	i;

	for (i = 0; i < sizeof(margins) / sizeof(margins[0]); i++)
		TAP_OK(idem_lease_margin_ms(margins[i].lease_ms) == margins[i].want,
		    "margin of a %lld ms lease is %lld ms", margins[i].lease_ms,
		    margins[i].want);
	for (i = 0; i < sizeof(untils) / sizeof(untils[0]); i++)
		TAP_OK(idem_lease_sure_until_us(untils[i].sent_us,
		    untils[i].lease_ms) == untils[i].want,
		    "sent at %lld us, lease %lld ms: sure until %lld us",
		    untils[i].sent_us, untils[i].lease_ms, untils[i].want);
	for (i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		TAP_OK(idem_lease_state_at(states[i].until_us, states[i].now_us) ==
		    states[i].want, "sure until %lld us, at %lld us: %s",
		    states[i].until_us, states[i].now_us,
		    states[i].want == IDEM_LEASE_SURE ? "sure" : "doubtful");
	for (i = 0; i < sizeof(attempts) / sizeof(attempts[0]); i++)
		TAP_OK(idem_lease_attempt_ms(attempts[i].interval_ms) ==
		    attempts[i].want, "a renewal attempt of a %lld ms "
		    "heartbeat is bounded by %lld ms", attempts[i].interval_ms,
		    attempts[i].want);
	return TAP_DONE();
}
