/*
 * metrics.c - Prometheus text exposition of the process's counters and
 * histograms, plus figures of the key store read at scrape time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

static const double bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };
#define NB	(sizeof(bounds) / sizeof(bounds[0]))

struct hist {
	atomic_ullong	b[NB + 1];	/* last: +Inf */
	atomic_ullong	count;
	atomic_ullong	sum_us;
};

#define NOUT	IDEM_OUT__COUNT

struct idem_metrics {
	size_t		 nroutes;
	atomic_ullong	*requests;	/* [route][outcome] */
	struct hist	 duration;
	struct hist	 pool_wait;
	atomic_ullong	 evicted;
	atomic_ullong	 reclaimed;
	atomic_ullong	 completed;
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

	for (i = 0; i < NB && s > bounds[i]; i++)
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
idem_metrics_add(idem_app *app, int which, long n)
{
	if (app->metrics == NULL || n <= 0)
		return;
	atomic_fetch_add(which == IDEM_M_EVICTED ? &app->metrics->evicted :
	    which == IDEM_M_RECLAIMED ? &app->metrics->reclaimed :
	    &app->metrics->completed, (unsigned long long)n);
}

static void
hist_print(struct idem_buf *b, const char *name, const char *help,
    struct hist *h)
{
	unsigned long long	cum = 0;
	size_t			i;

	idem_buf_addf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help,
	    name);
	for (i = 0; i <= NB; i++) {
		cum += atomic_load(&h->b[i]);
		if (i < NB)
			idem_buf_addf(b, "%s_bucket{le=\"%g\"} %llu\n", name,
			    bounds[i], cum);
		else
			idem_buf_addf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name,
			    cum);
	}
	idem_buf_addf(b, "%s_sum %.6f\n%s_count %llu\n", name,
	    (double)atomic_load(&h->sum_us) / 1e6, name,
	    atomic_load(&h->count));
}

int
idem_metrics_handler(idem_req *req, void *arg)
{
	idem_app		*app = req->app;
	struct idem_metrics	*m = app->metrics;
	struct idem_buf		 b = { 0 };
	const struct idem_route	*rt;
	unsigned		 idle, busy;
	PGresult		*r = NULL;
	PGconn			*db;
	size_t			 i, o;
	int			 rc;

	(void)arg;
	idem_buf_adds(&b, "# HELP idem_requests_total Requests by route and "
	    "outcome.\n# TYPE idem_requests_total counter\n");
	for (i = 0; i < m->nroutes; i++) {
		rt = &app->router.routes[i];
		for (o = 0; o < NOUT; o++) {
			/* Idempotent routes never have a plain "ok". */
			if ((rt->flags & IDEM_ROUTE_IDEMPOTENT) ?
			    o == IDEM_OUT_NONE : (o != IDEM_OUT_NONE &&
			    o != IDEM_OUT_REJECTED && o != IDEM_OUT_ERROR))
				continue;
			idem_buf_addf(&b, "idem_requests_total{route=\"%s %s\","
			    "outcome=\"%s\"} %llu\n", rt->method, rt->pattern,
			    outcome_label(o),
			    atomic_load(&m->requests[i * NOUT + o]));
		}
	}
	idem_buf_addf(&b, "# HELP idem_keys_evicted_total Expired keys "
	    "evicted by this process.\n# TYPE idem_keys_evicted_total counter\n"
	    "idem_keys_evicted_total %llu\n", atomic_load(&m->evicted));
	idem_buf_addf(&b, "# HELP idem_stuck_keys_reclaimed_total Stuck "
	    "in-progress keys reclaimed by this process.\n"
	    "# TYPE idem_stuck_keys_reclaimed_total counter\n"
	    "idem_stuck_keys_reclaimed_total %llu\n",
	    atomic_load(&m->reclaimed));
	idem_buf_addf(&b, "# HELP idem_keys_completed_total Abandoned phased "
	    "keys driven to completion by this process's completer.\n"
	    "# TYPE idem_keys_completed_total counter\n"
	    "idem_keys_completed_total %llu\n", atomic_load(&m->completed));
	idem_pool_counts(app->pool, &idle, &busy);
	idem_buf_addf(&b, "# HELP idem_pool_connections Database pool "
	    "connections.\n# TYPE idem_pool_connections gauge\n"
	    "idem_pool_connections{state=\"idle\"} %u\n"
	    "idem_pool_connections{state=\"busy\"} %u\n", idle, busy);
	hist_print(&b, "idem_pool_wait_seconds", "Time waited for a pool "
	    "connection.", &m->pool_wait);
	hist_print(&b, "idem_request_duration_seconds", "Request duration.",
	    &m->duration);

	if ((db = idem_req_conn(req)) != NULL)
		r = PQexec(db, "SELECT"
		    " coalesce(extract(epoch FROM now() - min(created_at)"
		    "   FILTER (WHERE expires_at > now())), 0),"
		    " coalesce(extract(epoch FROM now() - min(expires_at)"
		    "   FILTER (WHERE expires_at <= now())), 0),"
		    " count(*) FILTER (WHERE state = 'in_progress'),"
		    " count(*) FILTER (WHERE state = 'in_progress'"
		    "   AND recovery_point <> 'started' AND expires_at <= now())"
		    " FROM idempotency_keys");
	if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK) {
		idem_buf_addf(&b, "# HELP idem_oldest_live_key_age_seconds Age "
		    "of the oldest unexpired key.\n"
		    "# TYPE idem_oldest_live_key_age_seconds gauge\n"
		    "idem_oldest_live_key_age_seconds %s\n"
		    "# HELP idem_eviction_lag_seconds Age of the oldest "
		    "expired key not yet evicted.\n"
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
	}
	PQclear(r);
	rc = b.p != NULL ? idem_resp_body(req, 200,
	    "text/plain; version=0.0.4", b.p, b.len) : -1;
	idem_buf_free(&b);
	return rc;
}
