/*
 * dispatcher.c - the outbox's deliveries: up to [webhooks] concurrency
 * calls in flight at once (libcurl's multi interface, idem_http_batch),
 * at most one per endpoint.  Whenever a slot is free, the due candidates
 * are read (each endpoint's next due delivery), the ones to take chosen
 * round-robin across tenants within each tenant's share
 * (lib/pure/delivery.c), and taken with up to [webhooks] batch of their
 * endpoints' deliveries, called one after the other in their slot (FOR
 * UPDATE SKIP LOCKED, in a statement that commits before anyone is
 * called, so no transaction is held across the network and pgbouncer's
 * transaction mode is enough).  Each is POSTed, signed (Standard
 * Webhooks), to its endpoint, and its attempt recorded: delivered, again
 * after a backoff with jitter (no sooner than a 429's or 503's
 * Retry-After), or dead; the endpoint's health with it.  A 410, or
 * failing for [webhooks] disable_after, disables the endpoint.  Any
 * number of dispatchers run at once, in any number of processes.  It
 * runs on a thread of the application ([webhooks]
 * dispatcher) or once apart (PROGRAM deliver); delivered and dead events
 * are evicted after [webhooks] retention in bounded batches, every
 * [idempotency] evict_interval.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "private.h"
#include "delivery.h"
#include "outbox.h"
#include "service.h"

/* The eviction batches one run makes at most, so that a backlog of old
 * events delays no delivery for long; the next run goes on. */
#define EVICT_BATCHES	10
/* The longest pause between polls while the database fails. */
#define ERROR_PAUSE_MS	30000
/* The longest wait on calls in flight before looking at a stop. */
#define SETTLE_MS	250
/* Takes in a row that others won before a deliver run ends. */
#define RACES_MAX	100
/* Candidates read for each slot free. */
#define CANDIDATES_PER_SLOT	4

struct idem_dispatcher {
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 stop;
	int		 done;	/* the thread has returned */
};

/* Columns of idem_outbox_take(). */
enum { C_ID, C_EVENT, C_TYPE, C_BODY, C_URL, C_SECRET, C_DELETED,
	C_ATTEMPTS, C_AGE, C_ENDPOINT, C_TENANT, C_DISABLED, C_TRACEPARENT };

/* A take's rows, shared by the slots that call them. */
struct taken {
	PGresult	*t;
	int		 refs;
};

/* A slot: the delivery whose call is in flight (or whose outcome is being
 * recorded), and the rest of its endpoint's taken with it, called one
 * after the other. */
struct flight {
	idem_http	*h;		/* NULL: the slot is free */
	long long	 id, endpoint, tenant, age_ms;
	long		 attempts;
	char		 event[IDEM_EVENT_ID_MAX];
	char		 topic[IDEM_EVENT_TYPE_MAX + 1];
	struct taken	*tk;		/* NULL: nothing queued */
	int		*rows;		/* of tk->t, this endpoint's */
	int		 nrows, next;	/* next: the first not called */
};

/* One dispatcher's calls in flight. */
struct deliveries {
	idem_app		*app;
	idem_http_batch		*batch;
	struct flight		*f;		/* [n] */
	long			 n, busy;
	long long		 after;		/* the tenant served last */
	int			 unrecorded;	/* an outcome was not written */
	int			 raced;		/* others took what was chosen */
	long			 room;		/* deliveries a take may take */
	struct idem_deliver_counts *counts;
};

/* A random 32-bit value for the jitter (0 if none can be had). */
static uint32_t
jitter_rnd(void)
{
	uint32_t	v = 0;

	if (idem_random_bytes((unsigned char *)&v, sizeof(v)) == -1)
		return 0;
	return v;
}

