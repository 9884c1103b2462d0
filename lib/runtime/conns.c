/*
 * conns.c - the runtime's FastCGI connections: read without blocking into
 * idem's reader (fcgi.c) by whichever worker the epoll set wakes, handed to
 * request.c only once a request is whole (parameters and body), closed
 * when one has not arrived within [server] read_timeout, and closed (logged
 * once with the peer, counted) on input the reader refuses.  Answers are
 * written without blocking too: what the peer does not take at once stays
 * with its connection, which waits in the set for room to write (and is not
 * read meanwhile: pipelined requests wait, in order), closed when the
 * answer is not out within [server] write_timeout.  No peer can hold a
 * worker: a worker reads and writes what it can and goes back to waiting.
 *
 * Memory: the bodies being received and the answers waiting for their
 * peer are held against one budget, [server] max_buffered (budget.h says
 * who may take how much).  A body is reserved whole, by its
 * CONTENT_LENGTH, before a byte of it is kept; one that does not fit is
 * answered 503 at once and its bytes are read and dropped.  An answer that
 * does not fit closes its connection (counted).
 *
 * Deadlines: every connection whose request has begun (or that was just
 * accepted) is in the read queue, and every one whose answer waits for
 * its peer in the write queue, oldest first; each queue's entries share
 * one timeout, so it is sorted by construction.  The runtime's main
 * thread calls idem_conns_expire(): it shuts the late ones down (for
 * reading; both ways when writing), which wakes the worker that owns them
 * next (EOF, or a hang-up), and that worker closes them; no thread but a
 * connection's owner ever frees it.
 */
#include <sys/epoll.h>
#include <sys/queue.h>
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
#include "budget.h"
#include "peer.h"

#define READ_CHUNK	16384

enum conn_queue { QUEUE_READ, QUEUE_WRITE, QUEUE__COUNT };
enum conn_late { LATE_NO, LATE_READ, LATE_WRITE };

struct conn {
	LIST_ENTRY(conn) link;		/* every connection */
	TAILQ_ENTRY(conn) qlink;	/* its deadline queue */
	int		 fd;
	struct idem_listener *from;	/* told when fd is closed */
	int		 in_ep;		/* in the epoll set (owner only) */
	int		 queued;	/* (mutex) in queue: */
	enum conn_queue	 queue;		/* (mutex) */
	enum conn_late	 late;		/* (mutex) shut down by expire */
	long long	 deadline_ms;	/* (mutex) CLOCK_MONOTONIC */
	struct idem_fcgi in;
	/* The rest is the owner's. */
	struct idem_buf	 out;		/* answer records not sent yet */
	size_t		 sent;		/* of out */
	struct idem_buf	 ahead;		/* read past the request answered */
	size_t		 held_body;	/* of the budget: the body */
	size_t		 held_out;	/* out and ahead, once waiting */
	int		 last;		/* closed once out is sent */
};

TAILQ_HEAD(deadlines, conn);

struct idem_conns {
	idem_app	*app;
	int		 ep;
	pthread_mutex_t	 mu;
	LIST_HEAD(, conn) all;
	struct deadlines q[QUEUE__COUNT];
	long long	 timeout_ms[QUEUE__COUNT];
	struct idem_fcgi_limits lim;
	const char	*allow;		/* TCP peers allowed, NULL: any */
	atomic_ullong	 refused;	/* peers refused so far */
	atomic_ullong	 over_budget;	/* bodies refused so far */
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
	cs->timeout_ms[QUEUE_READ] = app->cfg.read_timeout_ms;
	cs->timeout_ms[QUEUE_WRITE] = app->cfg.write_timeout_ms;
	cs->allow = idem_peer_server_list(app->cfg.allow,
	    getenv("FCGI_WEB_SERVER_ADDRS"));
	LIST_INIT(&cs->all);
	TAILQ_INIT(&cs->q[QUEUE_READ]);
	TAILQ_INIT(&cs->q[QUEUE_WRITE]);
	pthread_mutex_init(&cs->mu, NULL);
	return cs;
}

/* (mutex) */
static void
dequeue(struct idem_conns *cs, struct conn *c)
{
	if (!c->queued)
		return;
	TAILQ_REMOVE(&cs->q[c->queue], c, qlink);
	c->queued = 0;
}

