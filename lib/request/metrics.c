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
#include <pwd.h>
#include <unistd.h>

#include "private.h"
#include "heartbeat.h"
#include "outbox.h"
#include "peer.h"
#include "accept.h"
#include "delivery.h"

/* Requests: sub-millisecond to seconds. */
static const double req_bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };
/* Janitor runs: a quiet store to a time-bounded backlog run. */
static const double run_bounds[] = { 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10,
	30, 60 };
/* An event's commit to its endpoint's 2xx: a receiver up (well under a
 * second) to one that was down for hours. */
static const double event_bounds[] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
	10, 60, 300, 3600, 21600, 86400 };
#define NB	(sizeof(req_bounds) / sizeof(req_bounds[0]))

/* Topics counted apart; later ones share the "other" label, so that an
 * application's many types cannot grow the exposition without bound. */
#define TOPICS_MAX	64

struct topic {
	char		 name[IDEM_EVENT_TYPE_MAX + 1];
	atomic_ullong	 n[IDEM_EV__COUNT];
};

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
	atomic_ullong	 remembered;	/* traces written by eviction */
	atomic_ullong	 forgotten;	/* traces evicted */
	atomic_llong	 janitor_ok;	/* Unix time of the last good run */
	atomic_ullong	 rejected[IDEM_FCGI_REJECT__COUNT];	/* by reason */
	atomic_ullong	 waits[IDEM_WAIT__COUNT];	/* Prefer: wait */
	atomic_ullong	 metrics_refused;	/* peers of [metrics] listen */
	atomic_ullong	 fds_freed;	/* idem_metrics_fd_freed() calls */
	struct hist	 event_latency;
	atomic_ullong	 events_evicted;
	/* Endpoints disabled, by enum idem_endpoint_verdict. */
	atomic_ullong	 disabled[IDEM_ENDPOINT_FAILING + 1];
	atomic_ullong	 bodies_refused;	/* over [server] max_buffered */
	pthread_mutex_t	 topics_mu;	/* adding one; counting is atomic */
	atomic_size_t	 ntopics;
	struct topic	 topics[TOPICS_MAX + 1];	/* [TOPICS_MAX]: other */
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
	m->event_latency.bounds = event_bounds;
	m->event_latency.nb = sizeof(event_bounds) / sizeof(event_bounds[0]);
	pthread_mutex_init(&m->topics_mu, NULL);
	snprintf(m->topics[TOPICS_MAX].name, sizeof(m->topics[0].name),
	    "other");
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
	pthread_mutex_destroy(&app->metrics->topics_mu);
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
	    which == IDEM_M_REMEMBERED ? &app->metrics->remembered :
	    which == IDEM_M_FORGOTTEN ? &app->metrics->forgotten :
	    which == IDEM_M_EVENTS_EVICTED ? &app->metrics->events_evicted :
	    which == IDEM_M_BODIES_REFUSED ? &app->metrics->bodies_refused :
	    &app->metrics->completed, (unsigned long long)n);
}

void
idem_metrics_event(idem_app *app, const char *topic,
    enum idem_event_metric which)
{
	struct idem_metrics	*m = app->metrics;
	size_t			 i, n;

	if (m == NULL || topic == NULL || which >= IDEM_EV__COUNT)
		return;
	/* Topics are only ever added: a published one is found unlocked. */
	n = atomic_load(&m->ntopics);
	for (i = 0; i < n; i++)
		if (strcmp(m->topics[i].name, topic) == 0)
			break;
	if (i == n) {
		pthread_mutex_lock(&m->topics_mu);
		n = atomic_load(&m->ntopics);
		for (i = 0; i < n; i++)
			if (strcmp(m->topics[i].name, topic) == 0)
				break;
		if (i == n && n < TOPICS_MAX && strlen(topic) <
		    sizeof(m->topics[0].name)) {
			snprintf(m->topics[n].name, sizeof(m->topics[n].name),
			    "%s", topic);
			atomic_store(&m->ntopics, n + 1);
		} else if (i == n)
			i = TOPICS_MAX;
		pthread_mutex_unlock(&m->topics_mu);
	}
	atomic_fetch_add(&m->topics[i].n[which], 1);
}