/* One statement on a pool connection; its result (PQclear it) or NULL. */
static PGresult *
exec(idem_app *app, const char *sql, int n, const char *const *vals)
{
	PGconn		*db;
	PGresult	*r;

	if ((db = idem_pool_acquire(app->pool, app->cfg.acquire_timeout_ms,
	    NULL)) == NULL)
		return NULL;
	r = PQexecParams(db, sql, n, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		idem_log(IDEM_LOG_ERROR, "dispatcher: %s", PQerrorMessage(db));
		PQclear(r);
		r = NULL;
	}
	idem_pool_release(app->pool, db);
	return r;
}

/* What a row of the take says of its delivery. */
static void
flight_of(struct flight *f, const PGresult *t, int row)
{
	const char	*type = PQgetvalue(t, row, C_TYPE);

	f->id = strtoll(PQgetvalue(t, row, C_ID), NULL, 10);
	f->endpoint = strtoll(PQgetvalue(t, row, C_ENDPOINT), NULL, 10);
	f->tenant = strtoll(PQgetvalue(t, row, C_TENANT), NULL, 10);
	f->age_ms = strtoll(PQgetvalue(t, row, C_AGE), NULL, 10);
	f->attempts = strtol(PQgetvalue(t, row, C_ATTEMPTS), NULL, 10);
	snprintf(f->event, sizeof(f->event), "%s", PQgetvalue(t, row,
	    C_EVENT));
	/* The metrics' label (checked: it goes into the exposition as is). */
	snprintf(f->topic, sizeof(f->topic), "%s", idem_event_type_ok(type) ?
	    type : "other");
}

/*
 * The signed request of row, or NULL with err saying why it cannot be
 * made: then *hopeless when it never can (the endpoint was deleted or
 * disabled, its secret is not valid).
 */
static idem_http *
request_of(idem_app *app, const PGresult *t, int row, int *hopeless,
    char *err, size_t errlen)
{
	const struct idem_cfg	*c = &app->cfg;
	char			 sig[IDEM_WEBHOOK_SIGNATURE_MAX], ts[24];
	const char		*body = PQgetvalue(t, row, C_BODY);
	size_t			 len = (size_t)PQgetlength(t, row, C_BODY);
	long long		 now = (long long)time(NULL);
	idem_http		*h;

	*hopeless = 1;
	if (PQgetvalue(t, row, C_DELETED)[0] == 't') {
		snprintf(err, errlen, "endpoint deleted");
		return NULL;
	}
	if (!PQgetisnull(t, row, C_DISABLED)) {
		snprintf(err, errlen, "endpoint disabled (%s)",
		    PQgetvalue(t, row, C_DISABLED));
		return NULL;
	}
	if (idem_webhook_sign(PQgetvalue(t, row, C_SECRET),
	    PQgetvalue(t, row, C_EVENT), now, body, len, sig,
	    sizeof(sig)) == -1) {
		snprintf(err, errlen, "the endpoint's secret is not valid");
		return NULL;
	}
	*hopeless = 0;
	idem_fmt_int(ts, now);
	if ((h = idem_http_new("POST", PQgetvalue(t, row, C_URL))) == NULL ||
	    idem_http_header(h, "webhook-id", PQgetvalue(t, row, C_EVENT)) ==
	    -1 || idem_http_header(h, "webhook-timestamp", ts) == -1 ||
	    idem_http_header(h, "webhook-signature", sig) == -1 ||
	    (!PQgetisnull(t, row, C_TRACEPARENT) && idem_http_header(h,
	    "traceparent", PQgetvalue(t, row, C_TRACEPARENT)) == -1) ||
	    idem_http_body(h, "application/json", body, len) == -1) {
		idem_http_free(h);
		snprintf(err, errlen, "cannot build the request");
		return NULL;
	}
	idem_http_timeout_ms(h, c->wh_timeout_ms);
	idem_http_max_body(h, c->wh_max_response);
	idem_http_allow_private(h, c->wh_allow_private);
	idem_http_cancel_on(h, &app->stopping);
	return h;
}

