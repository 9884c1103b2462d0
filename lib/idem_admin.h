/*
 * idem_admin.h - libidem for operators: what idemctl(8) does to the store
 * (connect, migrate, API keys, eviction, reclaim, webhook recovery).  See idem_migrate(3).
 */
#ifndef IDEM_ADMIN_H
#define IDEM_ADMIN_H

#include <idem.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What idem_db_open() reads from the configuration file for the calls below. */
struct idem_db_settings {
	long long	lock_timeout_ms;	/* [idempotency] lock_timeout */
	long		evict_batch;		/* [idempotency] evict_batch */
	char		problem_base[256];	/* [server] problem_base */
};

/* Connect as idemctl does (config NULL: the PG* environment); NULL and err
 * on failure. */
PGconn		*idem_db_open(const char *config,
		    struct idem_db_settings *set, char *err, size_t errlen);
/* Apply dir's pending migrations, then dir/functions/; the number applied,
 * or -1 and err (nothing applied). */
int		 idem_migrate(PGconn *db, const char *dir, char *err,
		    size_t errlen);
/* A new tenant and its secret (NUL-terminated); 0, or -1. */
int		 idem_api_key_create(PGconn *db, const char *name,
		    char *secret, size_t secretlen, int64_t *id);
/* Delete expired records in batches: 0, -1 on error, 1 when another
 * process is evicting. */
int		 idem_evict(PGconn *db, long batch, long max_batches,
		    long long lock_timeout_ms, long *evicted);
/* Delete the traces of remember routes whose window has passed; as
 * idem_evict(). */
int		 idem_forget(PGconn *db, long batch, long max_batches,
		    long *forgotten);
/* Release in-progress records whose lease has lapsed: 0, or -1. */
int		 idem_reclaim(PGconn *db, long long lock_timeout_ms,
		    long *reclaimed);
/* What idem_webhook_recover() did. */
enum idem_recover_rc {
	IDEM_RECOVER_REQUEUED,	/* *requeued deliveries are due again */
	IDEM_RECOVER_NOT_FOUND,	/* no live endpoint with that id */
	IDEM_RECOVER_DISABLED,	/* the endpoint is disabled: nothing done */
	IDEM_RECOVER_ERROR	/* the database: err says what */
};
/* Endpoint's failed and dead deliveries created since (Unix seconds) due
 * again, each under its original webhook-id.  idem_webhook_recover(3). */
enum idem_recover_rc idem_webhook_recover(PGconn *db, int64_t endpoint,
		    long long since, long long *requeued, char *err,
		    size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* IDEM_ADMIN_H */
