/*
 * heartbeat.c - keeps the leases of this process's running phased
 * requests alive: a thread that, every interval, renews all of them in one
 * statement (idem_renew(), sql/008_idem_heartbeat.sql) on a connection of
 * its own, fenced by their tokens.  A request past its deadline is left
 * out (its lease lapses within one lease); a paused or dead process renews
 * nothing, so its leases lapse within one lease and a retry takes over,
 * while fencing makes the late writes of the old owner fail.  The lease is
 * measured by the database's clock (now() in idem_renew()); this file only
 * uses the monotonic clock, for the interval and the deadlines.
 *
 * A renewal never hangs the heartbeat: each attempt (connecting included)
 * has a deadline of half an interval, past which its statement is
 * cancelled, its session dropped, and the renewal tried once more on a new
 * one.  Each slot keeps when the last renewal that renewed it was sent:
 * its request proves its lease from that (lease.h), so a stalled session
 * leaves the leases unproven, and their requests stop, before they lapse.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "heartbeat.h"
#include "lease.h"
#include "service.h"

struct slot {
	int		 used;
	int64_t		 id;
	char		 token[40];
	long long	 lease_ms;
	long long	 until_us;
	long long	 added_us;
	long long	 renewed_us;	/* sent: the last renewal of it */
};

struct idem_heartbeat {
	idem_app	*app;
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 stop;
	int		 done;	/* the thread has returned */
	long long	 interval_ms;
	unsigned	 nslots;
	struct slot	*slots;
	PGconn		*db;	/* its own: a session an operator can name */
	/* Read by metrics.c (which this file does not call). */
	atomic_ullong	 renewed;
	atomic_ullong	 lost;
	atomic_ullong	 failed;	/* attempts that failed or were late */
};

static const char sql_renew[] =
	"SELECT * FROM idem_renew($1::bigint[], $2::uuid[], $3::bigint[])";

long long
idem_heartbeat_interval(long long lease_ms)
{
	long long	i = lease_ms / 3;

	return i < 1 ? 1 : i;
}

/* Its own connection, named so (application_name) in pg_stat_activity,
 * made within the attempt's deadline. */
static PGconn *
connect_db(struct idem_heartbeat *hb, long long deadline_us)
{
	return idem_db_connect_until(hb->app->cfg.conninfo, "idem heartbeat",
	    hb->interval_ms * 3, deadline_us);
}

/* The leases to renew now, as three array literals; how many. */
static long
collect(struct idem_heartbeat *hb, struct idem_buf *ids,
    struct idem_buf *toks, struct idem_buf *ms)
{
	long long	now = idem_now_us();
	long		n = 0;
	unsigned	i;

	idem_buf_addc(ids, '{');
	idem_buf_addc(toks, '{');
	idem_buf_addc(ms, '{');
	pthread_mutex_lock(&hb->mu);
	for (i = 0; i < hb->nslots; i++) {
		if (!hb->slots[i].used || hb->slots[i].until_us <= now)
			continue;
		idem_buf_addf(ids, "%s%" PRId64, n ? "," : "",
		    hb->slots[i].id);
		idem_buf_addf(toks, "%s%s", n ? "," : "", hb->slots[i].token);
		idem_buf_addf(ms, "%s%lld", n ? "," : "",
		    hb->slots[i].lease_ms);
		n++;
	}
	pthread_mutex_unlock(&hb->mu);
	idem_buf_adds(ids, "}");
	idem_buf_adds(toks, "}");
	idem_buf_adds(ms, "}");
	idem_buf_addc(ids, '\0');
	idem_buf_addc(toks, '\0');
	idem_buf_addc(ms, '\0');
	return n;
}

/* The leases r names were renewed by a statement sent at sent_us: their
 * requests may count on them from that instant.  A slot filled after that
 * is another request's, even under the same id (a takeover here): the
 * renewal, fenced by the old token, did not renew it. */
