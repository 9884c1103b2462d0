/*
 * clockstep.c - an LD_PRELOAD shim that steps a process's wall clock the
 * way settimeofday(2) would, and nothing else: CLOCK_REALTIME (and its
 * coarse variant), gettimeofday(2) and time(2) are offset by the number
 * of seconds in the file named by $CLOCKSTEP_FILE (read again every
 * 20 ms); CLOCK_MONOTONIC and every other clock pass through untouched.
 * Built and used by leases.py's clock check.  libfaketime is not used
 * because its pthread_cond_timedwait wrapper breaks condition variables
 * on CLOCK_MONOTONIC when it leaves that clock alone (they time out at
 * once), which is not what a real step does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static long long	offset_s;	/* the step now in force */
static long long	read_at_ns;	/* monotonic time of the last read */

static clock_gettime_fn
real_clock_gettime(void)
{
	static clock_gettime_fn	fn;

	if (fn == NULL)
		fn = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	return fn;
}

/* The offset, from the file at most every 20 ms; racy reads are fine:
 * any thread sees an old or a new step, as after a real one. */
static long long
step(void)
{
	struct timespec	 now;
	const char	*path;
	char		 buf[32];
	long long	 t;
	ssize_t		 n;
	int		 fd;

	if (real_clock_gettime()(CLOCK_MONOTONIC, &now) != 0)
		return __atomic_load_n(&offset_s, __ATOMIC_RELAXED);
	t = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
	if (t - __atomic_load_n(&read_at_ns, __ATOMIC_RELAXED) < 20000000LL)
		return __atomic_load_n(&offset_s, __ATOMIC_RELAXED);
	__atomic_store_n(&read_at_ns, t, __ATOMIC_RELAXED);
	if ((path = getenv("CLOCKSTEP_FILE")) != NULL &&
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			__atomic_store_n(&offset_s, strtoll(buf, NULL, 10),
			    __ATOMIC_RELAXED);
		}
	}
	return __atomic_load_n(&offset_s, __ATOMIC_RELAXED);
}

int
clock_gettime(clockid_t clk, struct timespec *ts)
{
	int	rc;

	rc = real_clock_gettime()(clk, ts);
	if (rc == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE))
		ts->tv_sec += step();
	return rc;
}

int
gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec	ts;

	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t
time(time_t *out)
{
	struct timespec	ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return (time_t)-1;
	if (out != NULL)
		*out = ts.tv_sec;
	return ts.tv_sec;
}
