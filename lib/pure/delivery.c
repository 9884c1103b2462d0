/*
 * delivery.c - the dispatcher's decisions: fair takes across tenants,
 * Retry-After, and when an endpoint is disabled (delivery.h).
 */
#include "config.h"	/* configure's switches: rebuilt when they change */
#include "delivery.h"

#include <string.h>

long
idem_fair_share(long concurrency, long tenants)
{
	long	parts;

	if (concurrency < 1)
		return 1;
	parts = (tenants < 1 ? 1 : tenants) + 1;
	return (concurrency + parts - 1) / parts;
}

/* Where tenant t comes in the round after the last tenant served. */
static int
rr_before(long long a, long long b, long long after)
{
	int	wa = a <= after, wb = b <= after;

	return wa != wb ? wa < wb : a < b;
}

/* Does candidate x come before y: by rank, then round-robin. */
static int
cand_before(const struct idem_candidate *x, const struct idem_candidate *y,
    long long after)
{
	if (x->rank != y->rank)
		return x->rank < y->rank;
	return x->tenant != y->tenant && rr_before(x->tenant, y->tenant, after);
}

/* Tenants with work: those of the calls in flight and of the candidates. */
static long
tenants_with_work(const struct idem_candidate *c, size_t n,
    const long long *inflight, size_t ninflight)
{
	size_t	i, j, k = 0;
	long	count = 0;

	for (i = 0; i < ninflight + n; i++) {
		long long t = i < ninflight ? inflight[i] : c[i - ninflight].tenant;

		for (j = 0, k = 0; j < i && !k; j++)
			k = (j < ninflight ? inflight[j] :
			    c[j - ninflight].tenant) == t;
		count += !k;
	}
	return count;
}

/* Calls of tenant t in flight, and taken so far in this pick. */
static long
held(long long t, const long long *inflight, size_t ninflight,
    const struct idem_candidate *c, const size_t *take, size_t ntake)
{
	size_t	i;
	long	h = 0;

	for (i = 0; i < ninflight; i++)
		h += inflight[i] == t;
	for (i = 0; i < ntake; i++)
		h += c[take[i]].tenant == t;
	return h;
}

size_t
idem_fair_pick(const struct idem_candidate *c, size_t n,
    const long long *inflight, size_t ninflight, long concurrency,
    long free, long long *after, size_t *take)
{
	size_t	 i, j, ntake = 0, best;
	long	 share;
	char	 seen[IDEM_FAIR_MAX];

	if (n > IDEM_FAIR_MAX)
		n = IDEM_FAIR_MAX;
	if (free <= 0 || n == 0)
		return 0;
	share = idem_fair_share(concurrency,
	    tenants_with_work(c, n, inflight, ninflight));
	memset(seen, 0, sizeof(seen));
	/* The next in order each time (n is small: a take's candidates). */
	for (i = 0; i < n && (long)ntake < free; i++) {
		for (best = n, j = 0; j < n; j++)
			if (!seen[j] && (best == n ||
			    cand_before(&c[j], &c[best], *after)))
				best = j;
		seen[best] = 1;
		if (held(c[best].tenant, inflight, ninflight, c, take, ntake) >=
		    share)
			continue;
		take[ntake++] = best;
	}
	if (ntake > 0)
		*after = c[take[ntake - 1]].tenant;
	return ntake;
}

/* --- Retry-After ----------------------------------------------------------- */

static const char *const months[12] = { "Jan", "Feb", "Mar", "Apr", "May",
	"Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
static const char *const wkdays[7] = { "Mon", "Tue", "Wed", "Thu", "Fri",
	"Sat", "Sun" };
static const char *const longdays[7] = { "Monday", "Tuesday", "Wednesday",
	"Thursday", "Friday", "Saturday", "Sunday" };

/* n digits at *p into *v (advancing *p): 0, or -1. */
static int
digits(const char **p, int n, int *v)
{
	for (*v = 0; n > 0; n--, (*p)++) {
		if (**p < '0' || **p > '9')
			return -1;
		*v = *v * 10 + (**p - '0');
	}
	return 0;
}

/* The literal s at *p (advancing): 0, or -1. */
static int
lit(const char **p, const char *s)
{
	size_t	n = strlen(s);

	if (strncmp(*p, s, n) != 0)
		return -1;
	*p += n;
	return 0;
}

/* One of names[count] at *p (advancing): its index, or -1. */
static int
name_of(const char **p, const char *const *names, int count)
{
	int	i;

	for (i = 0; i < count; i++)
		if (lit(p, names[i]) == 0)
			return i;
	return -1;
}

/* "HH:MM:SS" into seconds of the day: 0, or -1. */
static int
time_of_day(const char **p, long *secs)
{
	int	h, m, s;

	if (digits(p, 2, &h) == -1 || lit(p, ":") == -1 ||
	    digits(p, 2, &m) == -1 || lit(p, ":") == -1 ||
	    digits(p, 2, &s) == -1 || h > 23 || m > 59 || s > 60)
		return -1;
	*secs = h * 3600L + m * 60L + s;
	return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian), -1 if no such
 * date (m 1 to 12). */
static int
civil_days(int y, int m, int d, long long *out)
{
	static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30,
		31, 30, 31 };
	int	leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	long long era, yoe, doy, doe, yy = m <= 2 ? y - 1 : y;

	if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1] + (m == 2 && leap))
		return -1;
	era = (yy >= 0 ? yy : yy - 399) / 400;
	yoe = yy - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	*out = era * 146097 + doe - 719468;
	return 0;
}