static void	launch(struct deliveries *, struct flight *);

/* f's queue is done with: the take's rows freed with their last slot. */
static void
queue_release(struct flight *f)
{
	if (f->tk != NULL && --f->tk->refs == 0) {
		PQclear(f->tk->t);
		free(f->tk);
	}
	free(f->rows);
	f->tk = NULL;
	f->rows = NULL;
	f->nrows = f->next = 0;
}

/* Give back what was taken and not attempted: due at once, its attempt
 * not counted.  -1 when the database failed (it is due once its hold
 * lapses). */
static int
give_back(idem_app *app, const struct flight *f)
{
	char		 id[24], att[24];
	const char	*vals[2] = { id, att };
	PGresult	*r;

	idem_fmt_int(id, f->id);
	idem_fmt_int(att, f->attempts);
	r = exec(app, "SELECT idem_outbox_release($1::bigint, $2::integer)",
	    2, vals);
	PQclear(r);
	return r == NULL ? -1 : 0;
}

/* Give back f's queued deliveries not called yet. */
static void
queue_give_back(struct deliveries *d, struct flight *f)
{
	struct flight	g;
	int		db_down = 0;

	while (f->tk != NULL && f->next < f->nrows) {
		flight_of(&g, f->tk->t, f->rows[f->next++]);
		if (!db_down && give_back(d->app, &g) == -1)
			db_down = 1;
	}
	queue_release(f);
}

/* Disable f's endpoint for why: logged and counted once, by the
 * dispatcher that did it. */
static void
disable(struct deliveries *d, const struct flight *f,
    enum idem_endpoint_verdict why, const char *err)
{
	char		 ep[24];
	const char	*vals[2] = { ep, idem_endpoint_verdict_name(why) };
	PGresult	*r;

	idem_fmt_int(ep, f->endpoint);
	if ((r = exec(d->app, "SELECT idem_outbox_disable($1::bigint, $2)",
	    2, vals)) == NULL) {
		d->unrecorded = 1;
		return;
	}
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
		idem_metrics_endpoint_disabled(d->app, why);
		idem_log(IDEM_LOG_WARN, "dispatcher: webhook endpoint %s of "
		    "tenant %lld disabled (%s, last: %s); %s pending "
		    "deliveries died", ep, f->tenant, vals[1], err,
		    PQgetvalue(r, 0, 0));
	}
	PQclear(r);
}

