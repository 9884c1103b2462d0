/*
 * metrics.c - Prometheus text exposition of the process's counters and
 * histograms, plus figures of the key store read at scrape time (each
 * from an index, sql/006), served on the main socket (GET /metrics) or on
 * a socket of its own ([metrics] listen, plain HTTP).
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "heartbeat.h"

/* Requests: sub-millisecond to seconds. */
static const double req_bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };
/* Janitor runs: a quiet store to a time-bounded backlog run. */
static const double run_bounds[] = { 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10,
	30, 60 };
#define NB	(sizeof(req_bounds) / sizeof(req_bounds[0]))

struct idem_metrics_srv;

struct hist {
	const double	*bounds;
	size_t		 nb;		/* <= NB */
	atomic_ullong	 b[NB + 1];	/* [nb]: +Inf */
	atomic_ullong	 count;
	atomic_ullong	 sum_us;
};

#define NOUT	IDEM_OUT__COUNT

struct idem_metrics {
	size_t		 nroutes;
	atomic_ullong	*requests;	/* [route][outcome] */
	struct hist	 duration;
	struct hist	 pool_wait;
	struct hist	 janitor_run;
	atomic_ullong	 evicted;
	atomic_ullong	 reclaimed;
	atomic_ullong	 completed;
	atomic_llong	 janitor_ok;	/* Unix time of the last good run */
	atomic_ullong	 rejected[IDEM_FCGI_REJECT__COUNT];	/* by reason */
	atomic_ullong	 waits[IDEM_WAIT__COUNT];	/* Prefer: wait */
	struct idem_metrics_srv *srv;	/* [metrics] listen, or NULL */
};

/* The outcome label: its log name, "ok" for a route without a key. */
static const char *
outcome_label(int o)
{
	const char	*n = idem_outcome_name((enum idem_outcome)o);

	return n != NULL ? n : "ok";
}

int
idem_metrics_init(idem_app *app)
{
	struct idem_metrics	*m;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return -1;
	m->nroutes = app->router.nroutes;
	m->duration.bounds = m->pool_wait.bounds = req_bounds;
	m->duration.nb = m->pool_wait.nb = NB;
	m->janitor_run.bounds = run_bounds;
	m->janitor_run.nb = sizeof(run_bounds) / sizeof(run_bounds[0]);
	if ((m->requests = calloc(m->nroutes * NOUT + 1,
	    sizeof(*m->requests))) == NULL) {
		free(m);
		return -1;
	}
	app->metrics = m;
	return 0;
}

void
idem_metrics_free(idem_app *app)
{
	if (app->metrics == NULL)
		return;
	free(app->metrics->requests);
	free(app->metrics);
	app->metrics = NULL;
}

static void
hist_add(struct hist *h, double s)
{
	size_t	i;

	for (i = 0; i < h->nb && s > h->bounds[i]; i++)
		continue;
	atomic_fetch_add(&h->b[i], 1);
	atomic_fetch_add(&h->count, 1);
	atomic_fetch_add(&h->sum_us, (unsigned long long)(s * 1e6));
}

void
idem_metrics_request(idem_app *app, const idem_req *req, double seconds)
{
	struct idem_metrics	*m = app->metrics;
	enum idem_outcome	 o = req->outcome;
	size_t			 r;

	if (m == NULL)
		return;
	idem_metrics_pool_waits(app, req);
	hist_add(&m->duration, seconds);
	if (req->route == NULL)
		return;
	r = (size_t)(req->route - app->router.routes);
	if (r >= m->nroutes)
		return;
	/* Plain routes: ok, rejected (4xx) or error (5xx). */
	if (o == IDEM_OUT_NONE && req->status >= 500)
		o = IDEM_OUT_ERROR;
	else if (o == IDEM_OUT_NONE && req->status >= 400)
		o = IDEM_OUT_REJECTED;
	atomic_fetch_add(&m->requests[r * NOUT + o], 1);
}

