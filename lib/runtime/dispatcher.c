/*
 * dispatcher.c - the outbox's deliveries: due webhook deliveries are taken
 * in bounded batches (FOR UPDATE SKIP LOCKED, in one statement that
 * commits before anyone is called, so no transaction is held across the
 * network and pgbouncer's transaction mode is enough), each is POSTed,
 * signed (Standard Webhooks), to its endpoint with the library's HTTP
 * client, and its attempt recorded: delivered, again after a backoff with
 * jitter, or dead.  Any number of dispatchers run at once, in any number
 * of processes.  It runs on a thread of the application ([webhooks]
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
#include "outbox.h"
#include "service.h"

/* The eviction batches one run makes at most, so that a backlog of old
 * events delays no delivery for long; the next run goes on. */
#define EVICT_BATCHES	10
/* The longest pause between polls while the database fails. */
#define ERROR_PAUSE_MS	30000

struct idem_dispatcher {
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 stop;
	int		 done;	/* the thread has returned */
};

/* Columns of idem_outbox_take(). */
enum { C_ID, C_EVENT, C_TYPE, C_BODY, C_URL, C_SECRET, C_DELETED,
	C_ATTEMPTS, C_AGE };

static const char sql_take[] =
    "SELECT * FROM idem_outbox_take($1::bigint, $2::bigint, $3::boolean)";

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

/*
 * Call the endpoint of row: the status of its answer (0: none), err saying
 * why it is not a 2xx; *hopeless when it cannot succeed; -1 when the call
 * was abandoned because the process is stopping.
 */
static int
call(idem_app *app, const PGresult *t, int row, int *hopeless, char *err,
    size_t errlen)
{
	const struct idem_cfg	*c = &app->cfg;
	char			 sig[IDEM_WEBHOOK_SIGNATURE_MAX], ts[24];
	char			 why[256];
	const char		*body = PQgetvalue(t, row, C_BODY);
	size_t			 len = (size_t)PQgetlength(t, row, C_BODY);
	long long		 now = (long long)time(NULL);
	idem_http		*h;
	idem_http_resp		*resp = NULL;
	enum idem_http_rc	 rc;
	int			 status = 0;

	*hopeless = 0;
	if (PQgetvalue(t, row, C_DELETED)[0] == 't') {
		*hopeless = 1;
		snprintf(err, errlen, "endpoint deleted");
		return 0;
	}
	if (idem_webhook_sign(PQgetvalue(t, row, C_SECRET),
	    PQgetvalue(t, row, C_EVENT), now, body, len, sig,
	    sizeof(sig)) == -1) {
		*hopeless = 1;
		snprintf(err, errlen, "the endpoint's secret is not valid");
		return 0;
	}
	idem_fmt_int(ts, now);
	if ((h = idem_http_new("POST", PQgetvalue(t, row, C_URL))) == NULL ||
	    idem_http_header(h, "webhook-id", PQgetvalue(t, row, C_EVENT)) ==
	    -1 || idem_http_header(h, "webhook-timestamp", ts) == -1 ||
	    idem_http_header(h, "webhook-signature", sig) == -1 ||
	    idem_http_body(h, "application/json", body, len) == -1) {
		idem_http_free(h);
		snprintf(err, errlen, "cannot build the request");
		return 0;
	}
	idem_http_timeout_ms(h, c->wh_timeout_ms);
	idem_http_max_body(h, c->wh_max_response);
	idem_http_allow_private(h, c->wh_allow_private);
	idem_http_cancel_on(h, &app->stopping);
	why[0] = '\0';
	/* No request: the handle's timeout bounds the call. */
	rc = idem_http_send(h, NULL, &resp, why, sizeof(why));
	/* An answer only with OK (2xx) and STATUS (any other). */
	if (resp != NULL)
		status = idem_http_resp_status(resp);
	if (rc == IDEM_HTTP_STATUS)
		snprintf(err, errlen, "HTTP %d", status);
	else if (rc != IDEM_HTTP_OK)
		snprintf(err, errlen, "%s: %s", idem_http_rc_name(rc), why);
	idem_http_resp_free(resp);
	idem_http_free(h);
	/* Abandoned for a stop: not an attempt that failed. */
	if (rc != IDEM_HTTP_OK && rc != IDEM_HTTP_STATUS &&
	    atomic_load(&app->stopping))
		return -1;
	return status;
}

