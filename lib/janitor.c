/*
 * janitor.c - periodic store maintenance run by the runtime's main thread:
 * expired keys are evicted, and stuck in-progress keys reclaimed, every
 * [idempotency] evict_interval, by one process of the whole fleet at a
 * time (a session advisory lock; the others skip).
 */
#include <time.h>

#include "private.h"

/* Any constant: the fleet-wide "evictor" lock. */
#define EVICT_LOCK	"7236491087"

void
idem_janitor_tick(idem_app *app)
{
	static time_t	 next;
	time_t		 now = time(NULL);
	PGconn		*db;
	PGresult	*r;
	long		 evicted = 0, reclaimed = 0;
	int		 got;

	if (next == 0)
		next = now + app->cfg.evict_interval_ms / 1000;
	if (now < next)
		return;
	next = now + (app->cfg.evict_interval_ms + 999) / 1000;
	if ((db = idem_pool_acquire(app->pool, app->cfg.acquire_timeout_ms))
	    == NULL)
		return;
	r = PQexec(db, "SELECT pg_try_advisory_lock(" EVICT_LOCK ")");
	got = PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (got) {
		if (idem_evict(db, app->cfg.evict_batch, 0, &evicted) == 0) {
			idem_metrics_add(app, IDEM_M_EVICTED, evicted);
			idem_log(IDEM_LOG_INFO, "janitor: evicted %ld keys",
			    evicted);
		}
		/* Only rows whose lease is older than lock_timeout, which is
		 * longer than any request may run. */
		if (idem_reclaim(db, (long)(app->cfg.lock_timeout_ms / 1000),
		    &reclaimed) == 0 && reclaimed > 0) {
			idem_metrics_add(app, IDEM_M_RECLAIMED, reclaimed);
			idem_log(IDEM_LOG_INFO, "janitor: reclaimed %ld stuck "
			    "keys", reclaimed);
		}
		PQclear(PQexec(db, "SELECT pg_advisory_unlock(" EVICT_LOCK
		    ")"));
	}
	idem_pool_release(app->pool, db);
}