void
idem_metrics_pool_waits(idem_app *app, const idem_req *req)
{
	unsigned	i;

	if (app->metrics == NULL)
		return;
	for (i = 0; i < req->npool_waits; i++)
		hist_add(&app->metrics->pool_wait,
		    (double)req->pool_wait_us[i] / 1e6);
}

void
idem_metrics_janitor_run(idem_app *app, double seconds, int ok)
{
	if (app->metrics == NULL)
		return;
	hist_add(&app->metrics->janitor_run, seconds);
	if (ok)
		atomic_store(&app->metrics->janitor_ok, (long long)time(NULL));
}

void
idem_metrics_add(idem_app *app, int which, long n)
{
	if (app->metrics == NULL || n <= 0)
		return;
	atomic_fetch_add(which == IDEM_M_EVICTED ? &app->metrics->evicted :
	    which == IDEM_M_RECLAIMED ? &app->metrics->reclaimed :
	    &app->metrics->completed, (unsigned long long)n);
}

static const char *const wait_labels[IDEM_WAIT__COUNT] = {
	[IDEM_WAIT_REPLAYED] = "replayed",
	[IDEM_WAIT_OTHER] = "other",
	[IDEM_WAIT_TIMEOUT] = "timeout",
	[IDEM_WAIT_REFUSED] = "refused",
};

void
idem_metrics_wait(idem_app *app, enum idem_wait_outcome o)
{
	if (app->metrics != NULL && o >= 0 && o < IDEM_WAIT__COUNT)
		atomic_fetch_add(&app->metrics->waits[o], 1);
}

void
idem_metrics_rejected(idem_app *app, enum idem_fcgi_rc why)
{
	if (app->metrics == NULL || idem_fcgi_reason(why) == NULL)
		return;
	atomic_fetch_add(&app->metrics->rejected[why], 1);
}

static void
hist_print(struct idem_buf *b, const char *name, const char *help,
    struct hist *h)
{
	unsigned long long	cum = 0;
	size_t			i;

	idem_buf_addf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help,
	    name);
	for (i = 0; i <= h->nb; i++) {
		cum += atomic_load(&h->b[i]);
		if (i < h->nb)
			idem_buf_addf(b, "%s_bucket{le=\"%g\"} %llu\n", name,
			    h->bounds[i], cum);
		else
			idem_buf_addf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name,
			    cum);
	}
	idem_buf_addf(b, "%s_sum %.6f\n%s_count %llu\n", name,
	    (double)atomic_load(&h->sum_us) / 1e6, name,
	    atomic_load(&h->count));
}