void
idem_metrics_event_latency(idem_app *app, double seconds)
{
	if (app->metrics != NULL)
		hist_add(&app->metrics->event_latency, seconds);
}

void
idem_metrics_endpoint_disabled(idem_app *app, int why)
{
	if (app->metrics != NULL && why > IDEM_ENDPOINT_KEEP &&
	    why <= IDEM_ENDPOINT_FAILING)
		atomic_fetch_add(&app->metrics->disabled[why], 1);
}

/* The topic counters of one kind, "other" last when it counted any. */
static void
topics_print(struct idem_buf *b, struct idem_metrics *m, const char *name,
    const char *help, enum idem_event_metric which)
{
	size_t	i, n = atomic_load(&m->ntopics);

	idem_buf_addf(b, "# HELP %s %s\n# TYPE %s counter\n", name, help,
	    name);
	for (i = 0; i < n; i++)
		idem_buf_addf(b, "%s{topic=\"%s\"} %llu\n", name,
		    m->topics[i].name, atomic_load(&m->topics[i].n[which]));
	if (n == TOPICS_MAX)
		idem_buf_addf(b, "%s{topic=\"other\"} %llu\n", name,
		    atomic_load(&m->topics[TOPICS_MAX].n[which]));
}

static const char *const wait_labels[IDEM_WAIT__COUNT] = {
	[IDEM_WAIT_REPLAYED] = "replayed", [IDEM_WAIT_OTHER] = "other",
	[IDEM_WAIT_TIMEOUT] = "timeout", [IDEM_WAIT_REFUSED] = "refused",
	[IDEM_WAIT_REFUSED_TENANT] = "refused_tenant",
	[IDEM_WAIT_REFUSED_WORKER] = "refused_worker",
};

void
idem_metrics_wait(idem_app *app, enum idem_wait_outcome o)
{
	if (app->metrics != NULL && o >= 0 && o < IDEM_WAIT__COUNT)
		atomic_fetch_add(&app->metrics->waits[o], 1);
}

void
idem_metrics_fd_freed(idem_app *app)
{
	if (app->metrics != NULL)
		atomic_fetch_add(&app->metrics->fds_freed, 1);
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

/* A figure without labels: its HELP, its TYPE (counter or gauge) and
 * its value. */
static void
figure(struct idem_buf *b, const char *name, const char *type,
    const char *help, unsigned long long v)
{
	idem_buf_addf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help,
	    name, type, name, v);
}

/* Requests by route and outcome. */
static void
render_requests(idem_app *app, struct idem_metrics *m, struct idem_buf *b)
{
	const struct idem_route	*rt;
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
}

/* Connections refused, waits, and the bytes held. */
static void
render_connections(idem_app *app, struct idem_metrics *m,
    struct idem_buf *b)
{
	size_t	 i;

