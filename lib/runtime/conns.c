/*
 * conns.c - the runtime's FastCGI connections: read without blocking into
 * idem's reader (fcgi.c) by whichever worker the epoll set wakes, handed to
 * request.c only once a request is whole (parameters and body), closed
 * when one has not arrived within [server] read_timeout, and closed (logged
 * once with the peer, counted) on input the reader refuses.  No peer can
 * hold a worker: a worker reads what is there and goes back to waiting.
 *
 * Deadlines: every connection whose request has begun (or that was just
 * accepted) is in one queue, oldest first; all share read_timeout, so the
 * queue is sorted by construction.  The runtime's main thread calls
 * idem_conns_expire(): it shuts the late ones down for reading, which
 * wakes the worker that reads them next (EOF), and that worker closes them;
 * no thread but a connection's reader ever frees it.
 */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "peer.h"

#define READ_CHUNK	16384

struct conn {
	struct conn	*prev, *next;	/* every connection */
	struct conn	*qprev, *qnext;	/* the deadline queue */
	int		 fd;
	struct idem_listener *from;	/* told when fd is closed */
	int		 in_ep;		/* in the epoll set (owner only) */
	int		 queued;	/* (mutex) */
	int		 timed_out;	/* (mutex) shut down by expire */
	long long	 deadline_ms;	/* (mutex) CLOCK_MONOTONIC */
	struct idem_fcgi in;
};

struct idem_conns {
	idem_app	*app;
	int		 ep;
	pthread_mutex_t	 mu;
	struct conn	*all;
	struct conn	*qhead, *qtail;
	struct idem_fcgi_limits lim;
	const char	*allow;		/* TCP peers allowed, NULL: any */
	atomic_ullong	 refused;	/* peers refused so far */
};

static long long
now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct idem_conns *
idem_conns_new(idem_app *app, int ep)
{
	struct idem_conns	*cs;

	if ((cs = calloc(1, sizeof(*cs))) == NULL)
		return NULL;
	cs->app = app;
	cs->ep = ep;
	cs->lim.max_params = app->cfg.max_params;
	cs->lim.max_body = app->cfg.max_body;
	cs->lim.max_conns = app->cfg.threads;
	cs->allow = idem_peer_server_list(app->cfg.allow,
	    getenv("FCGI_WEB_SERVER_ADDRS"));
	pthread_mutex_init(&cs->mu, NULL);
	return cs;
}

/* (mutex) */
static void
dequeue(struct idem_conns *cs, struct conn *c)
{
	if (!c->queued)
		return;
	if (c->qprev != NULL)
		c->qprev->qnext = c->qnext;
	else
		cs->qhead = c->qnext;
	if (c->qnext != NULL)
		c->qnext->qprev = c->qprev;
	else
		cs->qtail = c->qprev;
	c->qprev = c->qnext = NULL;
	c->queued = 0;
}

/* (mutex) At the tail: its deadline is the latest. */
static void
enqueue(struct idem_conns *cs, struct conn *c)
{
	if (c->queued)
		return;
	c->deadline_ms = now_ms() + cs->app->cfg.read_timeout_ms;
	c->qprev = cs->qtail;
	c->qnext = NULL;
	if (cs->qtail != NULL)
		cs->qtail->qnext = c;
	else
		cs->qhead = c;
	cs->qtail = c;
	c->queued = 1;
}

static void
peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sl = sizeof(ss);
	char			 a[INET6_ADDRSTRLEN] = "?";

	snprintf(buf, len, "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == -1)
		return;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a,
		    sizeof(a));
		snprintf(buf, len, "%s:%u", a,
		    ntohs(((struct sockaddr_in *)&ss)->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
		    a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a,
		    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
	} else if (ss.ss_family == AF_UNIX)
		snprintf(buf, len, "unix");
}

/* Refused input: logged once with the peer, counted. */
static void
refused(idem_app *app, int fd, enum idem_fcgi_rc why)
{
	char	peer[80];

	peer_name(fd, peer, sizeof(peer));
	idem_log(IDEM_LOG_WARN, "runtime: connection from %s closed: %s",
	    peer, idem_fcgi_reason(why));
	idem_metrics_rejected(app, why);
}

