/*
 * accept.c - what a listener does when accept() fails, and how often it
 * logs it (accept.h).  Pure: the listeners do the I/O and read the clock.
 */
#include <errno.h>

#include "config.h"	/* configure's switches: rebuilt when they change */
#include "accept.h"

enum idem_accept_verdict
idem_accept_failed(int err)
{
	switch (err) {
	case EMFILE:		/* the process's descriptors */
	case ENFILE:		/* the system's */
	case ENOBUFS:
	case ENOMEM:
		return IDEM_ACCEPT_FD_LIMIT;
	case EAGAIN:
#if EWOULDBLOCK != EAGAIN
	case EWOULDBLOCK:
#endif
	case EINTR:
	/* The peer left before it was taken, or a network error that
	 * accept(2) reports for the connection, not the listener. */
	case ECONNABORTED:
	case EPROTO:
	case EPERM:
	case ENETDOWN:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case ENONET:
	case EHOSTUNREACH:
	case EOPNOTSUPP:
	case ENETUNREACH:
		return IDEM_ACCEPT_RETRY;
	default:
		return IDEM_ACCEPT_FAULT;
	}
}

long long
idem_accept_resume_in(long long since_ms, long long now_ms)
{
	long long	left = since_ms + IDEM_ACCEPT_RETRY_MS - now_ms;

	/* A clock read before the pause began counts as the pause's start. */
	if (left > IDEM_ACCEPT_RETRY_MS)
		return IDEM_ACCEPT_RETRY_MS;
	return left > 0 ? left : 0;
}

unsigned long long
idem_ratelog_note(struct idem_ratelog *r, long long now_ms)
{
	unsigned long long	n;

	r->held++;
	if (r->said && now_ms - r->last_ms < IDEM_ACCEPT_RETRY_MS &&
	    now_ms >= r->last_ms)
		return 0;
	n = r->held;
	r->held = 0;
	r->last_ms = now_ms;
	r->said = 1;
	return n;
}