	idem_buf_adds(b, "# HELP idem_connections_rejected_total FastCGI "
	    "connections closed for their input (malformed, over a limit), "
	    "for a request not whole within read_timeout, for a peer not "
	    "allowed (peer; metrics_peer: on [metrics] listen), for an "
	    "answer not taken within write_timeout, or not taken with "
	    "max_buffered held (max_buffered); fd_limit: times a listener "
	    "found a connection waiting and no descriptor left (it waits in "
	    "the backlog).\n"
	    "# TYPE idem_connections_rejected_total counter\n");
	for (i = 0; i < IDEM_FCGI_REJECT__COUNT; i++)
		idem_buf_addf(b, "idem_connections_rejected_total{reason=\"%s\"} "
		    "%llu\n", idem_fcgi_reason((enum idem_fcgi_rc)i),
		    atomic_load(&m->rejected[i]));
	idem_buf_adds(b, "# HELP idem_prefer_waits_total Duplicates of a key "
	    "in flight that asked to wait (Prefer: wait), by how the wait "
	    "ended: replayed the first answer, other (executed after the "
	    "first stored nothing, or failed), timeout (then 409), or a 409 "
	    "at once: refused (max_waiters were waiting), refused_tenant "
	    "(max_waiters_per_tenant of its tenant were), refused_worker "
	    "(waiters and owners would have held every thread).\n"
	    "# TYPE idem_prefer_waits_total counter\n");
	for (i = 0; i < IDEM_WAIT__COUNT; i++)
		idem_buf_addf(b, "idem_prefer_waits_total{outcome=\"%s\"} "
		    "%llu\n", wait_labels[i], atomic_load(&m->waits[i]));
	figure(b, "idem_prefer_waiters", "gauge", "Duplicates waiting now for "
	    "the first request with their key (at most max_waiters).",
	    (unsigned long long)atomic_load(&app->waiters));
	idem_buf_addf(b, "idem_connections_rejected_total{reason="
	    "\"metrics_peer\"} %llu\n", atomic_load(&m->metrics_refused));
	figure(b, "idem_buffered_bytes", "gauge", "Bytes of request bodies "
	    "being received and answers waiting for their peer, held now (at "
	    "most [server] max_buffered).", atomic_load(&app->buffered));
	figure(b, "idem_bodies_refused_total", "counter", "Requests answered "
	    "503 before their body because holding it would pass [server] "
	    "max_buffered.", atomic_load(&m->bodies_refused));
}

/* What the janitor did to keys. */
static void
render_keys(struct idem_metrics *m, struct idem_buf *b)
{
	const struct {
		const char	*name, *help;
		atomic_ullong	*v;
	} keys[] = {
		{ "idem_keys_evicted_total", "Expired keys evicted by this "
		  "process.", &m->evicted },
		{ "idem_keys_remembered_total", "Evicted keys of routes with "
		  "remember whose trace this process kept.", &m->remembered },
		{ "idem_remembered_keys_evicted_total", "Traces of evicted keys "
		  "forgotten by this process (their remember window passed).",
		  &m->forgotten },
		{ "idem_stuck_keys_reclaimed_total", "Stuck in-progress keys "
		  "reclaimed by this process.", &m->reclaimed },
		{ "idem_keys_completed_total", "Abandoned phased keys driven to "
		  "completion by this process's completer.", &m->completed },
	};
	size_t	i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		figure(b, keys[i].name, "counter", keys[i].help,
		    atomic_load(keys[i].v));
}

/* The heartbeat's leases and the janitor's runs. */
static void
render_background(idem_app *app, struct idem_metrics *m,
    struct idem_buf *b)
{
	static const char *const hb[][2] = {
		{ "idem_lease_renewals_total", "Leases renewed by this "
		  "process's heartbeat." },
		{ "idem_lease_renewal_failures_total", "Leases the heartbeat "
		  "could not renew (database error, or no longer held)." },
		{ "idem_heartbeat_renewals_failed_total", "Renewal attempts of "
		  "the heartbeat that failed or had no answer within half an "
		  "interval (cancelled, on a new session next)." } };
	unsigned long long	 n[3];
	size_t			 i;

	/* Kept by the heartbeat itself (a lower layer), read here. */
	idem_heartbeat_counts(app->heartbeat, &n[0], &n[1], &n[2]);
	for (i = 0; i < 3; i++)
		figure(b, hb[i][0], "counter", hb[i][1], n[i]);
	/* A Unix time, never negative. */
	figure(b, "idem_janitor_last_success_timestamp_seconds", "gauge",
	    "When this process's janitor last finished a run without a "
	    "database error (0: never).",
	    (unsigned long long)atomic_load(&m->janitor_ok));
	idem_buf_addf(b, "# HELP idem_evict_interval_seconds The configured "
	    "[idempotency] evict_interval.\n"
	    "# TYPE idem_evict_interval_seconds gauge\n"
	    "idem_evict_interval_seconds %g\n",
	    (double)app->cfg.evict_interval_ms / 1000);
	hist_print(b, "idem_janitor_run_duration_seconds", "Duration of one "
	    "janitor run (evict, reclaim, complete).", &m->janitor_run);
}

