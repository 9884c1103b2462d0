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
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "heartbeat.h"

struct slot {
	int		 used;
	int64_t		 id;
	char		 token[40];
	long long	 lease_ms;
	long long	 until_us;
};

struct idem_heartbeat {
	idem_app	*app;
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 stop;
	long long	 interval_ms;
	unsigned	 nslots;
	struct slot	*slots;
	PGconn		*db;	/* its own: a session an operator can name */
	/* Read by metrics.c (which this file does not call). */
	atomic_ullong	 renewed;
	atomic_ullong	 lost;
};

static const char sql_renew[] =
	"SELECT * FROM idem_renew($1::bigint[], $2::uuid[], $3::bigint[])";

long long
idem_heartbeat_interval(long long lease_ms)
{
	long long	i = lease_ms / 3;

	return i < 1 ? 1 : i;
}

/* Its own connection, named so (application_name) in pg_stat_activity. */
static PGconn *
connect_db(struct idem_heartbeat *hb)
{
	PGconn	*db;

	db = idem_db_connect(hb->app->cfg.conninfo, hb->interval_ms);
	if (db == NULL || PQstatus(db) != CONNECTION_OK) {
		idem_log(IDEM_LOG_WARN, "heartbeat: cannot connect: %s",
		    db ? PQerrorMessage(db) : "out of memory");
		PQfinish(db);
		return NULL;
	}
	PQclear(PQexec(db, "SET application_name = 'idem heartbeat'"));
	return db;
}

/* One beat: renew what is live.  Renewed and lost are counted. */
static void
beat(struct idem_heartbeat *hb)
{
	struct idem_buf	 ids = { 0 }, toks = { 0 }, ms = { 0 };
	const char	*vals[3];
	PGresult	*r;
	long long	 now = idem_now_us();
	long		 n = 0, renewed;
	unsigned	 i;

	idem_buf_addc(&ids, '{');
	idem_buf_addc(&toks, '{');
	idem_buf_addc(&ms, '{');
	pthread_mutex_lock(&hb->mu);
	for (i = 0; i < hb->nslots; i++) {
		if (!hb->slots[i].used || hb->slots[i].until_us <= now)
			continue;
		idem_buf_addf(&ids, "%s%" PRId64, n ? "," : "",
		    hb->slots[i].id);
		idem_buf_addf(&toks, "%s%s", n ? "," : "", hb->slots[i].token);
		idem_buf_addf(&ms, "%s%lld", n ? "," : "",
		    hb->slots[i].lease_ms);
		n++;
	}
	pthread_mutex_unlock(&hb->mu);
	idem_buf_addc(&ids, '}');
	idem_buf_addc(&toks, '}');
	idem_buf_addc(&ms, '}');
	idem_buf_addc(&ids, '\0');
	idem_buf_addc(&toks, '\0');
	idem_buf_addc(&ms, '\0');
	if (n == 0)
		goto out;
	if (hb->db != NULL && idem_db_broken(hb->db)) {
		PQfinish(hb->db);
		hb->db = NULL;
	}
	if (hb->db == NULL && (hb->db = connect_db(hb)) == NULL) {
		atomic_fetch_add(&hb->lost, (unsigned long long)n);
		goto out;
	}
	vals[0] = ids.p;
	vals[1] = toks.p;
	vals[2] = ms.p;
	r = PQexecParams(hb->db, sql_renew, 3, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		idem_log(IDEM_LOG_WARN, "heartbeat: renewing %ld leases: %s",
		    n, PQresultErrorMessage(r));
		atomic_fetch_add(&hb->lost, (unsigned long long)n);
		/* Once more at the next beat, on a new session if need be. */
		PQclear(r);
		goto out;
	}
	renewed = PQntuples(r);
	PQclear(r);
	atomic_fetch_add(&hb->renewed, (unsigned long long)renewed);
	/* Not ours any more: taken over, or finished meanwhile. */
	atomic_fetch_add(&hb->lost, (unsigned long long)(n - renewed));
out:
	idem_buf_free(&ids);
	idem_buf_free(&toks);
	idem_buf_free(&ms);
}

static void *
heartbeat_main(void *arg)
{
	struct idem_heartbeat	*hb = arg;
	struct timespec		 next;
	int			 stop;

	for (;;) {
		/* CLOCK_MONOTONIC: a jump of the wall clock changes no beat. */
		idem_deadline(CLOCK_MONOTONIC, hb->interval_ms, &next);
		pthread_mutex_lock(&hb->mu);
		while (!hb->stop && pthread_cond_timedwait(&hb->cv, &hb->mu,
		    &next) != ETIMEDOUT)
			continue;
		stop = hb->stop;
		pthread_mutex_unlock(&hb->mu);
		if (stop)
			break;
		beat(hb);
	}
	return NULL;
}

struct idem_heartbeat *
idem_heartbeat_start(idem_app *app, long long interval_ms, unsigned slots)
{
	struct idem_heartbeat	*hb;
	pthread_condattr_t	 ca;

	if ((hb = calloc(1, sizeof(*hb))) == NULL ||
	    (hb->slots = calloc(slots, sizeof(*hb->slots))) == NULL) {
		free(hb);
		return NULL;
	}
	hb->app = app;
	hb->nslots = slots;
	hb->interval_ms = interval_ms;
	pthread_mutex_init(&hb->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&hb->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&hb->th, NULL, heartbeat_main, hb) != 0) {
		idem_log(IDEM_LOG_ERROR, "heartbeat: cannot start its thread");
		pthread_mutex_destroy(&hb->mu);
		pthread_cond_destroy(&hb->cv);
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
	pthread_mutex_lock(&hb->mu);
	hb->stop = 1;
	pthread_cond_broadcast(&hb->cv);
	pthread_mutex_unlock(&hb->mu);
	pthread_join(hb->th, NULL);
	PQfinish(hb->db);
	pthread_mutex_destroy(&hb->mu);
	pthread_cond_destroy(&hb->cv);
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

void
idem_heartbeat_counts(struct idem_heartbeat *hb, unsigned long long *renewed,
    unsigned long long *lost)
{
	*renewed = hb ? atomic_load(&hb->renewed) : 0;
	*lost = hb ? atomic_load(&hb->lost) : 0;
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
