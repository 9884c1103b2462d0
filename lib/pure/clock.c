/*
 * clock.c - the one clock of the library for durations and deadlines:
 * monotonic, so that a wall-clock step cannot stretch or cut a deadline;
 * and HTTP dates.
 */
#include <stdio.h>
#include <string.h>
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

static char *
two_digits(char *o, int v)
{
	*o++ = (char)('0' + v / 10 % 10);
	*o++ = (char)('0' + v % 10);
	return o;
}

int
idem_imf_fixdate(long long t, char *out, size_t len)
{
	/* Not strftime(): %a and %b follow LC_TIME, HTTP wants English. */
	static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu",
	    "Fri", "Sat" };
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May",
	    "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	/* One request after another names the same second: keep the last. */
	static __thread long long	last_t = -1;
	static __thread char		last[IDEM_IMF_FIXDATE_LEN];
	struct tm			tm;
	time_t				tt = (time_t)t;
	char				*o = out;

	if (len < IDEM_IMF_FIXDATE_LEN || t < 0)
		return -1;
	if (t == last_t) {
		memcpy(out, last, IDEM_IMF_FIXDATE_LEN);
		return 0;
	}
	if (gmtime_r(&tt, &tm) == NULL || tm.tm_year + 1900 > 9999)
		return -1;
	/* "Sun, 06 Nov 1994 08:49:37 GMT", without printf. */
	memcpy(o, days[tm.tm_wday], 3);
	o += 3;
	*o++ = ',';
	*o++ = ' ';
	o = two_digits(o, tm.tm_mday);
	*o++ = ' ';
	memcpy(o, months[tm.tm_mon], 3);
	o += 3;
	*o++ = ' ';
	o = two_digits(o, (tm.tm_year + 1900) / 100);
	o = two_digits(o, (tm.tm_year + 1900) % 100);
	*o++ = ' ';
	o = two_digits(o, tm.tm_hour);
	*o++ = ':';
	o = two_digits(o, tm.tm_min);
	*o++ = ':';
	o = two_digits(o, tm.tm_sec);
	memcpy(o, " GMT", 5);
	memcpy(last, out, IDEM_IMF_FIXDATE_LEN);
	last_t = t;
	return 0;
}