/* The database pool, request durations and webhook deliveries. */
static void
render_pool_events(idem_app *app, struct idem_metrics *m,
    struct idem_buf *b)
{
	unsigned	 idle, busy;

	idem_pool_counts(app->pool, &idle, &busy);
	idem_buf_addf(b, "# HELP idem_pool_connections Database pool "
	    "connections.\n# TYPE idem_pool_connections gauge\n"
	    "idem_pool_connections{state=\"idle\"} %u\n"
	    "idem_pool_connections{state=\"busy\"} %u\n", idle, busy);
	figure(b, "idem_pool_size", "gauge", "Connections the pool may open "
	    "([database] pool_size).", app->cfg.pool_size);
	hist_print(b, "idem_pool_wait_seconds", "Time waited for a pool "
	    "connection.", &m->pool_wait);
	hist_print(b, "idem_request_duration_seconds", "Request duration.",
	    &m->duration);
	topics_print(b, m, "idem_events_delivered_total", "Webhook deliveries "
	    "answered 2xx by this process's dispatcher, by event type.",
	    IDEM_EV_DELIVERED);
	topics_print(b, m, "idem_events_failed_total", "Webhook delivery "
	    "attempts that failed (no answer, or not 2xx), by event type.",
	    IDEM_EV_FAILED);
	topics_print(b, m, "idem_events_dead_total", "Webhook deliveries "
	    "given up (max_attempts, max_age, endpoint deleted), by event "
	    "type.", IDEM_EV_DEAD);
	hist_print(b, "idem_event_delivery_seconds", "From an event's commit "
	    "to its endpoint's 2xx answer.", &m->event_latency);
	figure(b, "idem_events_evicted_total", "counter", "Delivered and dead "
	    "events evicted after [webhooks] retention by this process.",
	    atomic_load(&m->events_evicted));
	idem_buf_addf(b, "# HELP idem_webhook_endpoints_disabled_total Webhook "
	    "endpoints this process's dispatcher disabled, by reason (gone: "
	    "a 410 answer; failing: every attempt failed for [webhooks] "
	    "disable_after).\n"
	    "# TYPE idem_webhook_endpoints_disabled_total counter\n"
	    "idem_webhook_endpoints_disabled_total{reason=\"gone\"} %llu\n"
	    "idem_webhook_endpoints_disabled_total{reason=\"failing\"} %llu\n",
	    atomic_load(&m->disabled[IDEM_ENDPOINT_GONE]),
	    atomic_load(&m->disabled[IDEM_ENDPOINT_FAILING]));
}

/* The one row of sql; NULL (logged) when the store did not give it. */
static PGresult *
store_row(PGconn *db, const char *sql)
{
	PGresult	*r = PQexec(db, sql);

	if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQntuples(r) == 1)
		return r;
	idem_log(IDEM_LOG_WARN, "metrics: %s", PQerrorMessage(db));
	PQclear(r);
	return NULL;
}

/* The store's gauges: each statement's one row, a gauge a column (name
 * and help; up to 4, a NULL name ends them). */
static const struct {
	const char	*sql;
	const char	*gauges[4][2];
} store_gauges[] = {
	/* Index-backed (sql/006): the cost does not grow with the table. */
	{ "SELECT * FROM idem_store_gauges()", {
	    { "idem_oldest_live_key_age_seconds", "Age of the oldest "
	      "unexpired key." },
	    { "idem_eviction_lag_seconds", "Age of the oldest expired key "
	      "that eviction would delete." },
	    { "idem_in_progress_keys", "Keys in progress." },
	    { "idem_unfinished_keys", "Phased keys past their TTL and past a "
	      "recovery point, not completed (never evicted: for the "
	      "completer or an operator)." } } },
	/* The outbox (sql/011, partial indexes). */
	{ "SELECT * FROM idem_outbox_pending()", {
	    { "idem_events_pending", "Webhook deliveries not yet delivered "
	      "nor dead." },
	    { "idem_events_oldest_pending_seconds", "Age of the oldest "
	      "pending webhook delivery (0: none)." } } },
	/* Set aside by the completer (sql/009, a partial index). */
	{ "SELECT idem_attention_count()", {
	    { "idem_keys_attention", "Abandoned phased keys the completer "
	      "gave up on: they need an operator (idemctl key "
	      "show|retry|abandon)." } } },
};

