/*
 * test_accept.c - what a listener does when accept() fails, when it polls
 * again, and how often it says so (lib/pure/accept.c), one table row per
 * case.
 */
#include <errno.h>
#include <string.h>

#include "accept.h"
#include "tap.h"

static const struct {
	int			 err;
	enum idem_accept_verdict want;
} errs[] = {
	{ EMFILE, IDEM_ACCEPT_FD_LIMIT },	/* RLIMIT_NOFILE */
	{ ENFILE, IDEM_ACCEPT_FD_LIMIT },	/* fs.file-max */
	{ ENOBUFS, IDEM_ACCEPT_FD_LIMIT },
	{ ENOMEM, IDEM_ACCEPT_FD_LIMIT },
	{ EAGAIN, IDEM_ACCEPT_RETRY },		/* another took it */
	{ EWOULDBLOCK, IDEM_ACCEPT_RETRY },
	{ EINTR, IDEM_ACCEPT_RETRY },
	{ ECONNABORTED, IDEM_ACCEPT_RETRY },	/* the peer left first */
	{ EPROTO, IDEM_ACCEPT_RETRY },
	{ EPERM, IDEM_ACCEPT_RETRY },		/* a firewall's rule */
	{ ENETDOWN, IDEM_ACCEPT_RETRY },
	{ EHOSTUNREACH, IDEM_ACCEPT_RETRY },
	{ ENETUNREACH, IDEM_ACCEPT_RETRY },
	{ EBADF, IDEM_ACCEPT_FAULT },		/* no listener: pause */
	{ EINVAL, IDEM_ACCEPT_FAULT },		/* not listening */
	{ ENOTSOCK, IDEM_ACCEPT_FAULT },
	{ EFAULT, IDEM_ACCEPT_FAULT },
	{ 0, IDEM_ACCEPT_FAULT },
};

static const struct {
	long long	 since, now, want;
} resumes[] = {
	{ 5000, 5000, 1000 },		/* just paused: the whole second */
	{ 5000, 5001, 999 },
	{ 5000, 5999, 1 },
	{ 5000, 6000, 0 },		/* due */
	{ 5000, 9000, 0 },		/* long overdue */
	{ 5000, 4000, 1000 },		/* a clock read before it: no more */
	{ 1, 1, 1000 },
};

/* Occurrences at these times (ms, 0-terminated after the first), and what
 * each note returns: the count a due line stands for, or 0. */
static const struct {
	const char	*name;
	long long	 at[8];
	unsigned long long want[8];
} logs[] = {
	{ "the first is said at once", { 1 }, { 1 } },
	{ "a burst: one line, then the count at the next second",
	    { 100, 101, 500, 1099, 1100, 1101 }, { 1, 0, 0, 0, 4, 0 } },
	{ "apart by a second or more: each said", { 0, 1000, 2500, 9000 },
	    { 1, 1, 1, 1 } },
	{ "a steady flood: one line a second",
	    { 10, 400, 800, 1010, 1400, 1800, 2009, 2010 },
	    { 1, 0, 0, 3, 0, 0, 0, 4 } },
	{ "a clock read out of order: said", { 5000, 4000, 4100 },
	    { 1, 1, 0 } },
};

int
main(void)
{
	struct idem_ratelog	 r;
	unsigned long long	 got;
	long long		 left;
	size_t			 i, j;
	int			 same;

	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		TAP_OK(idem_accept_failed(errs[i].err) == errs[i].want,
		    "accept failed with %s: verdict %d (got %d)",
		    errs[i].err ? strerror(errs[i].err) : "0", errs[i].want,
		    idem_accept_failed(errs[i].err));
	for (i = 0; i < sizeof(resumes) / sizeof(resumes[0]); i++) {
		left = idem_accept_resume_in(resumes[i].since, resumes[i].now);
		TAP_OK(left == resumes[i].want, "paused at %lld, at %lld: "
		    "polled again in %lld ms (got %lld)", resumes[i].since,
		    resumes[i].now, resumes[i].want, left);
	}
	for (i = 0; i < sizeof(logs) / sizeof(logs[0]); i++) {
		memset(&r, 0, sizeof(r));
		same = 1;
		for (j = 0; j < 8 && (j == 0 || logs[i].at[j] != 0); j++) {
			got = idem_ratelog_note(&r, logs[i].at[j]);
			if (got != logs[i].want[j]) {
				same = 0;
				printf("# at %lld: got %llu, want %llu\n",
				    logs[i].at[j], got, logs[i].want[j]);
			}
		}
		TAP_OK(same, "log: %s", logs[i].name);
	}
	return TAP_DONE();
}