/* The whole exposition into b; the store's gauges only when db. */
static void
render(idem_app *app, PGconn *db, struct idem_buf *b)
{
	struct idem_metrics	*m = app->metrics;
	const struct idem_route	*rt;
	unsigned long long	 renewed, lost;
	unsigned		 idle, busy;
	PGresult		*r = NULL;
	size_t			 i, o;

	idem_buf_adds(b, "# HELP idem_requests_total Requests by route and "
	    "outcome.\n# TYPE idem_requests_total counter\n");
	for (i = 0; i < m->nroutes; i++) {
		rt = &app->router.routes[i];
		for (o = 0; o < NOUT; o++) {
			/* Idempotent routes never have a plain "ok". */
			if ((rt->flags & IDEM_ROUTE_IDEMPOTENT) ?
			    o == IDEM_OUT_NONE : (o != IDEM_OUT_NONE &&
			    o != IDEM_OUT_REJECTED && o != IDEM_OUT_ERROR))
				continue;
			idem_buf_addf(b, "idem_requests_total{route=\"%s %s\","
			    "outcome=\"%s\"} %llu\n", rt->method, rt->pattern,
			    outcome_label(o),
			    atomic_load(&m->requests[i * NOUT + o]));
		}
	}
	idem_buf_adds(b, "# HELP idem_connections_rejected_total FastCGI "
	    "connections closed for their input (malformed, over a limit) or "
	    "for a request not whole within read_timeout.\n"
	    "# TYPE idem_connections_rejected_total counter\n");
	for (i = 0; i < IDEM_FCGI_REJECT__COUNT; i++)
		idem_buf_addf(b, "idem_connections_rejected_total{reason=\"%s\"} "
		    "%llu\n", idem_fcgi_reason((enum idem_fcgi_rc)i),
		    atomic_load(&m->rejected[i]));
	idem_buf_adds(b, "# HELP idem_prefer_waits_total Duplicates of a key "
	    "in flight that asked to wait (Prefer: wait), by how the wait "
	    "ended: replayed the first answer, other (executed after the "
	    "first stored nothing, or failed), timeout (then 409), refused "
	    "(max_waiters were waiting: 409 at once).\n"
	    "# TYPE idem_prefer_waits_total counter\n");
	for (i = 0; i < IDEM_WAIT__COUNT; i++)
		idem_buf_addf(b, "idem_prefer_waits_total{outcome=\"%s\"} "
		    "%llu\n", wait_labels[i], atomic_load(&m->waits[i]));
	idem_buf_addf(b, "# HELP idem_prefer_waiters Duplicates waiting now "
	    "for the first request with their key (at most max_waiters).\n"
	    "# TYPE idem_prefer_waiters gauge\nidem_prefer_waiters %d\n",
	    atomic_load(&app->waiters));
	idem_buf_addf(b, "# HELP idem_keys_evicted_total Expired keys "
	    "evicted by this process.\n# TYPE idem_keys_evicted_total counter\n"
	    "idem_keys_evicted_total %llu\n", atomic_load(&m->evicted));
	idem_buf_addf(b, "# HELP idem_stuck_keys_reclaimed_total Stuck "
	    "in-progress keys reclaimed by this process.\n"
	    "# TYPE idem_stuck_keys_reclaimed_total counter\n"
	    "idem_stuck_keys_reclaimed_total %llu\n",
	    atomic_load(&m->reclaimed));
	idem_buf_addf(b, "# HELP idem_keys_completed_total Abandoned phased "
	    "keys driven to completion by this process's completer.\n"
	    "# TYPE idem_keys_completed_total counter\n"
	    "idem_keys_completed_total %llu\n", atomic_load(&m->completed));
	/* Kept by the heartbeat itself (a lower layer), read here. */
	idem_heartbeat_counts(app->heartbeat, &renewed, &lost);
	idem_buf_addf(b, "# HELP idem_lease_renewals_total Leases renewed "
	    "by this process's heartbeat.\n"
	    "# TYPE idem_lease_renewals_total counter\n"
	    "idem_lease_renewals_total %llu\n", renewed);
	idem_buf_addf(b, "# HELP idem_lease_renewal_failures_total Leases "
	    "the heartbeat could not renew (database error, or no longer "
	    "held).\n# TYPE idem_lease_renewal_failures_total counter\n"
	    "idem_lease_renewal_failures_total %llu\n", lost);
	idem_buf_addf(b, "# HELP idem_janitor_last_success_timestamp_seconds "
	    "When this process's janitor last finished a run without a "
	    "database error (0: never).\n"
	    "# TYPE idem_janitor_last_success_timestamp_seconds gauge\n"
	    "idem_janitor_last_success_timestamp_seconds %lld\n",
	    atomic_load(&m->janitor_ok));
	idem_buf_addf(b, "# HELP idem_evict_interval_seconds The configured "
	    "[idempotency] evict_interval.\n"
	    "# TYPE idem_evict_interval_seconds gauge\n"
	    "idem_evict_interval_seconds %g\n",
	    (double)app->cfg.evict_interval_ms / 1000);
	hist_print(b, "idem_janitor_run_duration_seconds", "Duration of one "
	    "janitor run (evict, reclaim, complete).", &m->janitor_run);
	idem_pool_counts(app->pool, &idle, &busy);
	idem_buf_addf(b, "# HELP idem_pool_connections Database pool "
	    "connections.\n# TYPE idem_pool_connections gauge\n"
	    "idem_pool_connections{state=\"idle\"} %u\n"
	    "idem_pool_connections{state=\"busy\"} %u\n", idle, busy);
	idem_buf_addf(b, "# HELP idem_pool_size Connections the pool may "
	    "open ([database] pool_size).\n# TYPE idem_pool_size gauge\n"
	    "idem_pool_size %u\n", app->cfg.pool_size);
	hist_print(b, "idem_pool_wait_seconds", "Time waited for a pool "
	    "connection.", &m->pool_wait);
	hist_print(b, "idem_request_duration_seconds", "Request duration.",
	    &m->duration);

	/* Index-backed (sql/006): the cost does not grow with the table. */
	if (db != NULL)
		r = PQexec(db, "SELECT * FROM idem_store_gauges()");
	if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQntuples(r) == 1) {
		idem_buf_addf(b, "# HELP idem_oldest_live_key_age_seconds Age "
		    "of the oldest unexpired key.\n"
		    "# TYPE idem_oldest_live_key_age_seconds gauge\n"
		    "idem_oldest_live_key_age_seconds %s\n"
		    "# HELP idem_eviction_lag_seconds Age of the oldest "
		    "expired key that eviction would delete.\n"
		    "# TYPE idem_eviction_lag_seconds gauge\n"
		    "idem_eviction_lag_seconds %s\n"
		    "# HELP idem_in_progress_keys Keys in progress.\n"
		    "# TYPE idem_in_progress_keys gauge\n"
		    "idem_in_progress_keys %s\n"
		    "# HELP idem_unfinished_keys Phased keys past their TTL "
		    "and past a recovery point, not completed (never "
		    "evicted: for the completer or an operator).\n"
		    "# TYPE idem_unfinished_keys gauge\n"
		    "idem_unfinished_keys %s\n", PQgetvalue(r, 0, 0),
		    PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
		    PQgetvalue(r, 0, 3));
	} else if (db != NULL)
		idem_log(IDEM_LOG_WARN, "metrics: %s", PQerrorMessage(db));
	PQclear(r);
	/* Set aside by the completer (sql/009, a partial index). */
	r = db != NULL ? PQexec(db, "SELECT idem_attention_count()") : NULL;
	if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQntuples(r) == 1)
		idem_buf_addf(b, "# HELP idem_keys_attention Abandoned phased "
		    "keys the completer gave up on: they need an operator "
		    "(idemctl key show|retry|abandon).\n"
		    "# TYPE idem_keys_attention gauge\n"
		    "idem_keys_attention %s\n", PQgetvalue(r, 0, 0));
	else if (db != NULL)
		idem_log(IDEM_LOG_WARN, "metrics: %s", PQerrorMessage(db));
	PQclear(r);
}