/* The store's gauges, read from db. */
static void
render_store(PGconn *db, struct idem_buf *b)
{
	const char *const	(*g)[2];
	PGresult		*r;
	size_t			 i;
	int			 c;

	for (i = 0; i < sizeof(store_gauges) / sizeof(store_gauges[0]); i++) {
		if ((r = store_row(db, store_gauges[i].sql)) == NULL)
			continue;
		g = store_gauges[i].gauges;
		for (c = 0; c < 4 && g[c][0] != NULL; c++)
			idem_buf_addf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n",
			    g[c][0], g[c][1], g[c][0], g[c][0],
			    PQgetvalue(r, 0, c));
		PQclear(r);
	}
}

/* The whole exposition into b; the store's gauges only when db. */
static void
render(idem_app *app, PGconn *db, struct idem_buf *b)
{
	struct idem_metrics	*m = app->metrics;

	render_requests(app, m, b);
	render_connections(app, m, b);
	render_keys(m, b);
	render_background(app, m, b);
	render_pool_events(app, m, b);
	if (db != NULL)
		render_store(db, b);
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
 * thread polls the listener and up to SRV_CONNS connections, each with
 * HTTP_IO_MS to send its head and take its answer.  The peer is checked
 * at accept, before a byte is read: on TCP its address ([metrics] allow),
 * on a unix socket its uid (SO_PEERCRED, [metrics] allow_uid) besides the
 * file's mode and group.  An idle connection costs a slot and no time:
 * when every slot is taken, the oldest connection still owing its head
 * makes room, so idle peers cannot keep a scrape out.
 */
#define HTTP_HEAD_MAX	8192
#define HTTP_IO_MS	2000
#define SRV_CONNS	32
/* Paused at the descriptor limit, how often the thread looks whether the
 * process freed one (idem_metrics_fd_freed). */
#define FREED_CHECK_MS	25

struct mconn {
	int		 fd;		/* -1: free slot */
	long long	 until_us;	/* head and answer due by then */
	size_t		 n;		/* head bytes read */
	struct idem_buf	 out;		/* the answer, once the head is in */
	size_t		 off;		/* bytes of out written */
	char		 head[HTTP_HEAD_MAX + 1];
};

struct idem_metrics_srv {
	idem_app	*app;
	int		 fd;
	int		 wake[2];
	pthread_t	 th;
	char		*allow_uid;	/* numeric uids, or NULL: any */
	unsigned long long refused;
	long long	 paused_ms;	/* accept failed (accept.h) then, or 0 */
	size_t		 paused_open;	/* connections open then */
	unsigned long long paused_freed;	/* fds_freed then */
	struct idem_ratelog limit_log;
	struct mconn	 c[SRV_CONNS];
};

static void
mconn_close(struct mconn *c)
{
	close(c->fd);
	c->fd = -1;
	idem_buf_free(&c->out);
	memset(&c->out, 0, sizeof(c->out));
}

/* A peer allowed to connect at all, told from accept()'s address. */
static int
peer_ok(struct idem_metrics_srv *srv, int fd, const struct sockaddr *sa,
    socklen_t sl)
{
	struct ucred	cr;
	socklen_t	cl = sizeof(cr);

	if (sa->sa_family == AF_UNIX)
		return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
		    idem_uid_allowed(srv->allow_uid, cr.uid, geteuid()) ==
		    IDEM_PEER_ALLOW;
	return idem_peer_allowed(srv->app->cfg.metrics_allow, sa, sl) ==
	    IDEM_PEER_ALLOW;
}

static void
refuse(struct idem_metrics_srv *srv, int fd, const struct sockaddr *sa)
{
	struct ucred	cr;
	socklen_t	cl = sizeof(cr);
	char		a[INET6_ADDRSTRLEN] = "?";

	atomic_fetch_add(&srv->app->metrics->metrics_refused, 1);
	if (idem_peer_log_due(++srv->refused)) {
		if (sa->sa_family == AF_UNIX &&
		    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
			snprintf(a, sizeof(a), "uid %u", (unsigned)cr.uid);
		else if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)
			    (const void *)sa)->sin_addr, a, sizeof(a));
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)
			    (const void *)sa)->sin6_addr, a, sizeof(a));
		idem_log(IDEM_LOG_WARN, "metrics: connection from %s refused: "
		    "not in [metrics] allow%s (%llu so far)", a,
		    sa->sa_family == AF_UNIX ? "_uid" : "", srv->refused);
	}
	close(fd);
}

