/*
 * accept.h - what a listener does when accept() fails, and how often it
 * says so: pure decisions (an errno and clock readings in, a verdict out)
 * behind the FastCGI listener (runtime/listener.c) and the [metrics]
 * listener (metrics.c).
 *
 * A listener out of descriptors (or kernel memory) stops being polled
 * rather than being polled again at once: the connection stays readable in
 * the backlog, so polling again would wake a thread for nothing, for ever.
 * It is polled again when a descriptor is freed, and at the latest
 * IDEM_ACCEPT_RETRY_MS later (descriptors are freed elsewhere too: a
 * database connection, another process for ENFILE).
 */
#ifndef IDEM_ACCEPT_H
#define IDEM_ACCEPT_H

/* A paused listener is polled again this long after it paused, at the
 * latest; and a log line about it is written this often, at most. */
#define IDEM_ACCEPT_RETRY_MS	1000

enum idem_accept_verdict {
	IDEM_ACCEPT_RETRY = 0,	/* nothing (left) to take, or that peer left
				 * first: poll on */
	IDEM_ACCEPT_FD_LIMIT,	/* no descriptor or memory for it: pause,
				 * counted {reason="fd_limit"} */
	IDEM_ACCEPT_FAULT	/* the listener itself is wrong: pause too,
				 * logged (polling on could only spin) */
};

/* What accept() failing with err means for its listener. */
enum idem_accept_verdict idem_accept_failed(int err);

/*
 * Milliseconds until a listener paused at since_ms is polled again, at
 * now_ms (the same monotonic clock); 0 when due.
 */
long long idem_accept_resume_in(long long since_ms, long long now_ms);

/* A message repeated at most once per IDEM_ACCEPT_RETRY_MS, with a count
 * of what it stood for.  Zero it to start. */
struct idem_ratelog {
	long long		 last_ms;	/* of the last line */
	unsigned long long	 held;		/* occurrences since */
	int			 said;		/* a line was written */
};

/*
 * One occurrence at now_ms.  When a line is due (none written yet, or the
 * last IDEM_ACCEPT_RETRY_MS ago or more): how many occurrences it stands
 * for (this one and those held back since the last line), and the clock
 * starts over; otherwise 0, and this one is held back.
 */
unsigned long long idem_ratelog_note(struct idem_ratelog *r,
		    long long now_ms);

#endif