int
idem_metrics_handler(idem_req *req, void *arg)
{
	struct idem_buf	 b = { 0 };
	int		 rc;

	(void)arg;
	render(req->app, idem_req_conn(req), &b);
	rc = b.p != NULL ? idem_resp_body(req, 200,
	    "text/plain; version=0.0.4", b.p, b.len) : -1;
	idem_buf_free(&b);
	return rc;
}

/*
 * [metrics] listen: GET /metrics as plain HTTP on a socket of its own, for
 * Prometheus to scrape directly, off the path the web server proxies.  One
 * thread, one connection at a time, each bounded in time; the peer's
 * address (its own, not a header) must be in [metrics] allow, except on a
 * unix socket, where the file's mode decides.
 */
#define HTTP_HEAD_MAX	8192
#define HTTP_IO_MS	2000

struct idem_metrics_srv {
	idem_app	*app;
	int		 fd;
	int		 wake[2];
	pthread_t	 th;
};

static int
peer_allowed(const idem_app *app, int fd)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sl = sizeof(ss);
	char			 a[INET6_ADDRSTRLEN] = "";

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == -1)
		return 0;
	if (ss.ss_family == AF_UNIX)
		return 1;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a,
		    sizeof(a));
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
		    a, sizeof(a));
	return idem_addr_allowed(app->cfg.metrics_allow, a);
}

