/*
 * janitor.c - store upkeep on a thread of its own: expired keys are
 * evicted (and the traces of remembered ones forgotten once their window
 * has passed), stuck in-progress keys reclaimed, and abandoned phased keys
 * completed, every [idempotency] evict_interval, by one process of the
 * whole fleet at a time (a transaction advisory lock per batch; the others
 * skip).  A run is bounded (RUN_BUDGET_MS of eviction, then the others) and
 * stops between batches once the process is stopping, so a backlog neither
 * holds a pool connection for long nor delays a drain; a run cut short is
 * followed by the next one a second later instead of an interval later.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "private.h"
#include "backoff.h"
#include "service.h"

/* Abandoned keys one janitor run completes at most. */
#define COMPLETE_BATCH	10
/* Eviction time per run. */
#define RUN_BUDGET_MS	2000
/* The pause after a run that left a backlog. */
#define BACKLOG_PAUSE_MS 1000

struct idem_janitor {
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 stop;
	int		 done;	/* the thread has returned */
	int		 duty;	/* eviction's share of time (backoff.h) */
};

/* Expired keys, within the run's budget: 0, 2 (more left) or -1. */
static int
evict_step(idem_app *app, int duty, long long until_us)
{
	long	 evicted = 0, remembered = 0;
	int	 rc;

	/* A connection per batch, none held through the pauses (store.c). */
	rc = idem_evict_bounded(app->pool, app->cfg.acquire_timeout_ms,
	    app->cfg.evict_batch, 0, until_us, duty, &app->stopping, &evicted,
	    &remembered);
	if (rc == -1)
		return -1;
	idem_metrics_add(app, IDEM_M_EVICTED, evicted);
	idem_metrics_add(app, IDEM_M_REMEMBERED, remembered);
	if (evicted > 0 || rc == 2)
		idem_log(IDEM_LOG_INFO, "janitor: evicted %ld keys "
		    "(%ld remembered)%s", evicted, remembered,
		    rc == 2 ? ", more left" : "");
	if (rc == 2)
		idem_log(IDEM_LOG_DEBUG, "janitor: evicting at %d%% "
		    "of the time", duty);
	return rc;
}

/* The traces whose remember window passed, in the same budget
 * (sql/010): 0, 2 (more left) or -1. */
static int
forget_step(idem_app *app, int duty, long long until_us)
{
	long	 forgotten = 0;
	int	 frc;

	frc = idem_forget_bounded(app->pool, app->cfg.acquire_timeout_ms,
	    app->cfg.evict_batch, 0, until_us, duty, &app->stopping,
	    &forgotten);
	if (frc == -1)
		return -1;
	idem_metrics_add(app, IDEM_M_FORGOTTEN, forgotten);
	if (forgotten > 0 || frc == 2)
		idem_log(IDEM_LOG_INFO, "janitor: forgot %ld remembered keys%s",
		    forgotten, frc == 2 ? ", more left" : "");
	return frc;
}

/* Only rows whose lease is older than lock_timeout, which is longer
 * than any request may run; safe from several processes at once. */
static int
reclaim_step(idem_app *app)
{
	PGconn	*db;
	long	 reclaimed = 0;
	int	 rc = 0;

	if ((db = idem_pool_acquire(app->pool, app->cfg.acquire_timeout_ms,
	    NULL)) == NULL)
		return -1;
	if (idem_reclaim(db, app->cfg.lock_timeout_ms, &reclaimed) == -1)
		rc = -1;
	else if (reclaimed > 0) {
		idem_metrics_add(app, IDEM_M_RECLAIMED, reclaimed);
		idem_log(IDEM_LOG_INFO, "janitor: reclaimed %ld stuck keys",
		    reclaimed);
	}
	idem_pool_release(app->pool, db);
	return rc;
}

/*
 * One run: 0 done, 2 a backlog is left, -1 a database error.  A backlog is
 * evicted at duty percent of the time (backoff.h: batches then pauses), so
 * requests keep the rest; each run that leaves one raises the duty.
 */
static int
run_once(idem_app *app, int duty)
{
	long		 completed, left;
	long long	 until_us = idem_now_us() + RUN_BUDGET_MS * 1000LL;
	int		 rc, crc;

	rc = evict_step(app, duty, until_us);
	/* First come the keys, which hold the most. */
	if (rc == 0)
		rc = forget_step(app, duty, until_us);
	if (rc != -1 && reclaim_step(app) == -1)
		rc = -1;
	if (rc == -1 || atomic_load(&app->stopping))
		return rc == -1 ? -1 : 0;
	/* Bounded per run: each record may take a whole handler's time. */
	crc = idem_complete_abandoned(app, COMPLETE_BATCH, &completed, &left);
	if (crc == -1)
		return -1;
	if (crc == 0 && completed + left > 0) {
		idem_metrics_add(app, IDEM_M_COMPLETED, completed);
		idem_log(IDEM_LOG_INFO, "janitor: completed %ld abandoned keys, "
		    "%ld left", completed, left);
	}
	return rc == 2 ? 2 : 0;
}

static void *
janitor_main(void *arg)
{
	idem_app		*app = arg;
	struct idem_janitor	*j = app->janitor;
	struct timespec		 next;
	long long		 t0, wait_ms = app->cfg.evict_interval_ms;
	int			 rc;

	for (;;) {
		idem_deadline(CLOCK_REALTIME, wait_ms, &next);
		if (idem_service_wait(IDEM_SERVICE_OF(j, CLOCK_REALTIME),
		    &next))
			break;
		t0 = idem_now_us();
		rc = run_once(app, j->duty);
		j->duty = idem_evict_duty(j->duty, rc == 2);
		idem_metrics_janitor_run(app, (double)(idem_now_us() - t0) /
		    1e6, rc != -1);
		wait_ms = rc == 2 ? BACKLOG_PAUSE_MS :
		    app->cfg.evict_interval_ms;
	}
	idem_service_exit(IDEM_SERVICE_OF(j, CLOCK_REALTIME));
	return NULL;
}

int
idem_janitor_start(idem_app *app)
{
	struct idem_janitor	*j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return -1;
	j->duty = IDEM_EVICT_DUTY_MIN;
	app->janitor = j;
	if (idem_service_start(IDEM_SERVICE_OF(j, CLOCK_REALTIME), janitor_main,
	    app) == -1) {
		app->janitor = NULL;
		free(j);
		return -1;
	}
	return 0;
}

int
idem_janitor_stop(idem_app *app, const struct timespec *deadline)
{
	struct idem_janitor	*j = app->janitor;

	if (j == NULL)
		return 0;
	if (idem_service_stop(IDEM_SERVICE_OF(j, CLOCK_REALTIME), deadline) ==
	    -1) {
		/* Still in a batch or a completion: leave it to the exit. */
		idem_log(IDEM_LOG_WARN, "janitor: still running at the drain "
		    "deadline");
		return -1;
	}
	free(j);
	app->janitor = NULL;
	return 0;
}
