/*
 * janitor.c - periodic store maintenance run by the runtime's main thread:
 * expired keys are evicted, stuck in-progress keys reclaimed, and
 * abandoned phased keys completed, every [idempotency] evict_interval, by
 * one process of the whole fleet at a time (a transaction advisory lock
 * per batch; the others skip).
 */
#include <time.h>

#include "private.h"

/* Abandoned keys one janitor run completes at most. */
#define COMPLETE_BATCH	10

void
idem_janitor_tick(idem_app *app)
{
	static time_t	 next;
	time_t		 now = time(NULL);
	PGconn		*db;
	long		 evicted = 0, reclaimed = 0, completed, left;
	int		 rc;

	if (next == 0)
		next = now + app->cfg.evict_interval_ms / 1000;
	if (now < next)
		return;
	next = now + (app->cfg.evict_interval_ms + 999) / 1000;
	if ((db = idem_pool_acquire(app->pool, app->cfg.acquire_timeout_ms))
	    == NULL)
		return;
	if ((rc = idem_evict(db, app->cfg.evict_batch, 0,
	    app->cfg.lock_timeout_ms, &evicted)) == 0) {
		idem_metrics_add(app, IDEM_M_EVICTED, evicted);
		idem_log(IDEM_LOG_INFO, "janitor: evicted %ld keys", evicted);
	}
	/* Only rows whose lease is older than lock_timeout, which is longer
	 * than any request may run; safe from several processes at once. */
	if (rc == 0 && idem_reclaim(db, app->cfg.lock_timeout_ms,
	    &reclaimed) == 0 && reclaimed > 0) {
		idem_metrics_add(app, IDEM_M_RECLAIMED, reclaimed);
		idem_log(IDEM_LOG_INFO, "janitor: reclaimed %ld stuck keys",
		    reclaimed);
	}
	idem_pool_release(app->pool, db);
	/* Bounded per run: each record may take a whole handler's time. */
	if (rc == 0 && idem_complete_abandoned(app, COMPLETE_BATCH, &completed,
	    &left) == 0 && completed + left > 0) {
		idem_metrics_add(app, IDEM_M_COMPLETED, completed);
		idem_log(IDEM_LOG_INFO, "janitor: completed %ld abandoned keys, "
		    "%ld left", completed, left);
	}
}