static void
write_all(int fd, const char *p, size_t n)
{
	ssize_t	k;

	while (n > 0) {
		if ((k = write(fd, p, n)) == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

/* Read the request head, within HTTP_IO_MS: 0, or -1. */
static int
read_head(int fd, char *head, size_t max)
{
	struct pollfd	 p = { fd, POLLIN, 0 };
	long long	 until = idem_now_us() + HTTP_IO_MS * 1000LL, left;
	size_t		 n = 0;
	ssize_t		 k;

	head[0] = '\0';
	while (n < max && strstr(head, "\r\n\r\n") == NULL &&
	    strstr(head, "\n\n") == NULL) {
		if ((left = (until - idem_now_us()) / 1000) <= 0 ||
		    poll(&p, 1, (int)left) <= 0)
			return -1;
		if ((k = read(fd, head + n, max - n)) <= 0)
			return -1;
		n += (size_t)k;
		head[n] = '\0';
	}
	return 0;
}

static void
serve_scrape(idem_app *app, int fd)
{
	struct timeval	 tv = { HTTP_IO_MS / 1000, 0 };
	struct idem_buf	 b = { 0 }, h = { 0 };
	char		 head[HTTP_HEAD_MAX + 1];
	PGconn		*db;
	int		 status = 404;

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (read_head(fd, head, HTTP_HEAD_MAX) == -1)
		return;
	if (peer_allowed(app, fd) && strncmp(head, "GET /metrics", 12) == 0 &&
	    (head[12] == ' ' || head[12] == '?')) {
		db = idem_pool_acquire(app->pool,
		    app->cfg.acquire_timeout_ms, NULL);
		render(app, db, &b);
		if (db != NULL)
			idem_pool_release(app->pool, db);
		status = 200;
	} else
		idem_buf_adds(&b, "not found\n");
	idem_buf_addf(&h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %lu\r\nConnection: close\r\n\r\n", status,
	    status == 200 ? "OK" : "Not Found", status == 200 ?
	    "text/plain; version=0.0.4" : "text/plain",
	    (unsigned long)b.len);
	if (h.p != NULL && b.p != NULL) {
		write_all(fd, h.p, h.len);
		write_all(fd, b.p, b.len);
	}
	idem_buf_free(&h);
	idem_buf_free(&b);
}

static void *
metrics_srv(void *arg)
{
	struct idem_metrics_srv	*srv = arg;
	struct pollfd		 p[2];
	int			 fd;

	for (;;) {
		p[0].fd = srv->wake[0];
		p[0].events = POLLIN;
		p[1].fd = srv->fd;
		p[1].events = POLLIN;
		if (poll(p, 2, -1) == -1 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		if (!(p[1].revents & POLLIN))
			continue;
		while ((fd = accept4(srv->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
			serve_scrape(srv->app, fd);
			close(fd);
		}
	}
	return NULL;
}

int
idem_metrics_listen(idem_app *app)
{
	struct idem_metrics_srv	*srv;

	if (app->cfg.metrics_listen == NULL || app->metrics == NULL)
		return 0;
	if ((srv = calloc(1, sizeof(*srv))) == NULL)
		return -1;
	srv->app = app;
	if ((srv->fd = idem_listen_addr(app->cfg.metrics_listen)) < 0) {
		free(srv);
		return -1;
	}
	fcntl(srv->fd, F_SETFL, fcntl(srv->fd, F_GETFL) | O_NONBLOCK);
	if (pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK) == -1 ||
	    pthread_create(&srv->th, NULL, metrics_srv, srv) != 0) {
		close(srv->fd);
		free(srv);
		return -1;
	}
	app->metrics->srv = srv;
	idem_log(IDEM_LOG_INFO, "metrics: serving /metrics on %s",
	    app->cfg.metrics_listen);
	return 0;
}

void
idem_metrics_listen_stop(idem_app *app)
{
	struct idem_metrics_srv	*srv;

	if (app->metrics == NULL || (srv = app->metrics->srv) == NULL)
		return;
	/* A scrape in progress is bounded by HTTP_IO_MS and the pool wait. */
	write_all(srv->wake[1], "x", 1);
	pthread_join(srv->th, NULL);
	close(srv->fd);
	close(srv->wake[0]);
	close(srv->wake[1]);
	free(srv);
	app->metrics->srv = NULL;
}
