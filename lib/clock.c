/*
 * clock.c - the one clock of the library for durations and deadlines:
 * monotonic, so that a wall-clock step cannot stretch or cut a deadline.
 */
#include <time.h>

#include "internal.h"

long long
idem_now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
idem_deadline(clockid_t clk, long long ms, struct timespec *ts)
{
	clock_gettime(clk, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}