/* The answer to a whole head, in c->out. */
static void
answer(idem_app *app, struct mconn *c)
{
	struct idem_buf	 b = { 0 };
	PGconn		*db;
	int		 status = 404, head;
	size_t		 m;

	/* GET, and HEAD: the same head without the body (RFC 9110 9.3.2). */
	head = strncmp(c->head, "HEAD ", 5) == 0;
	m = head ? 5 : 4;
	if ((head || strncmp(c->head, "GET ", 4) == 0) &&
	    strncmp(c->head + m, "/metrics", 8) == 0 &&
	    (c->head[m + 8] == ' ' || c->head[m + 8] == '?')) {
		db = idem_pool_acquire(app->pool,
		    app->cfg.acquire_timeout_ms, NULL);
		render(app, db, &b);
		if (db != NULL)
			idem_pool_release(app->pool, db);
		status = 200;
	} else
		idem_buf_adds(&b, "not found\n");
	idem_buf_addf(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %lu\r\nConnection: close\r\n\r\n", status,
	    status == 200 ? "OK" : "Not Found", status == 200 ?
	    "text/plain; version=0.0.4" : "text/plain",
	    (unsigned long)b.len);
	if (b.p != NULL && !head)
		idem_buf_add(&c->out, b.p, b.len);
	idem_buf_free(&b);
	if (c->out.p == NULL)		/* out of memory: close */
		c->out.len = 0;
	c->off = 0;
}