/* The metrics' label of a type read from the table (checked: it goes
 * into the exposition as is). */
static const char *
topic_of(const PGresult *t, int row)
{
	const char	*type = PQgetvalue(t, row, C_TYPE);

	return idem_event_type_ok(type) ? type : "other";
}

/* Give back what was taken and not attempted: due at once, its attempt
 * not counted.  -1 when the database failed (it is due once its hold
 * lapses). */
static int
give_back(idem_app *app, const PGresult *t, int row)
{
	const char	*vals[2] = { PQgetvalue(t, row, C_ID),
			    PQgetvalue(t, row, C_ATTEMPTS) };
	PGresult	*r;

	r = exec(app, "SELECT idem_outbox_release($1::bigint, $2::integer)",
	    2, vals);
	PQclear(r);
	return r == NULL ? -1 : 0;
}

/* Deliver row and record what became of it: an enum idem_attempt, or -1
 * when the call was abandoned (stopping) and the delivery given back.
 * *unrecorded: the outcome could not be written (the database failed). */
static int
deliver_one(idem_app *app, const PGresult *t, int row, int *unrecorded)
{
	const struct idem_cfg	*c = &app->cfg;
	enum idem_attempt	 a;
	enum idem_giveup	 g;
	char			 err[512], st[24], delay[24];
	const char		*vals[6], *topic = topic_of(t, row);
	long			 attempts;
	long long		 age;
	PGresult		*r;
	int			 status, hopeless;

	err[0] = '\0';
	status = call(app, t, row, &hopeless, err, sizeof(err));
	if (status == -1) {
		give_back(app, t, row);
		return -1;
	}
	attempts = strtol(PQgetvalue(t, row, C_ATTEMPTS), NULL, 10);
	age = strtoll(PQgetvalue(t, row, C_AGE), NULL, 10);
	a = idem_attempt_outcome(status, hopeless, attempts,
	    c->wh_max_attempts, age, c->wh_max_age_ms, &g);
	if (a == IDEM_ATTEMPT_DELIVERED) {
		vals[0] = PQgetvalue(t, row, C_ID);
		idem_fmt_int(st, status);
		vals[1] = st;
		r = exec(app, "SELECT idem_outbox_delivered($1::bigint, "
		    "$2::integer)", 2, vals);
		*unrecorded = r == NULL;
		if (r != NULL && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
			idem_metrics_event_latency(app,
			    (double)strtoll(PQgetvalue(r, 0, 0), NULL, 10) /
			    1000);
		PQclear(r);
		idem_metrics_event(app, topic, IDEM_EV_DELIVERED);
		return a;
	}
	vals[0] = PQgetvalue(t, row, C_ID);
	vals[1] = PQgetvalue(t, row, C_ATTEMPTS);
	idem_fmt_int(st, status);
	vals[2] = status > 0 ? st : NULL;
	vals[3] = err;
	idem_fmt_int(delay, idem_backoff_ms(attempts, c->wh_backoff_ms,
	    c->wh_backoff_max_ms, jitter_rnd()));
	vals[4] = delay;
	vals[5] = a == IDEM_ATTEMPT_DEAD ? "true" : "false";
	r = exec(app, "SELECT idem_outbox_failed($1::bigint, $2::integer, "
	    "$3::integer, $4, $5::bigint, $6::boolean)", 6, vals);
	*unrecorded = r == NULL;
	PQclear(r);
	idem_metrics_event(app, topic, IDEM_EV_FAILED);
	if (a == IDEM_ATTEMPT_DEAD) {
		idem_metrics_event(app, topic, IDEM_EV_DEAD);
		idem_log(IDEM_LOG_WARN, "dispatcher: event %s to delivery %s "
		    "is dead (%s after %ld attempts): %s",
		    PQgetvalue(t, row, C_EVENT), vals[0], idem_giveup_name(g),
		    attempts, err);
	} else
		idem_log(IDEM_LOG_INFO, "dispatcher: event %s, delivery %s, "
		    "attempt %ld failed (%s), again in %s ms",
		    PQgetvalue(t, row, C_EVENT), vals[0], attempts, err, delay);
	return a;
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

/*
 * One batch: take up to limit due deliveries and deliver them one after
 * the other.  The number taken, or -1 when the database failed.  Once an
 * outcome cannot be recorded, the rest of the batch is given back, not
 * called: a database that is down would not record their outcomes either,
 * and each would be called again once its hold lapses.
 */
static long
batch(idem_app *app, long limit, struct idem_deliver_counts *counts)
{
	const struct idem_cfg	*c = &app->cfg;
	char			 lim[24], hold[24];
	const char		*vals[3] = { lim, hold,
				    c->wh_ordered ? "true" : "false" };
	PGresult		*t;
	int			 i, n, unrecorded = 0, db_down = 0;

	idem_fmt_int(lim, limit);
	/* Not due again while this one works through the batch: each call
	 * takes timeout at most. */
	idem_fmt_int(hold, limit * (c->wh_timeout_ms + 1000) + 5000);
	if ((t = exec(app, sql_take, 3, vals)) == NULL)
		return -1;
	n = PQntuples(t);
	for (i = 0; i < n; i++) {
		if (atomic_load(&app->stopping) || unrecorded) {
			if (!db_down && give_back(app, t, i) == -1)
				db_down = 1;
			continue;
		}
		switch (deliver_one(app, t, i, &unrecorded)) {
		case -1:
			break;
		case IDEM_ATTEMPT_DELIVERED:
			counts->delivered++;
			break;
		case IDEM_ATTEMPT_RETRY:
			counts->failed++;
			break;
		case IDEM_ATTEMPT_DEAD:
			counts->failed++;
			counts->dead++;
			break;
		}
	}
	PQclear(t);
	return unrecorded ? -1 : n;
}

int
idem_deliver_run(idem_app *app, long max, struct idem_deliver_counts *counts)
{
	long	n, done = 0, want;

	memset(counts, 0, sizeof(*counts));
	for (;;) {
		want = app->cfg.wh_batch;
		if (max > 0 && max - done < want)
			want = max - done;
		if (want <= 0 || atomic_load(&app->stopping))
			break;
		if ((n = batch(app, want, counts)) == -1)
			return IDEM_RC_FAIL;
		done += n;
		if (n < want)
			break;
	}
	if (!atomic_load(&app->stopping) &&
	    (counts->evicted = evict(app)) == -1)
		return IDEM_RC_FAIL;
	return IDEM_RC_OK;
}

/* Sleep ms unless told to stop: 1 when stopping. */
static int
pause_ms(struct idem_dispatcher *d, long long ms)
{
	struct timespec	next;
	int		stop;

	idem_deadline(CLOCK_REALTIME, ms, &next);
	pthread_mutex_lock(&d->mu);
	while (!d->stop && pthread_cond_timedwait(&d->cv, &d->mu, &next) !=
	    ETIMEDOUT)
		continue;
	stop = d->stop;
	pthread_mutex_unlock(&d->mu);
	return stop;
}

static void *
dispatcher_main(void *arg)
{
	idem_app		*app = arg;
	struct idem_dispatcher	*d = app->dispatcher;
	struct idem_deliver_counts counts;
	long long		 next_evict = 0, now, wait_ms;
	long			 n, errors = 0;

	memset(&counts, 0, sizeof(counts));
	while (!pause_ms(d, 0)) {
		n = batch(app, app->cfg.wh_batch, &counts);
		now = idem_now_us();
		if (n != -1 && now >= next_evict) {
			if (evict(app) != -1)
				next_evict = now +
				    app->cfg.evict_interval_ms * 1000;
		}
		/* A full batch: more may be due at once.  Nothing due: poll
		 * again an interval later; a database error: later and later
		 * (up to ERROR_PAUSE_MS), so that a database down for a while
		 * is not asked, and logged, every interval. */
		if (n == app->cfg.wh_batch)
			continue;
		errors = n == -1 ? errors + 1 : 0;
		wait_ms = app->cfg.wh_interval_ms;
		if (errors > 0)
			wait_ms = idem_backoff_ms(errors, wait_ms,
			    wait_ms > ERROR_PAUSE_MS ? wait_ms : ERROR_PAUSE_MS,
			    jitter_rnd());
		if (pause_ms(d, wait_ms))
			break;
	}
	pthread_mutex_lock(&d->mu);
	d->done = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
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