/* (mutex) At the tail of queue which: its deadline is the latest.  Already
 * there: its deadline stays. */
static void
enqueue(struct idem_conns *cs, struct conn *c, enum conn_queue which)
{
	if (c->queued && c->queue == which)
		return;
	dequeue(cs, c);
	c->deadline_ms = now_ms() + cs->timeout_ms[which];
	TAILQ_INSERT_TAIL(&cs->q[which], c, qlink);
	c->queue = which;
	c->queued = 1;
}

/* Read on: the clock runs from a request's first byte. */
static void
conn_reading(struct idem_conns *cs, struct conn *c)
{
	pthread_mutex_lock(&cs->mu);
	if (c->in.started)
		enqueue(cs, c, QUEUE_READ);
	else
		dequeue(cs, c);
	pthread_mutex_unlock(&cs->mu);
}

/* Why expire() shut c down, as a refusal; IDEM_FCGI_MORE if it did not. */
static enum idem_fcgi_rc
conn_late(struct idem_conns *cs, struct conn *c)
{
	enum conn_late	late;

	pthread_mutex_lock(&cs->mu);
	late = c->late;
	pthread_mutex_unlock(&cs->mu);
	return late == LATE_READ ? IDEM_FCGI_READ_TIMEOUT :
	    late == LATE_WRITE ? IDEM_FCGI_WRITE_TIMEOUT : IDEM_FCGI_MORE;
}

/* n bytes of [server] max_buffered for a holding of kind: 0, or -1. */
static int
budget_take(struct idem_conns *cs, size_t n, enum idem_budget_kind kind)
{
	size_t	held = atomic_load(&cs->app->buffered);

	do {
		if (idem_budget_admit(held, n, kind,
		    cs->app->cfg.max_buffered) != IDEM_BUDGET_ADMIT)
			return -1;
	} while (!atomic_compare_exchange_weak(&cs->app->buffered, &held,
	    held + n));
	return 0;
}

static void
budget_give(struct idem_conns *cs, size_t *held)
{
	atomic_fetch_sub(&cs->app->buffered, *held);
	*held = 0;
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
	LIST_REMOVE(c, link);
	pthread_mutex_unlock(&cs->mu);
	close(c->fd);		/* (leaves the epoll set too) */
	/* A descriptor is free: a listener paused at the limit takes one. */
	if (c->from != NULL)
		idem_listener_freed(c->from);
	idem_fcgi_free(&c->in);
	idem_buf_free(&c->out);
	idem_buf_free(&c->ahead);
	budget_give(cs, &c->held_body);
	budget_give(cs, &c->held_out);
	free(c);
}

/* Blocking (idem_conns_serve_one's fd): 0, or -1. */
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

enum out_rc { OUT_DONE, OUT_AGAIN, OUT_FAIL };

