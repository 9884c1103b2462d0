/*
 * test_backoff.c - the completer's retry schedule and give-up rule
 * (lib/pure/backoff.c), one table row per case.
 */
#include "backoff.h"
#include "tap.h"

static const struct {
	long		 attempts;
	long long	 base, max;
	uint32_t	 rnd;
	long long	 want;
} delays[] = {
	/* rnd 0: the fixed half only; rnd ~0 / half+1 boundaries */
	{ 1, 10000, 600000, 0, 5000 },
	{ 1, 10000, 600000, 5000, 10000 },
	{ 1, 10000, 600000, 5001, 5000 },		/* wraps: 5001 % 5001 */
	{ 2, 10000, 600000, 0, 10000 },
	{ 3, 10000, 600000, 0, 20000 },
	{ 4, 10000, 600000, 7, 40007 },
	{ 6, 10000, 600000, 0, 160000 },
	{ 7, 10000, 600000, 0, 300000 },		/* 640 s capped: 600 */
	{ 7, 10000, 600000, 300000, 600000 },
	{ 1000, 10000, 600000, 0, 300000 },		/* no overflow */
	{ 2147483647L, 10000, 600000, 1, 300001 },
	{ 1, 0, 600000, 12345, 0 },			/* no backoff */
	{ 3, 1000, 500, 0, 500 },			/* cap below base */
	{ 1, 1, 1, 0, 1 },
	{ 1, 1, 1, 0xffffffffu, 1 },
	{ 0, 10000, 600000, 0, 5000 },			/* as the first */
};

static const struct {
	int		 hopeless;
	long		 attempts, max_attempts;
	long long	 age, max_age;
	enum idem_giveup want;
} giveups[] = {
	{ 0, 1, 10, 1000, 86400000, IDEM_GIVEUP_RETRY },
	{ 1, 1, 10, 1000, 86400000, IDEM_GIVEUP_HOPELESS },
	{ 0, 9, 10, 1000, 86400000, IDEM_GIVEUP_RETRY },
	{ 0, 10, 10, 1000, 86400000, IDEM_GIVEUP_ATTEMPTS },
	{ 0, 11, 10, 1000, 86400000, IDEM_GIVEUP_ATTEMPTS },
	{ 0, 1, 10, 86399999, 86400000, IDEM_GIVEUP_RETRY },
	{ 0, 1, 10, 86400000, 86400000, IDEM_GIVEUP_AGE },
	{ 0, 10, 10, 86400000, 86400000, IDEM_GIVEUP_ATTEMPTS },
	{ 1, 10, 10, 86400000, 86400000, IDEM_GIVEUP_HOPELESS },
	{ 0, 1000, 0, 1LL << 40, 0, IDEM_GIVEUP_RETRY },	/* no limits */
};

static const struct {
	int	 duty, backlog, want;
} duties[] = {
	{ 25, 0, 25 },
	{ 25, 1, 50 },
	{ 50, 1, 75 },
	{ 75, 1, 75 },		/* the ceiling */
	{ 37, 1, 74 },
	{ 38, 1, 75 },
	{ 75, 0, 25 },		/* a cleared backlog starts over */
	{ 0, 1, 25 },		/* out of range: the floor */
	{ -5, 0, 25 },
};

static const struct {
	long long	 batch_us;
	int		 duty;
	long long	 want;
} pauses[] = {
	{ 176000, 25, 528000 },	/* a 10,000-key batch here: 3 x its time */
	{ 176000, 50, 176000 },
	{ 176000, 75, 58666 },
	{ 18000, 25, 54000 },
	{ 0, 25, 0 },
	{ -1, 25, 0 },
	{ 1000, 10, 3000 },	/* below the floor: as 25 */
	{ 1000, 100, 333 },	/* above the ceiling: as 75 */
};

int
main(void)
{
	long long	got;
	size_t		i;

	for (i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
		got = idem_backoff_ms(delays[i].attempts, delays[i].base,
		    delays[i].max, delays[i].rnd);
		TAP_OK(got == delays[i].want, "backoff after %ld failures, "
		    "base %lld, cap %lld, rnd %u: %lld ms (got %lld)",
		    delays[i].attempts, delays[i].base, delays[i].max,
		    (unsigned)delays[i].rnd, delays[i].want, got);
	}
	for (i = 0; i < sizeof(giveups) / sizeof(giveups[0]); i++) {
		enum idem_giveup g = idem_giveup(giveups[i].hopeless,
		    giveups[i].attempts, giveups[i].max_attempts,
		    giveups[i].age, giveups[i].max_age);
		TAP_OK(g == giveups[i].want, "hopeless %d, %ld/%ld attempts, "
		    "age %lld/%lld ms: %s (got %s)", giveups[i].hopeless,
		    giveups[i].attempts, giveups[i].max_attempts,
		    giveups[i].age, giveups[i].max_age,
		    idem_giveup_name(giveups[i].want), idem_giveup_name(g));
	}
	for (i = 0; i < sizeof(duties) / sizeof(duties[0]); i++)
		TAP_OK(idem_evict_duty(duties[i].duty, duties[i].backlog) ==
		    duties[i].want, "eviction duty %d%%, backlog %s: next %d%%",
		    duties[i].duty, duties[i].backlog ? "left" : "cleared",
		    duties[i].want);
	for (i = 0; i < sizeof(pauses) / sizeof(pauses[0]); i++) {
		got = idem_evict_pause_us(pauses[i].batch_us, pauses[i].duty);
		TAP_OK(got == pauses[i].want, "a batch of %lld us at %d%%: "
		    "pause %lld us (got %lld)", pauses[i].batch_us,
		    pauses[i].duty, pauses[i].want, got);
	}
	TAP_OK(idem_backoff_ms(3, 10000, 600000, 123456789u) >= 20000 &&
	    idem_backoff_ms(3, 10000, 600000, 123456789u) <= 40000,
	    "the jittered delay is within [d/2, d]");
	return TAP_DONE();
}