/* An HTTP-date in Unix seconds: 0, or -1.  now_s places an RFC 850
 * two-digit year (no more than 50 years ahead). */
static int
http_date(const char *p, long long now_s, long long *t)
{
	const char	*start = p;
	int		 d, m, y, y2;
	long		 secs;
	long long	 ndays;

	if (name_of(&p, wkdays, 7) != -1 && lit(&p, ", ") == 0) {
		/* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
		if (digits(&p, 2, &d) == -1 || lit(&p, " ") == -1 ||
		    (m = name_of(&p, months, 12)) == -1 || lit(&p, " ") == -1 ||
		    digits(&p, 4, &y) == -1 || lit(&p, " ") == -1)
			return -1;
	} else if ((p = start, name_of(&p, wkdays, 7) != -1) &&
	    lit(&p, " ") == 0) {
		/* asctime: Sun Nov  6 08:49:37 1994 */
		if ((m = name_of(&p, months, 12)) == -1 || lit(&p, " ") == -1)
			return -1;
		if (*p == ' ') {
			p++;
			if (digits(&p, 1, &d) == -1)
				return -1;
		} else if (digits(&p, 2, &d) == -1)
			return -1;
		if (lit(&p, " ") == -1 || time_of_day(&p, &secs) == -1 ||
		    lit(&p, " ") == -1 || digits(&p, 4, &y) == -1 || *p != '\0')
			return -1;
		goto date;
	} else if ((p = start, name_of(&p, longdays, 7) != -1) &&
	    lit(&p, ", ") == 0) {
		/* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
		if (digits(&p, 2, &d) == -1 || lit(&p, "-") == -1 ||
		    (m = name_of(&p, months, 12)) == -1 || lit(&p, "-") == -1 ||
		    digits(&p, 2, &y2) == -1 || lit(&p, " ") == -1)
			return -1;
		/* The century that puts it at most 50 years ahead. */
		y = (int)((now_s / 31556952 + 1970) / 100 * 100) + y2;
		if ((long long)y > now_s / 31556952 + 1970 + 50)
			y -= 100;
	} else
		return -1;
	if (time_of_day(&p, &secs) == -1 || lit(&p, " GMT") == -1 ||
	    *p != '\0')
		return -1;
date:
	if (civil_days(y, m + 1, d, &ndays) == -1)
		return -1;
	*t = ndays * 86400 + secs;
	return 0;
}

enum idem_retry_after
idem_retry_after_parse(const char *value, long long now_s, long long *ms)
{
	const char	*p;
	long long	 s = 0, t;

	*ms = 0;
	if (value == NULL)
		return IDEM_RETRY_AFTER_NONE;
	if (*value >= '0' && *value <= '9') {
		for (p = value; *p >= '0' && *p <= '9'; p++)
			if (s <= IDEM_RETRY_AFTER_MAX_MS / 1000)
				s = s * 10 + (*p - '0');
		if (*p != '\0')
			return IDEM_RETRY_AFTER_BAD;
		*ms = s * 1000;
	} else if (http_date(value, now_s, &t) == 0)
		*ms = t > now_s ? (t - now_s) * 1000 : 0;
	else
		return IDEM_RETRY_AFTER_BAD;
	if (*ms > IDEM_RETRY_AFTER_MAX_MS)
		*ms = IDEM_RETRY_AFTER_MAX_MS;
	return IDEM_RETRY_AFTER_DELAY;
}

long long
idem_retry_delay_ms(long long backoff_ms, long long retry_after_ms,
    long long max_ms)
{
	long long	d = retry_after_ms > backoff_ms ? retry_after_ms :
			    backoff_ms;

	return max_ms > 0 && d > max_ms ? max_ms : d;
}

/* --- disabling ------------------------------------------------------------- */

enum idem_endpoint_verdict
idem_endpoint_verdict(int status, long long failing_ms,
    long long disable_after_ms)
{
	if (status == 410)
		return IDEM_ENDPOINT_GONE;
	return disable_after_ms > 0 && failing_ms >= disable_after_ms ?
	    IDEM_ENDPOINT_FAILING : IDEM_ENDPOINT_KEEP;
}

const char *
idem_endpoint_verdict_name(enum idem_endpoint_verdict v)
{
	return v == IDEM_ENDPOINT_GONE ? "gone" :
	    v == IDEM_ENDPOINT_FAILING ? "failing" : NULL;
}
