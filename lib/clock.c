/*
 * clock.c - the one clock of the library for durations and deadlines:
 * monotonic, so that a wall-clock step cannot stretch or cut a deadline;
 * and HTTP dates.
 */
#include <stdio.h>
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

int
idem_imf_fixdate(long long t, char *out, size_t len)
{
	/* Not strftime(): %a and %b follow LC_TIME, HTTP wants English. */
	static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu",
	    "Fri", "Sat" };
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May",
	    "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	struct tm	tm;
	time_t		tt = (time_t)t;

	if (len < IDEM_IMF_FIXDATE_LEN || t < 0 || gmtime_r(&tt, &tm) == NULL ||
	    tm.tm_year + 1900 > 9999)
		return -1;
	snprintf(out, len, "%s, %02d %s %04d %02d:%02d:%02d GMT",
	    days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
	    tm.tm_hour, tm.tm_min, tm.tm_sec);
	return 0;
}