/* Readable or writable: 0 to keep the connection, -1 to close it. */
static int
progress(idem_app *app, struct mconn *c)
{
	ssize_t	k;

	if (c->out.p == NULL) {
		k = read(c->fd, c->head + c->n, HTTP_HEAD_MAX - c->n);
		if (k == -1 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (k <= 0)
			return -1;
		c->n += (size_t)k;
		c->head[c->n] = '\0';
		if (strstr(c->head, "\r\n\r\n") == NULL &&
		    strstr(c->head, "\n\n") == NULL && c->n < HTTP_HEAD_MAX)
			return 0;
		answer(app, c);
		if (c->out.p == NULL)
			return -1;
	}
	while (c->off < c->out.len) {
		k = write(c->fd, c->out.p + c->off, c->out.len - c->off);
		if (k == -1 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (k <= 0)
			return -1;
		c->off += (size_t)k;
	}
	return -1;			/* answered: Connection: close */
}

/* A slot for a new connection: a free one, else the oldest owing its head. */
static struct mconn *
slot(struct idem_metrics_srv *srv)
{
	struct mconn	*old = NULL;
	size_t		 i;

	for (i = 0; i < SRV_CONNS; i++) {
		if (srv->c[i].fd == -1)
			return &srv->c[i];
		if (srv->c[i].out.p == NULL &&
		    (old == NULL || srv->c[i].until_us < old->until_us))
			old = &srv->c[i];
	}
	if (old != NULL)
		mconn_close(old);
	return old;
}

/*
 * accept() failed with err: at a limit (or worse), the listener is not
 * polled until a connection of this one closes or IDEM_ACCEPT_RETRY_MS
 * passed, or the connection left waiting would make poll() spin.
 */
static void
accept_failed(struct idem_metrics_srv *srv, int err)
{
	enum idem_accept_verdict v = idem_accept_failed(err);
	unsigned long long	 n;

	size_t			 i;

	if (v == IDEM_ACCEPT_RETRY)
		return;
	srv->paused_ms = idem_now_us() / 1000;
	srv->paused_freed = atomic_load(&srv->app->metrics->fds_freed);
	for (srv->paused_open = 0, i = 0; i < SRV_CONNS; i++)
		srv->paused_open += srv->c[i].fd != -1;
	if (v == IDEM_ACCEPT_FD_LIMIT)
		idem_metrics_rejected(srv->app, IDEM_FCGI_FD_LIMIT);
	if ((n = idem_ratelog_note(&srv->limit_log, srv->paused_ms)) > 0)
		idem_log(IDEM_LOG_WARN, "metrics: accept: %s: not accepting "
		    "until a descriptor is freed, %d ms at most (%llu failed "
		    "accepts since the last line)", strerror(err),
		    IDEM_ACCEPT_RETRY_MS, n);
}

/*
 * Whether the listener is polled, with open connections at now_us: a
 * pause (accept_failed) ends once one of them closed, the process freed a
 * descriptor elsewhere, or on time; until then *ms (poll's timeout, -1:
 * none) is cut to FREED_CHECK_MS at most.
 */
static int
listener_polled(struct idem_metrics_srv *srv, size_t open, long long now_us,
    int *ms)
{
	long long	left;

	if (srv->paused_ms == 0)
		return 1;
	left = idem_accept_resume_in(srv->paused_ms, now_us / 1000);
	if (open < srv->paused_open || left == 0 || srv->paused_freed !=
	    atomic_load(&srv->app->metrics->fds_freed)) {
		srv->paused_ms = 0;
		return 1;
	}
	if (left > FREED_CHECK_MS)
		left = FREED_CHECK_MS;
	if (*ms == -1 || *ms > left)
		*ms = (int)left;
	return 0;
}

static void
accept_all(struct idem_metrics_srv *srv)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sl;
	struct mconn		*c;
	int			 fd;

	for (;;) {
		sl = sizeof(ss);
		if ((fd = accept4(srv->fd, (struct sockaddr *)&ss, &sl,
		    SOCK_CLOEXEC | SOCK_NONBLOCK)) == -1) {
			accept_failed(srv, errno);
			return;
		}
		if (!peer_ok(srv, fd, (struct sockaddr *)&ss, sl)) {
			refuse(srv, fd, (struct sockaddr *)&ss);
			continue;
		}
		if ((c = slot(srv)) == NULL) {
			close(fd);	/* every slot is answering */
			continue;
		}
		c->fd = fd;
		c->n = 0;
		c->head[0] = '\0';
		c->until_us = idem_now_us() + HTTP_IO_MS * 1000LL;
	}
}

static void *
metrics_srv(void *arg)
{
	struct idem_metrics_srv	*srv = arg;
	struct pollfd		 p[2 + SRV_CONNS];
	struct mconn		*idx[SRV_CONNS];
	long long		 now, next;
	size_t			 i, n;
	int			 ms;

	for (;;) {
		p[0].fd = srv->wake[0];
		p[0].events = POLLIN;
		p[1].fd = srv->fd;
		p[1].events = POLLIN;
		now = idem_now_us();
		next = -1;
		for (i = 0, n = 0; i < SRV_CONNS; i++) {
			if (srv->c[i].fd == -1)
				continue;
			if (srv->c[i].until_us <= now) {
				mconn_close(&srv->c[i]);	/* too slow */
				continue;
			}
			if (next == -1 || srv->c[i].until_us < next)
				next = srv->c[i].until_us;
			idx[n] = &srv->c[i];
			p[2 + n].fd = srv->c[i].fd;
			p[2 + n].events = srv->c[i].out.p == NULL ? POLLIN :
			    POLLOUT;
			p[2 + n].revents = 0;
			n++;
		}
		ms = next == -1 ? -1 : (int)((next - now) / 1000 + 1);
		if (!listener_polled(srv, n, now, &ms))
			p[1].fd = -1;		/* poll() skips it */
		if (poll(p, 2 + n, ms) == -1 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		for (i = 0; i < n; i++)
			if (p[2 + i].revents != 0 &&
			    progress(srv->app, idx[i]) == -1)
				mconn_close(idx[i]);
		if (p[1].revents & POLLIN)
			accept_all(srv);
	}
	for (i = 0; i < SRV_CONNS; i++)
		if (srv->c[i].fd != -1)
			mconn_close(&srv->c[i]);
	return NULL;
}

/*
 * [metrics] allow_uid as numeric uids: names resolved once, here, so that
 * the decision (idem_uid_allowed) stays pure.  NULL and 0 when unset; -1
 * for an unknown user.
 */
static int
resolve_uids(const char *list, char **out)
{
	struct idem_buf	 b = { 0 };
	struct passwd	*pw;
	char		 t[256], *end;
	const char	*p = list, *e;
	size_t		 n;

	*out = NULL;
	if (list == NULL)
		return 0;
	for (;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		for (e = p; *e != '\0' && *e != ',' && *e != ' '; e++)
			continue;
		if ((n = (size_t)(e - p)) >= sizeof(t))
			goto bad;
		memcpy(t, p, n);
		t[n] = '\0';
		p = e;
		if (t[0] >= '0' && t[0] <= '9') {
			(void)strtoul(t, &end, 10);
			if (*end != '\0')
				goto bad;
			idem_buf_addf(&b, "%s ", t);
		} else if ((pw = getpwnam(t)) != NULL)
			idem_buf_addf(&b, "%u ", (unsigned)pw->pw_uid);
		else
			goto bad;
	}
	if (b.p == NULL)
		return 0;
	*out = b.p;
	return 0;
bad:
	idem_log(IDEM_LOG_ERROR, "metrics: allow_uid: no user %s", t);
	idem_buf_free(&b);
	return -1;
}

int
idem_metrics_listen(idem_app *app)
{
	struct idem_metrics_srv	*srv;
	size_t			 i;

	if (app->cfg.metrics_listen == NULL || app->metrics == NULL)
		return 0;
	if ((srv = calloc(1, sizeof(*srv))) == NULL)
		return -1;
	srv->app = app;
	for (i = 0; i < SRV_CONNS; i++)
		srv->c[i].fd = -1;
	if (resolve_uids(app->cfg.metrics_allow_uid, &srv->allow_uid) == -1 ||
	    (srv->fd = idem_listen_addr(app->cfg.metrics_listen,
	    app->cfg.metrics_socket_mode, app->cfg.metrics_socket_group)) < 0) {
		free(srv->allow_uid);
		free(srv);
		return -1;
	}
	fcntl(srv->fd, F_SETFL, fcntl(srv->fd, F_GETFL) | O_NONBLOCK);
	if (pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK) == -1 ||
	    pthread_create(&srv->th, NULL, metrics_srv, srv) != 0) {
		close(srv->fd);
		free(srv->allow_uid);
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
	/* A scrape in progress is bounded by the pool wait. */
	if (write(srv->wake[1], "x", 1) != 1)
		idem_log(IDEM_LOG_WARN, "metrics: cannot wake the listener");
	pthread_join(srv->th, NULL);
	close(srv->fd);
	close(srv->wake[0]);
	close(srv->wake[1]);
	free(srv->allow_uid);
	free(srv);
	app->metrics->srv = NULL;
}