static void
mark_renewed(struct idem_heartbeat *hb, const PGresult *r, long long sent_us)
{
	int		 row;
	int64_t		 id;
	unsigned	 i;

	pthread_mutex_lock(&hb->mu);
	for (row = 0; row < PQntuples(r); row++) {
		id = (int64_t)strtoll(PQgetvalue(r, row, 0), NULL, 10);
		for (i = 0; i < hb->nslots; i++)
			if (hb->slots[i].used && hb->slots[i].id == id &&
			    hb->slots[i].added_us < sent_us &&
			    hb->slots[i].renewed_us < sent_us)
				hb->slots[i].renewed_us = sent_us;
	}
	pthread_mutex_unlock(&hb->mu);
}

/*
 * One attempt at renewing n leases, connecting first if need be, over by
 * deadline_us.  The statement sent, its result in *r (NULL: none); late,
 * the session is given up (cancelled, dropped) for the next attempt.
 */
static enum idem_timed
attempt(struct idem_heartbeat *hb, const char *const vals[3], long n,
    long long deadline_us, PGresult **r, long long *sent_us)
{
	enum idem_timed	rc;

	*r = NULL;
	if (hb->db != NULL && idem_db_broken(hb->db)) {
		PQfinish(hb->db);
		hb->db = NULL;
	}
	if (hb->db == NULL && (hb->db = connect_db(hb, deadline_us)) == NULL)
		return IDEM_TIMED_LATE;
	*sent_us = idem_now_us();
	rc = idem_db_exec_until(hb->db, sql_renew, 3, vals, deadline_us, r);
	if (rc == IDEM_TIMED_LATE)
		idem_log(IDEM_LOG_WARN, "heartbeat: renewing %ld leases: no "
		    "answer within %lld ms; cancelled, on a new session next",
		    n, idem_lease_attempt_ms(hb->interval_ms));
	else if (rc == IDEM_TIMED_FAILED)
		idem_log(IDEM_LOG_WARN, "heartbeat: renewing %ld leases: %s",
		    n, *r != NULL ? PQresultErrorMessage(*r) :
		    PQerrorMessage(hb->db));
	if (rc == IDEM_TIMED_OK)
		return rc;
	/* A statement possibly still running: not this session again. */
	if (rc == IDEM_TIMED_LATE ||
	    PQtransactionStatus(hb->db) != PQTRANS_IDLE)
		idem_db_abandon(hb->db);
	if (idem_db_broken(hb->db)) {
		PQfinish(hb->db);
		hb->db = NULL;
	}
	return rc;
}

/* One beat: renew what is live, in at most two attempts (the second on a
 * new session).  Renewed, lost and failed attempts are counted. */
static void
beat(struct idem_heartbeat *hb)
{
	struct idem_buf	 ids = { 0 }, toks = { 0 }, ms = { 0 };
	const char	*vals[3];
	PGresult	*r = NULL;
	long long	 sent = 0, bound;
	long		 n, renewed;
	int		 tries;
	enum idem_timed	 rc = IDEM_TIMED_FAILED;

	if ((n = collect(hb, &ids, &toks, &ms)) == 0)
		goto out;
	vals[0] = ids.p;
	vals[1] = toks.p;
	vals[2] = ms.p;
	bound = idem_lease_attempt_ms(hb->interval_ms) * 1000;
	for (tries = 0; tries < 2 && rc != IDEM_TIMED_OK; tries++) {
		PQclear(r);
		rc = attempt(hb, vals, n, idem_now_us() + bound, &r, &sent);
		if (rc != IDEM_TIMED_OK)
			atomic_fetch_add(&hb->failed, 1);
	}
	if (rc != IDEM_TIMED_OK) {
		atomic_fetch_add(&hb->lost, (unsigned long long)n);
		goto out;
	}
	renewed = PQntuples(r);
	mark_renewed(hb, r, sent);
	atomic_fetch_add(&hb->renewed, (unsigned long long)renewed);
	/* Not ours any more: taken over, or finished meanwhile. */
	atomic_fetch_add(&hb->lost, (unsigned long long)(n - renewed));
out:
	PQclear(r);
	idem_buf_free(&ids);
	idem_buf_free(&toks);
	idem_buf_free(&ms);
}