static void
conn_close(struct idem_conns *cs, struct conn *c)
{
	pthread_mutex_lock(&cs->mu);
	dequeue(cs, c);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		cs->all = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&cs->mu);
	close(c->fd);		/* (leaves the epoll set too) */
	/* A descriptor is free: a listener paused at the limit takes one. */
	if (c->from != NULL)
		idem_listener_freed(c->from);
	idem_fcgi_free(&c->in);
	free(c);
}

/* Blocking, bounded by SO_SNDTIMEO: 0, or -1. */
static int
send_all(int fd, const char *p, size_t n)
{
	ssize_t	k;

	while (n > 0) {
		if ((k = send(fd, p, n, MSG_NOSIGNAL)) == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

enum conn_step { STEP_ON, STEP_CLOSE };

/*
 * Feed data[0..n-1] to c's reader (*used: how much it took), answering
 * what it asks and serving the request it completes.  STEP_ON: go on with
 * the rest, or read on; STEP_CLOSE: c is to be closed.
 */
static enum conn_step
conn_input(struct idem_conns *cs, struct conn *c, const char *data, size_t n,
    size_t *used)
{
	struct idem_buf		 reply = { 0 };
	enum idem_fcgi_rc	 rc;
	int			 late, ok;

	rc = idem_fcgi_feed(&c->in, data, n, used, &reply);
	ok = reply.len == 0 || send_all(c->fd, reply.p, reply.len) == 0;
	idem_buf_free(&reply);
	if (idem_fcgi_reason(rc) != NULL) {
		refused(cs->app, c->fd, rc);
		return STEP_CLOSE;
	}
	if (!ok || rc == IDEM_FCGI_CLOSE)
		return STEP_CLOSE;
	if (rc == IDEM_FCGI_MORE) {
		/* The clock runs from a request's first byte. */
		pthread_mutex_lock(&cs->mu);
		if (c->in.started)
			enqueue(cs, c);
		else
			dequeue(cs, c);
		pthread_mutex_unlock(&cs->mu);
		return STEP_ON;
	}
	/* IDEM_FCGI_REQUEST: whole, unless it lost the race with expire. */
	pthread_mutex_lock(&cs->mu);
	late = c->timed_out;
	dequeue(cs, c);
	pthread_mutex_unlock(&cs->mu);
	if (late) {
		refused(cs->app, c->fd, IDEM_FCGI_READ_TIMEOUT);
		return STEP_CLOSE;
	}
	if (idem_request_handle(cs->app, &c->in, c->fd) != IDEM_RC_OK ||
	    atomic_load(&cs->app->stopping) || !idem_fcgi_served(&c->in))
		return STEP_CLOSE;
	if (c->in.started) {
		/* Answered before its body: the rest is still owed. */
		pthread_mutex_lock(&cs->mu);
		enqueue(cs, c);
		pthread_mutex_unlock(&cs->mu);
	}
	return STEP_ON;
}

/* Read what c has, serve what is whole; then wait for more or close. */
static void
conn_run(struct idem_conns *cs, struct conn *c)
{
	struct epoll_event	 ev;
	char			 buf[READ_CHUNK];
	ssize_t			 k;
	size_t			 off, used;
	int			 late, op;

	for (;;) {
		k = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k == -1 && errno == EINTR)
			continue;
		if (k == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (k <= 0) {
			/* The peer left, or expire() shut it down. */
			pthread_mutex_lock(&cs->mu);
			late = c->timed_out;
			pthread_mutex_unlock(&cs->mu);
			if (late)
				refused(cs->app, c->fd, IDEM_FCGI_READ_TIMEOUT);
			conn_close(cs, c);
			return;
		}
		/* A web server that pipelines: the next request follows. */
		for (off = 0; off < (size_t)k; off += used)
			if (conn_input(cs, c, buf + off, (size_t)k - off,
			    &used) == STEP_CLOSE) {
				conn_close(cs, c);
				return;
			}
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.ptr = c;
	op = c->in_ep ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	/* Before: once armed, another worker may own c at once. */
	c->in_ep = 1;
	if (epoll_ctl(cs->ep, op, c->fd, &ev) == -1) {
		idem_log(IDEM_LOG_WARN, "runtime: epoll_ctl: %s",
		    strerror(errno));
		conn_close(cs, c);
	}
}

void
idem_conns_accept(struct idem_conns *cs, struct idem_listener *l)
{
	struct sockaddr_storage	 ss;
	socklen_t	 sl = sizeof(ss);
	struct timeval	 tv;
	struct conn	*c;
	long long	 ms = cs->app->cfg.read_timeout_ms;
	char		 peer[80];
	int		 fd;

	/* -1: another process took it, or no descriptor was left. */
	if ((fd = idem_listener_accept(l, (struct sockaddr *)&ss, &sl)) == -1)
		return;
	/* [server] allow: a peer not allowed never gets a byte read. */
	if (idem_peer_allowed(cs->allow, (struct sockaddr *)&ss, sl) !=
	    IDEM_PEER_ALLOW) {
		idem_metrics_rejected(cs->app, IDEM_FCGI_PEER);
		if (idem_peer_log_due(atomic_fetch_add(&cs->refused, 1) + 1)) {
			peer_name(fd, peer, sizeof(peer));
			idem_log(IDEM_LOG_WARN, "runtime: connection from %s "
			    "refused: not in [server] allow (%llu so far)",
			    peer, atomic_load(&cs->refused));
		}
		close(fd);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	/* A peer that does not read its answer holds a worker this long. */
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->fd = fd;
	c->from = l;
	idem_fcgi_init(&c->in, &cs->lim);
	pthread_mutex_lock(&cs->mu);
	c->next = cs->all;
	if (cs->all != NULL)
		cs->all->prev = c;
	cs->all = c;
	/* A fresh connection owes its first request from now on. */
	enqueue(cs, c);
	pthread_mutex_unlock(&cs->mu);
	conn_run(cs, c);
}

void
idem_conns_ready(struct idem_conns *cs, void *conn)
{
	conn_run(cs, conn);
}

long long
idem_conns_expire(struct idem_conns *cs)
{
	struct conn	*c;
	long long	 now = now_ms(), wait;

	pthread_mutex_lock(&cs->mu);
	while ((c = cs->qhead) != NULL && c->deadline_ms <= now) {
		dequeue(cs, c);
		c->timed_out = 1;
		/* Its reader sees EOF and closes it, with the reason. */
		shutdown(c->fd, SHUT_RD);
	}
	wait = c != NULL ? c->deadline_ms - now : -1;
	pthread_mutex_unlock(&cs->mu);
	return wait;
}

void
idem_conns_free(struct idem_conns *cs)
{
	if (cs == NULL)
		return;
	/* The workers are gone: what is left is idle or half-read. */
	while (cs->all != NULL)
		conn_close(cs, cs->all);
	pthread_mutex_destroy(&cs->mu);
	free(cs);
}

enum idem_rc
idem_conns_serve_one(idem_app *app, int fd)
{
	struct idem_fcgi_limits	 lim = { app->cfg.max_params,
				    app->cfg.max_body, app->cfg.threads };
	struct idem_fcgi	 in;
	struct idem_buf		 reply = { 0 };
	struct pollfd		 pfd = { fd, POLLIN, 0 };
	enum idem_fcgi_rc	 rc = IDEM_FCGI_MORE;
	enum idem_rc		 ret = IDEM_RC_FAIL;
	char			 buf[READ_CHUNK];
	size_t			 used, off;
	ssize_t			 k;

	idem_fcgi_init(&in, &lim);
	while (rc == IDEM_FCGI_MORE) {
		if (poll(&pfd, 1, (int)app->cfg.read_timeout_ms) <= 0 ||
		    (k = read(fd, buf, sizeof(buf))) <= 0)
			break;
		for (off = 0; rc == IDEM_FCGI_MORE && off < (size_t)k;
		    off += used) {
			rc = idem_fcgi_feed(&in, buf + off, (size_t)k - off,
			    &used, &reply);
			if (reply.len > 0 && send_all(fd, reply.p, reply.len))
				rc = IDEM_FCGI_CLOSE;
			idem_buf_free(&reply);
		}
	}
	if (rc == IDEM_FCGI_REQUEST)
		ret = idem_request_handle(app, &in, fd);
	else if (idem_fcgi_reason(rc) != NULL)
		refused(app, fd, rc);
	idem_fcgi_free(&in);
	return ret;
}
