/*
 * listener.c - the FastCGI listening socket in the workers' epoll set:
 * armed one-shot, so that one worker wakes per connection, and paused when
 * the process has no descriptor left for one (accept.h): a connection
 * that cannot be taken stays in the backlog, where polling would find it
 * ready again at once and wake a worker for nothing, for ever.  A paused
 * listener is armed again when a connection closes (conns.c says so) and
 * by a timer in the same set within IDEM_ACCEPT_RETRY_MS (descriptors are
 * freed elsewhere too).
 *
 * Pausing rather than accepting and closing at once (with a descriptor
 * kept in reserve): a connection in the backlog is served as soon as a
 * descriptor frees, where one closed at once is an error for the web
 * server's client; the backlog bounds what waits, and past it the web
 * server's connect() fails at once, as with any upstream that is full.
 */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "accept.h"

struct idem_listener {
	idem_app	*app;
	int		 fd;		/* the listening socket (not ours) */
	int		 ep;
	int		 timer;		/* timerfd: a pause's latest end */
	pthread_mutex_t	 mu;
	atomic_int	 paused;	/* (written under mu) */
	atomic_ullong	 freed;		/* descriptors freed so far */
	int		 stopped;	/* (mu) left the set for good */
	struct idem_ratelog log;	/* (mu) */
	unsigned long long limited;	/* (mu) accepts failed for a limit */
};

/* (mu) Watch fd for one readiness event; its tag is data. */
static int
watch(struct idem_listener *l, int op, int fd, void *data)
{
	struct epoll_event	ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.ptr = data;
	return epoll_ctl(l->ep, op, fd, &ev);
}

/* (mu) The listener polled again, unless the runtime is stopping. */
static void
arm(struct idem_listener *l)
{
	atomic_store(&l->paused, 0);
	if (!l->stopped && watch(l, EPOLL_CTL_MOD, l->fd, l) == -1)
		idem_log(IDEM_LOG_ERROR, "runtime: epoll_ctl: %s",
		    strerror(errno));
}

/* A paused listener polled again (paused is read again under mu: a pause
 * may have ended meanwhile). */
static void
resume(struct idem_listener *l)
{
	pthread_mutex_lock(&l->mu);
	if (atomic_load(&l->paused))
		arm(l);
	pthread_mutex_unlock(&l->mu);
}

struct idem_listener *
idem_listener_new(idem_app *app, int ep, int fd)
{
	struct idem_listener	*l;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	l->app = app;
	l->ep = ep;
	l->fd = fd;
	pthread_mutex_init(&l->mu, NULL);
	if ((l->timer = timerfd_create(CLOCK_MONOTONIC,
	    TFD_CLOEXEC | TFD_NONBLOCK)) == -1 ||
	    watch(l, EPOLL_CTL_ADD, l->timer, &l->timer) == -1 ||
	    watch(l, EPOLL_CTL_ADD, fd, l) == -1) {
		idem_log(IDEM_LOG_ERROR, "runtime: listener: %s",
		    strerror(errno));
		if (l->timer != -1)
			close(l->timer);
		pthread_mutex_destroy(&l->mu);
		free(l);
		return NULL;
	}
	return l;
}

enum idem_listener_tag
idem_listener_tag(const struct idem_listener *l, const void *data)
{
	if (data == l)
		return IDEM_LISTENER_SOCKET;
	if (data == &l->timer)
		return IDEM_LISTENER_TIMER;
	return IDEM_LISTENER_OTHER;
}

/* (mu) A line at most each IDEM_ACCEPT_RETRY_MS, with a count. */
static void
say(struct idem_listener *l, int err, enum idem_accept_verdict v)
{
	unsigned long long	n;

	if (v == IDEM_ACCEPT_FD_LIMIT)
		l->limited++;
	if ((n = idem_ratelog_note(&l->log, idem_now_us() / 1000)) == 0)
		return;
	if (v == IDEM_ACCEPT_FD_LIMIT)
		idem_log(IDEM_LOG_WARN, "runtime: no descriptor for a new "
		    "connection (accept: %s): not accepting until one is "
		    "freed (%llu failed accepts since the last line, %llu in "
		    "all)", strerror(err), n, l->limited);
	else
		idem_log(IDEM_LOG_ERROR, "runtime: accept: %s: trying again "
		    "within %d ms (%llu failed accepts since the last line)",
		    strerror(err), IDEM_ACCEPT_RETRY_MS, n);
}

/*
 * (mu) Not polled until a descriptor is freed or the timer fires; gen:
 * the descriptors freed before accept() failed.  Paused first, then
 * freed read: idem_listener_freed() counts first, then reads paused, so
 * one of the two sees the other and the listener is never left paused
 * with a descriptor free.
 */
static void
pause_listener(struct idem_listener *l, unsigned long long gen)
{
	struct itimerspec	its;

	atomic_store(&l->paused, 1);
	if (atomic_load(&l->freed) != gen) {
		arm(l);
		return;
	}
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = IDEM_ACCEPT_RETRY_MS / 1000;
	its.it_value.tv_nsec = (IDEM_ACCEPT_RETRY_MS % 1000) * 1000000L;
	if (timerfd_settime(l->timer, 0, &its, NULL) == -1 ||
	    watch(l, EPOLL_CTL_MOD, l->timer, &l->timer) == -1)
		idem_log(IDEM_LOG_ERROR, "runtime: listener timer: %s",
		    strerror(errno));
}

int
idem_listener_accept(struct idem_listener *l, struct sockaddr *sa,
    socklen_t *sl)
{
	unsigned long long	 gen = atomic_load(&l->freed);
	enum idem_accept_verdict v;
	int			 fd, err;

	/* This worker owns the listener (one-shot) until it arms it. */
	fd = accept4(l->fd, sa, sl, SOCK_CLOEXEC);
	err = errno;
	v = fd != -1 ? IDEM_ACCEPT_RETRY : idem_accept_failed(err);
	if (v == IDEM_ACCEPT_FD_LIMIT)
		idem_metrics_rejected(l->app, IDEM_FCGI_FD_LIMIT);
	pthread_mutex_lock(&l->mu);
	if (v == IDEM_ACCEPT_RETRY)
		arm(l);
	else {
		say(l, err, v);
		pause_listener(l, gen);
	}
	pthread_mutex_unlock(&l->mu);
	return fd;
}

void
idem_listener_freed(struct idem_listener *l)
{
	/* Counted first, so that a pause being decided sees it (accept). */
	atomic_fetch_add(&l->freed, 1);
	idem_metrics_fd_freed(l->app);
	if (atomic_load(&l->paused))
		resume(l);
}

void
idem_listener_timer(struct idem_listener *l)
{
	uint64_t	n;

	/* Read, or it stays readable; a timer of an ended pause is moot. */
	if (read(l->timer, &n, sizeof(n)) == -1 && errno != EAGAIN)
		idem_log(IDEM_LOG_WARN, "runtime: listener timer: %s",
		    strerror(errno));
	resume(l);
}

void
idem_listener_stop(struct idem_listener *l)
{
	pthread_mutex_lock(&l->mu);
	l->stopped = 1;
	epoll_ctl(l->ep, EPOLL_CTL_DEL, l->fd, NULL);
	epoll_ctl(l->ep, EPOLL_CTL_DEL, l->timer, NULL);
	pthread_mutex_unlock(&l->mu);
}

void
idem_listener_free(struct idem_listener *l)
{
	if (l == NULL)
		return;
	close(l->timer);
	pthread_mutex_destroy(&l->mu);
	free(l);
}