static void *
heartbeat_main(void *arg)
{
	struct idem_heartbeat	*hb = arg;
	struct timespec		 next;
	long long		 due = idem_now_us(), now;

	for (;;) {
		/* CLOCK_MONOTONIC (idem_now_us()): a jump of the wall clock
		 * changes no beat.  A steady pace, whatever a beat took. */
		now = idem_now_us();
		due += hb->interval_ms * 1000;
		if (due < now)
			due = now;
		next.tv_sec = (time_t)(due / 1000000);
		next.tv_nsec = (long)(due % 1000000) * 1000;
		if (idem_service_wait(IDEM_SERVICE_OF(hb, CLOCK_MONOTONIC),
		    &next))
			break;
		beat(hb);
	}
	idem_service_exit(IDEM_SERVICE_OF(hb, CLOCK_MONOTONIC));
	return NULL;
}

struct idem_heartbeat *
idem_heartbeat_start(idem_app *app, long long interval_ms, unsigned slots)
{
	struct idem_heartbeat	*hb;

	if ((hb = calloc(1, sizeof(*hb))) == NULL ||
	    (hb->slots = calloc(slots, sizeof(*hb->slots))) == NULL) {
		free(hb);
		return NULL;
	}
	hb->app = app;
	hb->nslots = slots;
	hb->interval_ms = interval_ms;
	if (idem_service_start(IDEM_SERVICE_OF(hb, CLOCK_MONOTONIC),
	    heartbeat_main, hb) == -1) {
		idem_log(IDEM_LOG_ERROR, "heartbeat: cannot start its thread");
		free(hb->slots);
		free(hb);
		return NULL;
	}
	return hb;
}

void
idem_heartbeat_stop(struct idem_heartbeat *hb)
{
	if (hb == NULL)
		return;
	idem_service_stop(IDEM_SERVICE_OF(hb, CLOCK_MONOTONIC), NULL);
	PQfinish(hb->db);
	free(hb->slots);
	free(hb);
}

int
idem_heartbeat_add(struct idem_heartbeat *hb, int64_t id, const char *token,
    long long lease_ms, long long until_us)
{
	unsigned	i;

	if (hb == NULL || strlen(token) >= sizeof(hb->slots[0].token))
		return 0;
	pthread_mutex_lock(&hb->mu);
	for (i = 0; i < hb->nslots && hb->slots[i].used; i++)
		continue;
	if (i < hb->nslots) {
		hb->slots[i].used = 1;
		hb->slots[i].id = id;
		strcpy(hb->slots[i].token, token);
		hb->slots[i].lease_ms = lease_ms;
		hb->slots[i].until_us = until_us;
		hb->slots[i].added_us = idem_now_us();
		hb->slots[i].renewed_us = 0;
	}
	pthread_mutex_unlock(&hb->mu);
	if (i == hb->nslots) {
		idem_log(IDEM_LOG_WARN, "heartbeat: all %u slots taken; key "
		    "record %" PRId64 " is renewed at its phases only",
		    hb->nslots, id);
		return 0;
	}
	return (int)i + 1;
}

void
idem_heartbeat_until(struct idem_heartbeat *hb, int h, long long until_us)
{
	if (hb == NULL || h <= 0 || (unsigned)h > hb->nslots)
		return;
	pthread_mutex_lock(&hb->mu);
	hb->slots[h - 1].until_us = until_us;
	pthread_mutex_unlock(&hb->mu);
}

long long
idem_heartbeat_renewed_us(struct idem_heartbeat *hb, int h)
{
	long long	t;

	if (hb == NULL || h <= 0 || (unsigned)h > hb->nslots)
		return 0;
	pthread_mutex_lock(&hb->mu);
	t = hb->slots[h - 1].renewed_us;
	pthread_mutex_unlock(&hb->mu);
	return t;
}

void
idem_heartbeat_counts(struct idem_heartbeat *hb, unsigned long long *renewed,
    unsigned long long *lost, unsigned long long *failed)
{
	*renewed = hb ? atomic_load(&hb->renewed) : 0;
	*lost = hb ? atomic_load(&hb->lost) : 0;
	*failed = hb ? atomic_load(&hb->failed) : 0;
}

void
idem_heartbeat_remove(struct idem_heartbeat *hb, int h)
{
	if (hb == NULL || h <= 0 || (unsigned)h > hb->nslots)
		return;
	pthread_mutex_lock(&hb->mu);
	memset(&hb->slots[h - 1], 0, sizeof(hb->slots[0]));
	pthread_mutex_unlock(&hb->mu);
}