/* A 2xx to f: recorded, counted. */
static void
record_delivered(struct deliveries *d, const struct flight *f, int status)
{
	char		 id[24], st[24];
	const char	*vals[2] = { id, st };
	PGresult	*r;

	idem_fmt_int(id, f->id);
	idem_fmt_int(st, status);
	r = exec(d->app, "SELECT idem_outbox_delivered($1::bigint, "
	    "$2::integer)", 2, vals);
	d->unrecorded |= r == NULL;
	if (r != NULL && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
		idem_metrics_event_latency(d->app,
		    (double)strtoll(PQgetvalue(r, 0, 0), NULL, 10) / 1000);
	PQclear(r);
	idem_metrics_event(d->app, f->topic, IDEM_EV_DELIVERED);
	d->counts->delivered++;
}

/*
 * f's attempt failed (status 0: no answer): recorded as a retry after the
 * backoff (or the receiver's retry_after_ms, >= 0, when longer) or dead;
 * the endpoint disabled when it answered 410 or has failed for
 * disable_after.
 */
static void
record_failed(struct deliveries *d, const struct flight *f, int status,
    int hopeless, const char *err, long long retry_after_ms)
{
	const struct idem_cfg		*c = &d->app->cfg;
	enum idem_endpoint_verdict	 v = IDEM_ENDPOINT_KEEP;
	enum idem_giveup		 g;
	enum idem_attempt		 a;
	char				 id[24], att[24], st[24], delay[24];
	const char			*vals[6] = { id, att, NULL, err, delay };
	PGresult			*r;

	if (!hopeless)
		v = idem_endpoint_verdict(status, 0, 0);
	/* A 410 is final: the delivery dies with its endpoint. */
	a = idem_attempt_outcome(status, hopeless || v != IDEM_ENDPOINT_KEEP,
	    f->attempts, c->wh_max_attempts, f->age_ms, c->wh_max_age_ms, &g);
	idem_fmt_int(id, f->id);
	idem_fmt_int(att, f->attempts);
	idem_fmt_int(st, status);
	vals[2] = status > 0 ? st : NULL;
	idem_fmt_int(delay, idem_retry_delay_ms(idem_backoff_ms(f->attempts,
	    c->wh_backoff_ms, c->wh_backoff_max_ms, jitter_rnd()),
	    retry_after_ms, c->wh_backoff_max_ms));
	vals[5] = a == IDEM_ATTEMPT_DEAD ? "true" : "false";
	r = exec(d->app, "SELECT idem_outbox_failed($1::bigint, $2::integer, "
	    "$3::integer, $4, $5::bigint, $6::boolean)", 6, vals);
	d->unrecorded |= r == NULL;
	if (v == IDEM_ENDPOINT_KEEP && !hopeless && r != NULL &&
	    PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
		v = idem_endpoint_verdict(status, strtoll(PQgetvalue(r, 0, 0),
		    NULL, 10), c->wh_disable_after_ms);
	PQclear(r);
	idem_metrics_event(d->app, f->topic, IDEM_EV_FAILED);
	d->counts->failed++;
	if (a == IDEM_ATTEMPT_DEAD) {
		d->counts->dead++;
		idem_metrics_event(d->app, f->topic, IDEM_EV_DEAD);
		idem_log(IDEM_LOG_WARN, "dispatcher: event %s to delivery %s "
		    "is dead (%s after %ld attempts): %s", f->event, id,
		    idem_giveup_name(g), f->attempts, err);
	} else
		idem_log(IDEM_LOG_INFO, "dispatcher: event %s, delivery %s, "
		    "attempt %ld failed (%s), again in %s ms", f->event, id,
		    f->attempts, err, delay);
	if (v != IDEM_ENDPOINT_KEEP)
		disable(d, f, v, err);
}

/* The Retry-After of a 429 or 503 answer in ms, -1 when none. */
static long long
retry_after(const idem_http_resp *resp, int status)
{
	long long	ms;

	if ((status != 429 && status != 503) || idem_retry_after_parse(
	    idem_http_resp_header(resp, "Retry-After"), (long long)time(NULL),
	    &ms) != IDEM_RETRY_AFTER_DELAY)
		return -1;
	return ms;
}

/* f's call ended with rc: its outcome recorded (or, abandoned for a stop,
 * the delivery given back) and its slot freed. */
static void
finished(struct deliveries *d, struct flight *f, enum idem_http_rc rc,
    idem_http_resp *resp, const char *why)
{
	char	err[512];
	int	status = resp != NULL ? idem_http_resp_status(resp) : 0;

	if (rc == IDEM_HTTP_STATUS)
		snprintf(err, sizeof(err), "HTTP %d", status);
	else if (rc != IDEM_HTTP_OK)
		snprintf(err, sizeof(err), "%s: %s", idem_http_rc_name(rc), why);
	if (rc != IDEM_HTTP_OK && rc != IDEM_HTTP_STATUS &&
	    atomic_load(&d->app->stopping))
		give_back(d->app, f);
	else if (rc == IDEM_HTTP_OK)
		record_delivered(d, f, status);
	else
		record_failed(d, f, status, 0, err, retry_after(resp, status));
	idem_http_resp_free(resp);
	idem_http_free(f->h);
	f->h = NULL;
	d->busy--;
	/* The endpoint asked for a pause (429, 503), is gone (410), or the
	 * outcome could not be written: the rest is given back. */
	if (status == 429 || status == 503 || status == 410 ||
	    d->unrecorded || atomic_load(&d->app->stopping))
		queue_give_back(d, f);
	launch(d, f);
}

/* Start the call of f's next queued delivery; the ones that cannot be
 * called are recorded at once.  With none left the slot is free. */
static void
launch(struct deliveries *d, struct flight *f)
{
	char	 err[512], why[256];
	int	 hopeless, row;

	while (f->tk != NULL && f->next < f->nrows) {
		row = f->rows[f->next++];
		flight_of(f, f->tk->t, row);
		err[0] = why[0] = '\0';
		if ((f->h = request_of(d->app, f->tk->t, row, &hopeless, err,
		    sizeof(err))) == NULL) {
			record_failed(d, f, 0, hopeless, err, -1);
			continue;
		}
		d->busy++;
		if (idem_http_batch_add(d->batch, f->h, f, why, sizeof(why)) !=
		    IDEM_HTTP_OK)
			finished(d, f, IDEM_HTTP_FAIL, NULL, why);
		return;
	}
	queue_release(f);
}

/* "{1,2,3}": a bigint[] literal of n values. */
static void
int_array(struct idem_buf *b, const long long *v, size_t n)
{
	size_t	i;

	idem_buf_addc(b, '{');
	for (i = 0; i < n; i++)
		idem_buf_addf(b, "%s%lld", i > 0 ? "," : "", v[i]);
	idem_buf_addc(b, '}');
	idem_buf_nul(b);
}

/*
 * The due candidates, the ones chosen among them (at most want), in ids
 * as a bigint[] literal: how many, or -1 when the database failed.
 */
static long
choose(struct deliveries *d, long want, struct idem_buf *ids)
{
	struct idem_candidate	 c[IDEM_FAIR_MAX];
	long long		 eps[64], tenants[64], cid[IDEM_FAIR_MAX];
	long long		 chosen[IDEM_FAIR_MAX];
	size_t			 take[IDEM_FAIR_MAX], i, n, nb = 0, k;
	struct idem_buf		 busy = { 0 };
	char			 after[24], lim[24];
	const char		*vals[4] = { d->app->cfg.wh_ordered ? "true" :
				    "false", NULL, after, lim };
	PGresult		*r;

	for (i = 0; i < (size_t)d->n && nb < 64; i++)
		if (d->f[i].h != NULL) {
			eps[nb] = d->f[i].endpoint;
			tenants[nb++] = d->f[i].tenant;
		}
	int_array(&busy, eps, nb);
	vals[1] = busy.p;
	idem_fmt_int(after, d->after);
	idem_fmt_int(lim, d->n * CANDIDATES_PER_SLOT);
	r = exec(d->app, "SELECT * FROM idem_outbox_candidates($1::boolean, "
	    "$2::bigint[], $3::bigint, $4::bigint)", 4, vals);
	idem_buf_free(&busy);
	if (r == NULL)
		return -1;
	n = (size_t)PQntuples(r) < IDEM_FAIR_MAX ? (size_t)PQntuples(r) :
	    IDEM_FAIR_MAX;
	for (i = 0; i < n; i++) {
		cid[i] = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
		c[i].tenant = strtoll(PQgetvalue(r, (int)i, 1), NULL, 10);
		c[i].rank = strtol(PQgetvalue(r, (int)i, 2), NULL, 10);
	}
	PQclear(r);
	k = idem_fair_pick(c, n, tenants, nb, d->n, want, &d->after, take);
	for (i = 0; i < k; i++)
		chosen[i] = cid[take[i]];
	int_array(ids, chosen, k);
	return (long)k;
}

/* Queue row of tk in the slot of its endpoint, or a free one: that
 * slot, or NULL when none is free. */
static struct flight *
enqueue_row(struct deliveries *d, struct taken *tk, int row)
{
	long long	 ep = strtoll(PQgetvalue(tk->t, row, C_ENDPOINT), NULL,
			    10);
	struct flight	*f = NULL;
	int		*r;
	long		 i;

	for (i = 0; i < d->n && f == NULL; i++)
		if (d->f[i].tk == tk && d->f[i].endpoint == ep)
			f = &d->f[i];
	for (i = 0; i < d->n && f == NULL; i++)
		if (d->f[i].h == NULL && d->f[i].tk == NULL) {
			f = &d->f[i];
			f->tk = tk;
			f->endpoint = ep;
			tk->refs++;
		}
	if (f == NULL || (r = reallocarray(f->rows, (size_t)f->nrows + 1,
	    sizeof(*r))) == NULL)
		return NULL;
	f->rows = r;
	f->rows[f->nrows++] = row;
	return f;
}

/* Take the deliveries ids (a bigint[] literal) and, unordered, more of
 * their endpoints', and start their calls: how many were taken, or -1
 * when the database failed. */
static long
take_ids(struct deliveries *d, const char *ids, long k)
{
	const struct idem_cfg	*c = &d->app->cfg;
	long			 per = c->wh_ordered ? 1 : c->wh_batch;
	char			 hold[24], pe[24];
	const char		*vals[3] = { ids, hold, pe };
	struct taken		*tk;
	struct flight		 g;
	long			 i;
	int			 row, n;

	if (d->room > 0 && per > d->room / k)
		per = d->room / k > 1 ? d->room / k : 1;
	/* The last of an endpoint's waits for the calls before it, each
	 * timeout at most; then its outcome is written. */
	idem_fmt_int(hold, per * (c->wh_timeout_ms + 1000) + 5000);
	idem_fmt_int(pe, per);
	if ((tk = calloc(1, sizeof(*tk))) == NULL)
		return -1;
	if ((tk->t = exec(d->app, "SELECT * FROM idem_outbox_take("
	    "$1::bigint[], $2::bigint, $3::integer) ORDER BY endpoint, id", 3,
	    vals)) == NULL) {
		free(tk);
		return -1;
	}
	tk->refs = 1;	/* this function's, until every slot has its rows */
	n = PQntuples(tk->t);
	for (row = 0; row < n; row++)
		if (enqueue_row(d, tk, row) == NULL) {
			/* Never more endpoints than free slots; if so, not
			 * called. */
			flight_of(&g, tk->t, row);
			give_back(d->app, &g);
		}
	for (i = 0; i < d->n; i++)
		if (d->f[i].tk == tk && d->f[i].h == NULL)
			launch(d, &d->f[i]);
	if (--tk->refs == 0) {
		PQclear(tk->t);
		free(tk);
	}
	return n;
}

/* Take up to want more (within the free slots and [webhooks] batch) and
 * start their calls: how many were taken, or -1 when the database
 * failed.  Candidates another dispatcher took first are chosen again
 * among the new ones, a few times. */
static long
take_more(struct deliveries *d, long want)
{
	struct idem_buf	 ids = { 0 };
	long		 k, n = 0;
	int		 tries;

	if (want <= 0 || want > d->n - d->busy)
		want = d->n - d->busy;
	d->raced = 0;
	for (tries = 0; tries < 3 && n == 0 && want > 0; tries++) {
		if ((k = choose(d, want, &ids)) > 0)
			n = take_ids(d, ids.p, k);
		idem_buf_free(&ids);
		if (k <= 0)
			return k;
	}
	d->raced = n == 0 && want > 0;
	return n;
}

/* Let the calls run up to ms and record each that ended: how many. */
static long
settle(struct deliveries *d, long ms)
{
	idem_http_resp		*resp;
	enum idem_http_rc	 rc;
	char			 why[256];
	void			*tag;
	long			 n = 0;

	idem_http_batch_wait(d->batch, ms);
	while (idem_http_batch_done(d->batch, &tag, &rc, &resp, why,
	    sizeof(why))) {
		finished(d, tag, rc, resp, why);
		n++;
	}
	return n;
}

/* Drop the calls still in flight (stopping): each given back. */
static void
abandon(struct deliveries *d)
{
	struct flight	*f;
	int		 db_down = 0;

	while ((f = idem_http_batch_abandon(d->batch)) != NULL) {
		if (!db_down && give_back(d->app, f) == -1)
			db_down = 1;
		idem_http_free(f->h);
		f->h = NULL;
		d->busy--;
		queue_give_back(d, f);
	}
}

static int
deliveries_init(struct deliveries *d, idem_app *app,
    struct idem_deliver_counts *counts)
{
	memset(d, 0, sizeof(*d));
	d->app = app;
	d->counts = counts;
	d->n = app->cfg.wh_concurrency > 0 ? app->cfg.wh_concurrency : 1;
	if ((d->f = calloc((size_t)d->n, sizeof(*d->f))) == NULL ||
	    (d->batch = idem_http_batch_new((size_t)d->n)) == NULL) {
		free(d->f);
		return -1;
	}
	return 0;
}

static void
deliveries_free(struct deliveries *d)
{
	abandon(d);
	idem_http_batch_free(d->batch);
	free(d->f);
}
/* Evict up to EVICT_BATCHES batches: the events evicted, or -1. */
static long
evict(idem_app *app)
{
	char		 ret[24], lim[24];
	const char	*vals[2] = { ret, lim };
	PGresult	*r;
	long		 n, total = 0;
	int		 i;

	idem_fmt_int(ret, app->cfg.wh_retention_ms);
	idem_fmt_int(lim, app->cfg.evict_batch);
	for (i = 0; i < EVICT_BATCHES && !atomic_load(&app->stopping); i++) {
		if ((r = exec(app, "SELECT idem_outbox_evict($1::bigint, "
		    "$2::bigint)", 2, vals)) == NULL)
			return -1;
		n = PQntuples(r) == 1 ? strtol(PQgetvalue(r, 0, 0), NULL, 10) :
		    0;
		PQclear(r);
		total += n;
		if (n < app->cfg.evict_batch)
			break;
	}
	idem_metrics_add(app, IDEM_M_EVENTS_EVICTED, total);
	if (total > 0)
		idem_log(IDEM_LOG_INFO, "dispatcher: evicted %ld events", total);
	return total;
}

int
idem_deliver_run(idem_app *app, long max, struct idem_deliver_counts *counts)
{
	struct deliveries	d;
	long			n = 0, taken = 0;
	int			again = 1, races = 0, rc = IDEM_RC_OK;

	memset(counts, 0, sizeof(*counts));
	if (deliveries_init(&d, app, counts) == -1)
		return IDEM_RC_FAIL;
	/* Take whenever a call ended (its slot, its endpoint's next), until
	 * nothing is due and nothing in flight. */
	while (!atomic_load(&app->stopping)) {
		n = 0;
		if (again && !d.unrecorded && (max <= 0 || taken < max)) {
			d.room = max > 0 ? max - taken : 0;
			if ((n = take_more(&d, max > 0 ? max - taken : 0)) ==
			    -1)
				d.unrecorded = 1;
			else
				taken += n;
		}
		/* Due ones that other dispatchers kept taking first: others
		 * may be due behind them (a bounded number of times). */
		races = d.raced ? races + 1 : 0;
		if (d.busy == 0 && n <= 0 && (!d.raced || races > RACES_MAX))
			break;
		again = d.busy == 0 ? 1 : settle(&d, SETTLE_MS * 4) > 0;
	}
	if (d.unrecorded)
		rc = IDEM_RC_FAIL;
	deliveries_free(&d);
	if (rc == IDEM_RC_OK && !atomic_load(&app->stopping) &&
	    (counts->evicted = evict(app)) == -1)
		return IDEM_RC_FAIL;
	return rc;
}

/* Sleep ms unless told to stop: 1 when stopping. */
static int
pause_ms(struct idem_dispatcher *d, long long ms)
{
	struct timespec	next;

	idem_deadline(CLOCK_REALTIME, ms, &next);
	return idem_service_wait(IDEM_SERVICE_OF(d, CLOCK_REALTIME), &next);
}

/* The wait before the next poll: an interval, and after errors in a row
 * later and later (up to ERROR_PAUSE_MS), so that a database down for a
 * while is not asked, and logged, every interval. */
static long long
poll_wait_ms(const idem_app *app, long errors)
{
	long long	ms = app->cfg.wh_interval_ms;

	if (errors > 0)
		ms = idem_backoff_ms(errors, ms, ms > ERROR_PAUSE_MS ? ms :
		    ERROR_PAUSE_MS, jitter_rnd());
	return ms;
}

static void *
dispatcher_main(void *arg)
{
	idem_app		*app = arg;
	struct idem_dispatcher	*d = app->dispatcher;
	struct idem_deliver_counts counts;
	struct deliveries	 w;
	long long		 next_evict = 0, next_take = 0, now, wait_ms;
	long			 n, errors = 0;

	memset(&counts, 0, sizeof(counts));
	if (deliveries_init(&w, app, &counts) == -1) {
		idem_log(IDEM_LOG_ERROR, "dispatcher: out of memory");
		goto out;
	}
	while (!pause_ms(d, 0)) {
		now = idem_now_us();
		if (w.busy < w.n && now >= next_take) {
			n = take_more(&w, 0);
			errors = n == -1 || w.unrecorded ? errors + 1 : 0;
			w.unrecorded = 0;
			next_take = now + poll_wait_ms(app, errors) * 1000;
			if (n != -1 && now >= next_evict && evict(app) != -1)
				next_evict = now +
				    app->cfg.evict_interval_ms * 1000;
		}
		/* Every slot busy: only a call's end can change anything. */
		wait_ms = w.busy == w.n ? SETTLE_MS :
		    (next_take - idem_now_us()) / 1000;
		if (wait_ms < 0)
			wait_ms = 0;
		if (w.busy == 0) {
			if (pause_ms(d, wait_ms))
				break;
			continue;
		}
		/* A call ended: its slot is free, and its endpoint's next
		 * delivery may be due. */
		if (settle(&w, wait_ms < SETTLE_MS ? wait_ms : SETTLE_MS) > 0 &&
		    errors == 0)
			next_take = 0;
	}
	/* Calls still in flight are given back: due at once elsewhere. */
	deliveries_free(&w);
out:
	idem_service_exit(IDEM_SERVICE_OF(d, CLOCK_REALTIME));
	return NULL;
}

int
idem_dispatcher_start(idem_app *app)
{
	struct idem_dispatcher	*d;

	if (!app->cfg.wh_dispatcher)
		return 0;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return -1;
	app->dispatcher = d;
	if (idem_service_start(IDEM_SERVICE_OF(d, CLOCK_REALTIME),
	    dispatcher_main, app) == -1) {
		app->dispatcher = NULL;
		free(d);
		return -1;
	}
	return 0;
}

int
idem_dispatcher_stop(idem_app *app, const struct timespec *deadline)
{
	struct idem_dispatcher	*d = app->dispatcher;

	if (d == NULL)
		return 0;
	if (idem_service_stop(IDEM_SERVICE_OF(d, CLOCK_REALTIME), deadline) ==
	    -1) {
		/* In a call to an endpoint: its delivery is taken, and due
		 * again once its hold lapses. */
		idem_log(IDEM_LOG_WARN, "dispatcher: still delivering at the "
		    "drain deadline");
		return -1;
	}
	free(d);
	app->dispatcher = NULL;
	return 0;
}