/* Send what c's peer takes of its answer now. */
static enum out_rc
out_send(struct conn *c)
{
	ssize_t	k;

	while (c->sent < c->out.len) {
		k = send(c->fd, c->out.p + c->sent, c->out.len - c->sent,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k == -1 && errno == EINTR)
			continue;
		if (k == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return OUT_AGAIN;
		if (k <= 0)
			return OUT_FAIL;
		c->sent += (size_t)k;
	}
	idem_buf_free(&c->out);
	c->sent = 0;
	return OUT_DONE;
}

/* Records for c's peer, after what it has not taken yet: 0, or -1. */
static int
out_add(struct conn *c, struct idem_buf *recs)
{
	if (c->out.len > 0)
		return idem_buf_add(&c->out, recs->p, recs->len);
	idem_buf_free(&c->out);
	c->out = *recs;		/* taken, not copied */
	memset(recs, 0, sizeof(*recs));
	return 0;
}

/* idem_answer_fn: out, sent as far as the peer takes it at once. */
static enum idem_rc
conn_answer(void *conn, struct idem_buf *out)
{
	struct conn	*c = conn;

	if (out_add(c, out) == -1 || out_send(c) == OUT_FAIL)
		return IDEM_RC_FAIL;
	return IDEM_RC_OK;
}

/*
 * The peer did not take all of c's answer: what is left of it (and what
 * was read past its request) is held against the budget, and the whole
 * answer must be out within write_timeout.  0, or -1: no room.
 */
static int
conn_hold(struct idem_conns *cs, struct conn *c)
{
	size_t	left = c->out.len - c->sent;
	char	*p;

	/* Only what is left stays in memory. */
	memmove(c->out.p, c->out.p + c->sent, left);
	c->out.len = left;
	c->sent = 0;
	if ((p = realloc(c->out.p, left + 1)) != NULL) {
		c->out.p = p;
		c->out.cap = left + 1;
	}
	if (budget_take(cs, left + c->ahead.len, IDEM_BUDGET_ANSWER) == -1)
		return -1;
	c->held_out = left + c->ahead.len;
	pthread_mutex_lock(&cs->mu);
	enqueue(cs, c, QUEUE_WRITE);
	pthread_mutex_unlock(&cs->mu);
	return 0;
}

enum conn_step { STEP_ON, STEP_WAIT, STEP_CLOSE };

/* To be closed with its answer unsent: reset at close (TCP), so that
 * neither the peer nor the kernel's send queue waits on it. */
static void
conn_abort(struct conn *c)
{
	struct linger	l = { 1, 0 };

	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

/* Send c's answer on.  STEP_ON: all out, read on; STEP_WAIT: wait for
 * room; STEP_CLOSE: c is to be closed. */
static enum conn_step
conn_flush(struct idem_conns *cs, struct conn *c)
{
	enum idem_fcgi_rc	late;

	switch (out_send(c)) {
	case OUT_FAIL:
		/* The peer left, or expire() shut it down. */
		if ((late = conn_late(cs, c)) != IDEM_FCGI_MORE) {
			refused(cs->app, c->fd, late);
			conn_abort(c);
		}
		return STEP_CLOSE;
	case OUT_AGAIN:
		if (c->held_out == 0 && conn_hold(cs, c) == -1) {
			refused(cs->app, c->fd, IDEM_FCGI_MAX_BUFFERED);
			conn_abort(c);
			return STEP_CLOSE;
		}
		return STEP_WAIT;
	case OUT_DONE:
	default:
		break;
	}
	budget_give(cs, &c->held_out);
	if (c->last)
		return STEP_CLOSE;
	conn_reading(cs, c);
	return STEP_ON;
}

/* The reservation of a body the reader let go of (served, aborted)
 * goes back. */
static void
body_settle(struct idem_conns *cs, struct conn *c)
{
	if (c->held_body > 0 && c->in.body.p == NULL)
		budget_give(cs, &c->held_body);
}

/* A body announced: reserved whole, or refused (then answered 503). */
static enum idem_fcgi_rc
conn_admit(struct idem_conns *cs, struct conn *c)
{
	size_t			 n = (size_t)c->in.content_length;
	enum idem_fcgi_rc	 rc;
	char			 peer[80];

	if (budget_take(cs, n, IDEM_BUDGET_BODY) == 0) {
		if ((rc = idem_fcgi_body(&c->in, 1)) == IDEM_FCGI_MORE)
			c->held_body = n;
		else
			budget_give(cs, &n);
		return rc;
	}
	idem_metrics_add(cs->app, IDEM_M_BODIES_REFUSED, 1);
	if (idem_peer_log_due(atomic_fetch_add(&cs->over_budget, 1) + 1)) {
		peer_name(c->fd, peer, sizeof(peer));
		idem_log(IDEM_LOG_WARN, "runtime: a body of %zu bytes from %s "
		    "refused (503): [server] max_buffered is held (%llu so "
		    "far)", n, peer, atomic_load(&cs->over_budget));
	}
	return idem_fcgi_body(&c->in, 0);
}

/* c's request is whole: answer it. */
static enum conn_step
conn_serve(struct idem_conns *cs, struct conn *c)
{
	enum idem_fcgi_rc	late;
	int			ok;

	/* Unless it lost the race with expire. */
	if ((late = conn_late(cs, c)) != IDEM_FCGI_MORE) {
		refused(cs->app, c->fd, late);
		return STEP_CLOSE;
	}
	pthread_mutex_lock(&cs->mu);
	dequeue(cs, c);
	pthread_mutex_unlock(&cs->mu);
	ok = idem_request_handle(cs->app, &c->in, conn_answer, c) ==
	    IDEM_RC_OK;
	if (!ok)
		return STEP_CLOSE;
	/* Closed once its answer is out, or read on. */
	c->last = atomic_load(&cs->app->stopping) || !idem_fcgi_served(&c->in);
	body_settle(cs, c);
	if (c->last)
		return c->out.len > 0 ? STEP_ON : STEP_CLOSE;
	/* Answered before its body: the rest is still owed. */
	conn_reading(cs, c);
	return STEP_ON;
}

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
	int			 ok;

	rc = idem_fcgi_feed(&c->in, data, n, used, &reply);
	ok = reply.len == 0 || out_add(c, &reply) == 0;
	idem_buf_free(&reply);
	body_settle(cs, c);
	if (idem_fcgi_reason(rc) != NULL) {
		refused(cs->app, c->fd, rc);
		return STEP_CLOSE;
	}
	if (!ok || rc == IDEM_FCGI_CLOSE)
		return STEP_CLOSE;
	if (rc == IDEM_FCGI_BODY)
		rc = conn_admit(cs, c);
	if (rc == IDEM_FCGI_REQUEST)
		return conn_serve(cs, c);
	conn_reading(cs, c);
	return STEP_ON;
}

/*
 * Feed data[0..n-1] until it is all taken or an answer waits (then *taken
 * says how far: a web server that pipelines waits for its answers).
 */
static enum conn_step
conn_take(struct idem_conns *cs, struct conn *c, const char *data, size_t n,
    size_t *taken)
{
	size_t	used;

	for (*taken = 0; *taken < n && c->out.len == 0 && !c->last;
	    *taken += used)
		if (conn_input(cs, c, data + *taken, n - *taken, &used) ==
		    STEP_CLOSE)
			return STEP_CLOSE;
	return STEP_ON;
}

/* What was read past an answer that waited, once it is out. */
static enum conn_step
conn_take_ahead(struct idem_conns *cs, struct conn *c)
{
	struct idem_buf	ahead = c->ahead;
	size_t		taken;

	memset(&c->ahead, 0, sizeof(c->ahead));
	if (conn_take(cs, c, ahead.p, ahead.len, &taken) == STEP_CLOSE) {
		idem_buf_free(&ahead);
		return STEP_CLOSE;
	}
	/* Waiting again: the rest goes back. */
	memmove(ahead.p, ahead.p + taken, ahead.len - taken);
	ahead.len -= taken;
	if (ahead.len > 0)
		c->ahead = ahead;
	else
		idem_buf_free(&ahead);
	return STEP_ON;
}

/* Read what c has.  STEP_WAIT: nothing more for now. */
static enum conn_step
conn_read(struct idem_conns *cs, struct conn *c)
{
	char			buf[READ_CHUNK];
	ssize_t			k;
	size_t			taken;
	enum idem_fcgi_rc	late;

	do
		k = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
	while (k == -1 && errno == EINTR);
	if (k == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return STEP_WAIT;
	if (k <= 0) {
		/* The peer left, or expire() shut it down. */
		if ((late = conn_late(cs, c)) != IDEM_FCGI_MORE)
			refused(cs->app, c->fd, late);
		return STEP_CLOSE;
	}
	if (conn_take(cs, c, buf, (size_t)k, &taken) == STEP_CLOSE)
		return STEP_CLOSE;
	/* (Out of memory: as if no room were left.) */
	if (taken < (size_t)k && idem_buf_add(&c->ahead, buf + taken,
	    (size_t)k - taken) == -1) {
		refused(cs->app, c->fd, IDEM_FCGI_MAX_BUFFERED);
		return STEP_CLOSE;
	}
	return STEP_ON;
}

/* Wait in the set for c to be readable, or writable. */
static void
conn_arm(struct idem_conns *cs, struct conn *c, uint32_t events)
{
	struct epoll_event	ev;
	int			op;

	memset(&ev, 0, sizeof(ev));
	ev.events = events | EPOLLONESHOT;
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

/*
 * Write what c owes, then read what it has and serve what is whole, until
 * it would block; then wait for it in the set, or close it.  While an
 * answer waits, c is not read.
 */
static void
conn_run(struct idem_conns *cs, struct conn *c)
{
	enum conn_step	step;

	for (;;) {
		if (c->out.len > 0 || c->last) {
			step = c->out.len > 0 ? conn_flush(cs, c) : STEP_CLOSE;
			if (step != STEP_ON)
				break;
		}
		step = c->ahead.len > 0 ? conn_take_ahead(cs, c) :
		    conn_read(cs, c);
		if (step != STEP_ON)
			break;
	}
	if (step == STEP_CLOSE)
		conn_close(cs, c);
	else
		conn_arm(cs, c, c->out.len > 0 ? EPOLLOUT : EPOLLIN);
}

void
idem_conns_accept(struct idem_conns *cs, struct idem_listener *l)
{
	struct sockaddr_storage	 ss;
	socklen_t	 sl = sizeof(ss);
	struct conn	*c;
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
	c->fd = fd;
	c->from = l;
	idem_fcgi_init(&c->in, &cs->lim);
	pthread_mutex_lock(&cs->mu);
	LIST_INSERT_HEAD(&cs->all, c, link);
	/* A fresh connection owes its first request from now on. */
	enqueue(cs, c, QUEUE_READ);
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
	int		 i;

	/* What is queued meanwhile is due one timeout from now at least. */
	wait = cs->timeout_ms[QUEUE_READ] < cs->timeout_ms[QUEUE_WRITE] ?
	    cs->timeout_ms[QUEUE_READ] : cs->timeout_ms[QUEUE_WRITE];
	pthread_mutex_lock(&cs->mu);
	for (i = 0; i < QUEUE__COUNT; i++) {
		while ((c = TAILQ_FIRST(&cs->q[i])) != NULL && c->deadline_ms <= now) {
			dequeue(cs, c);
			c->late = i == QUEUE_READ ? LATE_READ : LATE_WRITE;
			/* Its owner sees EOF (or, writing, a hang-up: that
			 * wakes it waiting to write too) and closes it, with
			 * the reason. */
			shutdown(c->fd, i == QUEUE_READ ? SHUT_RD : SHUT_RDWR);
		}
		if (c != NULL && c->deadline_ms - now < wait)
			wait = c->deadline_ms - now;
	}
	pthread_mutex_unlock(&cs->mu);
	return wait;
}

/* The workers gone: answers still waiting get until until_ms to go out. */
static void
drain_answers(struct idem_conns *cs, long long until_ms)
{
	struct conn	*c;
	struct pollfd	 pfd;
	long long	 left;

	LIST_FOREACH(c, &cs->all, link) {
		pfd.fd = c->fd;
		pfd.events = POLLOUT;
		while (c->out.len > 0 && out_send(c) == OUT_AGAIN &&
		    (left = until_ms - now_ms()) > 0 &&
		    poll(&pfd, 1, (int)left) == 1)
			;
	}
}

void
idem_conns_free(struct idem_conns *cs, long long flush_ms)
{
	if (cs == NULL)
		return;
	drain_answers(cs, now_ms() + flush_ms);
	/* What is left is idle, half-read, or not read by its peer. */
	while (!LIST_EMPTY(&cs->all))
		conn_close(cs, LIST_FIRST(&cs->all));
	pthread_mutex_destroy(&cs->mu);
	free(cs);
}

/* idem_answer_fn of idem_conns_serve_one: conn is the (blocking) fd. */
static enum idem_rc
answer_blocking(void *conn, struct idem_buf *out)
{
	return send_all(*(int *)conn, out->p, out->len) == 0 ? IDEM_RC_OK :
	    IDEM_RC_FAIL;
}

int
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
			/* One request at a time: its body is always kept. */
			if (rc == IDEM_FCGI_BODY)
				rc = idem_fcgi_body(&in, 1);
		}
	}
	if (rc == IDEM_FCGI_REQUEST)
		ret = idem_request_handle(app, &in, answer_blocking, &fd);
	else if (idem_fcgi_reason(rc) != NULL)
		refused(app, fd, rc);
	idem_fcgi_free(&in);
	return ret == IDEM_RC_OK ? 0 : -1;
}
