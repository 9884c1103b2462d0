/*
 * store.c - operations on the store, shared by idemctl and the runtime's
 * janitor: migrations, API keys, eviction and reclaim.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "backoff.h"

#define MIGRATE_LOCK	"7236491086"
#define SQL_FILE_MAX	(4L << 20)

static int
exec_ok(PGconn *db, PGresult *r, char *err, size_t errlen)
{
	ExecStatusType	st = PQresultStatus(r);

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return 0;
	snprintf(err, errlen, "%s", PQerrorMessage(db));
	return -1;
}

static char *
slurp(const char *path)
{
	FILE	*f;
	char	*p;
	long	 n;

	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == -1 || (n = ftell(f)) < 0 ||
	    n > SQL_FILE_MAX || fseek(f, 0, SEEK_SET) == -1 ||
	    (p = malloc((size_t)n + 1)) == NULL) {
		fclose(f);
		return NULL;
	}
	if (fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		fclose(f);
		return NULL;
	}
	p[n] = '\0';
	fclose(f);
	return p;
}

static int
sql_filter(const struct dirent *d)
{
	size_t	n = strlen(d->d_name);

	return n > 4 && strcmp(d->d_name + n - 4, ".sql") == 0 &&
	    d->d_name[0] != '.';
}

/* A migration or a function file: the statements of a file, run. */
static int
exec_file(PGconn *db, const char *dir, const char *name, char *err,
    size_t errlen)
{
	char		 path[4096], *sql;
	PGresult	*r;
	int		 rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((sql = slurp(path)) == NULL) {
		snprintf(err, errlen, "%s: cannot read", path);
		return -1;
	}
	r = PQexec(db, sql);
	free(sql);
	/* A migration whose functions moved to functions/ holds only its
	 * comments now. */
	rc = PQresultStatus(r) == PGRES_EMPTY_QUERY ? 0 :
	    exec_ok(db, r, err, errlen);
	PQclear(r);
	if (rc == -1) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (in %s)", name);
	}
	return rc;
}

/* One numbered migration unless it is recorded as applied: 1 applied, 0
 * applied before, -1. */
static int
migrate_one(PGconn *db, const char *dir, const char *name, char *err,
    size_t errlen)
{
	const char	*vals[1] = { name };
	PGresult	*r;
	int		 done;

	r = PQexecParams(db, "SELECT 1 FROM idem_migrations WHERE name = $1",
	    1, NULL, vals, NULL, NULL, 0);
	if (exec_ok(db, r, err, errlen) == -1) {
		PQclear(r);
		return -1;
	}
	done = PQntuples(r) > 0;
	PQclear(r);
	if (done)
		return 0;
	if (exec_file(db, dir, name, err, errlen) == -1)
		return -1;
	r = PQexecParams(db, "INSERT INTO idem_migrations (name) VALUES ($1)",
	    1, NULL, vals, NULL, NULL, 0);
	done = exec_ok(db, r, err, errlen);
	PQclear(r);
	return done == -1 ? -1 : 1;
}

/*
 * dir/functions/\*.sql, every time: each file is one function's current
 * definition (CREATE OR REPLACE).  Twice: first without checking bodies,
 * so that a LANGUAGE sql function may call one whose file comes later in
 * name order, then with them checked, now that every function exists.
 */
static int
apply_functions(PGconn *db, const char *dir, char *err, size_t errlen)
{
	struct dirent	**ents;
	char		  fdir[4096];
	const char	 *check[2] = {
		"SET LOCAL check_function_bodies = off",
		"SET LOCAL check_function_bodies = on" };
	PGresult	 *r;
	int		  n, i, pass, rc = 0;

	snprintf(fdir, sizeof(fdir), "%s/functions", dir);
	if ((n = scandir(fdir, &ents, sql_filter, alphasort)) < 0)
		return 0;		/* none: an application's own dir */
	for (pass = 0; pass < 2 && rc == 0; pass++) {
		r = PQexec(db, check[pass]);
		rc = exec_ok(db, r, err, errlen);
		PQclear(r);
		for (i = 0; i < n && rc == 0; i++)
			rc = exec_file(db, fdir, ents[i]->d_name, err, errlen);
	}
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	return rc;
}

/*
 * The migrations not yet applied, in name order, then the functions, in
 * one transaction under a lock that serialises migrate across processes:
 * a migration that drops a function's old signature commits with the
 * file that creates the new one, so no session ever finds it missing.
 */
static int
migrate_all(PGconn *db, const char *dir, struct dirent **ents, int n,
    char *err, size_t errlen)
{
	PGresult	*r;
	int		 i, rc, applied = 0;

	r = PQexec(db, "BEGIN; SELECT pg_advisory_xact_lock(" MIGRATE_LOCK
	    ")");
	rc = exec_ok(db, r, err, errlen);
	PQclear(r);
	for (i = 0; i < n && rc != -1; i++)
		if ((rc = migrate_one(db, dir, ents[i]->d_name, err,
		    errlen)) == 1)
			applied++;
	if (rc != -1)
		rc = apply_functions(db, dir, err, errlen);
	if (rc != -1) {
		r = PQexec(db, "COMMIT");
		rc = exec_ok(db, r, err, errlen);
		PQclear(r);
	}
	if (rc == -1) {
		PQclear(PQexec(db, "ROLLBACK"));
		return -1;
	}
	return applied;
}

PGconn *
idem_db_open(const char *config, struct idem_db_settings *set, char *err,
    size_t errlen)
{
	struct idem_cfg	 cfg;
	PGconn		*db;
	const char	*msg;
	size_t		 n;

	idem_cfg_init(&cfg);
	cfg.any_app_keys = 1;	/* the application's sections are not ours */
	if (config != NULL && idem_cfg_load(&cfg, config, err, errlen) == -1) {
		idem_cfg_free(&cfg);
		return NULL;
	}
	idem_log_lines(IDEM_LOG_WARN, cfg.warnings);
	if (set != NULL) {
		set->lock_timeout_ms = cfg.lock_timeout_ms;
		set->evict_batch = cfg.evict_batch;
		snprintf(set->problem_base, sizeof(set->problem_base), "%s",
		    cfg.problem_base != NULL ? cfg.problem_base : "/problems/");
	}
	db = idem_db_connect(cfg.conninfo, cfg.acquire_timeout_ms);
	idem_cfg_free(&cfg);
	if (db != NULL && PQstatus(db) == CONNECTION_OK)
		return db;
	/* libpq's message ends in a newline; err is a line's text. */
	msg = db != NULL ? PQerrorMessage(db) : "out of memory";
	n = strlen(msg);
	if (n > 0 && msg[n - 1] == '\n')
		n--;
	snprintf(err, errlen, "cannot connect: %.*s", (int)n, msg);
	PQfinish(db);
	return NULL;
}

int
idem_migrate(PGconn *db, const char *dir, char *err, size_t errlen)
{
	struct dirent	**ents;
	PGresult	 *r;
	int		  n, i, rc;

	r = PQexec(db, "CREATE TABLE IF NOT EXISTS idem_migrations ("
	    " name text PRIMARY KEY,"
	    " applied_at timestamptz NOT NULL DEFAULT now())");
	rc = exec_ok(db, r, err, errlen);
	PQclear(r);
	if (rc == -1)
		return -1;
	if ((n = scandir(dir, &ents, sql_filter, alphasort)) < 0) {
		snprintf(err, errlen, "%s: cannot read directory", dir);
		return -1;
	}
	rc = migrate_all(db, dir, ents, n, err, errlen);
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	return rc;
}

int
idem_api_key_create(PGconn *db, const char *name, char *secret,
    size_t secretlen, int64_t *id)
{
	unsigned char	 h[32];
	const char	*vals[2];
	int		 lens[2] = { 0, 32 }, fmts[2] = { 0, 1 };
	PGresult	*r;
	int		 rc = -1;

	/* "sk_" and 32 random bytes in hex. */
	if (secretlen < 3 + 64 + 1)
		return -1;
	memcpy(secret, "sk_", 3);
	if (idem_random_hex(secret + 3, 32) == -1)
		return -1;
	idem_sha256(secret, strlen(secret), h);
	vals[0] = name;
	vals[1] = (const char *)h;
	r = PQexecParams(db, "INSERT INTO api_keys (name, secret_hash) "
	    "VALUES ($1, $2) RETURNING id", 2, NULL, vals, lens, fmts, 0);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
		*id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		rc = 0;
	}
	PQclear(r);
	if (rc == -1)
		memset(secret, 0, secretlen);
	return rc;
}

/*
 * One batch under the fleet-wide eviction lock: rows, or -1, or -2 busy.
 * sql is a statement of one parameter (the limit) whose first column is
 * the rows deleted; its second, if any, into *second.
 */
static long
evict_batch(PGconn *db, const char *sql, const char *lim, long *second)
{
	const char	*vals[1] = { lim };
	PGresult	*r;
	long		 n = -1;

	/*
	 * A transaction-scoped lock per batch: it works through pgbouncer in
	 * transaction mode, and two processes never evict at the same time.
	 */
	r = PQexec(db, "BEGIN; SELECT pg_try_advisory_xact_lock("
	    IDEM_EVICT_LOCK ")");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto out;
	if (PQgetvalue(r, 0, 0)[0] != 't') {
		n = -2;
		goto out;
	}
	PQclear(r);
	r = PQexecParams(db, sql, 1, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		goto out;
	n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	if (second != NULL)
		*second = PQnfields(r) > 1 ? strtol(PQgetvalue(r, 0, 1), NULL,
		    10) : 0;
	PQclear(r);
	r = PQexec(db, "COMMIT");
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		n = -1;
out:
	if (n == -1)
		idem_log(IDEM_LOG_ERROR, "evict: %s", PQerrorMessage(db));
	PQclear(r);
	if (n < 0)
		PQclear(PQexec(db, "ROLLBACK"));
	return n;
}

/* A batch of eviction (sql/010: traces written in the same statement)
 * and of forgetting those traces. */
static const char sql_evict_batch[] =
	"SELECT * FROM idem_evict_batch($1::bigint)";
static const char sql_forget_batch[] = "SELECT idem_forget_batch($1::bigint)";

/* Where a batch's connection comes from: db itself, else pool's. */
struct evict_conn {
	PGconn			*db;
	struct idem_pool	*pool;
	long long		 acquire_ms;
};

/* Sleep us microseconds in slices, -1 as soon as *stop is set. */
static int
pause_unless_stopped(long long us, atomic_int *stop)
{
	struct timespec	ts;
	long long	slice;

	while (us > 0) {
		if (stop != NULL && atomic_load(stop))
			return -1;
		slice = us > 50000 ? 50000 : us;
		ts.tv_sec = 0;
		ts.tv_nsec = slice * 1000;
		nanosleep(&ts, NULL);
		us -= slice;
	}
	return stop != NULL && atomic_load(stop) ? -1 : 0;
}

/*
 * Batches of sql until one is short, max_batches (0: no bound) are done,
 * until_us (0: none) has passed or *stop is set: 0, 2 (stopped with more
 * left), 1 (another process evicts), -1.  *n the rows, *second the sum of
 * the second column.  duty (percent, 1 to 99; else none): after a full
 * batch, pause so that batches take that share of the time.  Each batch
 * takes a pool connection and gives it back before the pause: a paced
 * backlog holds none of the requests' connections while it waits.
 */
static int
evict_loop(const struct evict_conn *c, const char *sql, long batch,
    long max_batches, long long until_us, int duty, atomic_int *stop,
    long *n, long *second)
{
	PGconn		*db = c->db;
	char		lim[24];
	long		k, s = 0, i;
	long long	t0, pause;

	*n = 0;
	if (second != NULL)
		*second = 0;
	if (batch <= 0)
		batch = 10000;
	idem_fmt_int(lim, batch);
	for (i = 0; max_batches <= 0 || i < max_batches; i++) {
		/* Between batches: each batch is one short transaction. */
		if (i > 0 && ((stop != NULL && atomic_load(stop)) ||
		    (until_us > 0 && idem_now_us() >= until_us)))
			return 2;
		if (c->db == NULL && (db = idem_pool_acquire(c->pool,
		    c->acquire_ms, NULL)) == NULL)
			return -1;
		t0 = idem_now_us();	/* the wait for it was the requests' */
		k = evict_batch(db, sql, lim, &s);
		if (c->db == NULL)
			idem_pool_release(c->pool, db);
		if (k == -1)
			return -1;
		if (k == -2)
			return i == 0 ? 1 : 0;	/* another process evicts */
		*n += k;
		if (second != NULL)
			*second += s;
		if (k < batch)
			return 0;
		/* A backlog: leave requests the rest of the time (backoff.h). */
		if (duty > 0 && duty < 100) {
			pause = idem_evict_pause_us(idem_now_us() - t0, duty);
			if (until_us > 0 && idem_now_us() + pause > until_us)
				return 2;
			if (pause_unless_stopped(pause, stop) == -1)
				return 2;
		}
	}
	return 2;
}

int
idem_evict_bounded(struct idem_pool *pool, long long acquire_ms, long batch,
    long max_batches, long long until_us, int duty, atomic_int *stop,
    long *evicted, long *remembered)
{
	/*
	 * Only what idem_free() (sql/005) lets a new request replace: never
	 * an in-progress record whose lease is live, nor one past a recovery
	 * point, whose effects may exist (it is left for the completer, and
	 * reported).  A completed record of a route with remember leaves its
	 * trace in the same statement (sql/010).
	 */
	struct evict_conn	c = { NULL, pool, acquire_ms };

	return evict_loop(&c, sql_evict_batch, batch, max_batches, until_us,
	    duty, stop, evicted, remembered);
}

int
idem_forget_bounded(struct idem_pool *pool, long long acquire_ms, long batch,
    long max_batches, long long until_us, int duty, atomic_int *stop,
    long *forgotten)
{
	struct evict_conn	c = { NULL, pool, acquire_ms };

	return evict_loop(&c, sql_forget_batch, batch, max_batches, until_us,
	    duty, stop, forgotten, NULL);
}

int
idem_evict(PGconn *db, long batch, long max_batches,
    long long lock_timeout_ms, long *evicted)
{
	struct evict_conn	c = { db, NULL, 0 };
	long			remembered;
	int			rc;

	(void)lock_timeout_ms;	/* leases carry their own end */
	rc = evict_loop(&c, sql_evict_batch, batch, max_batches, 0, 0, NULL,
	    evicted, &remembered);
	return rc == 2 ? 0 : rc;
}

int
idem_forget(PGconn *db, long batch, long max_batches, long *forgotten)
{
	struct evict_conn	c = { db, NULL, 0 };
	int			rc;

	rc = evict_loop(&c, sql_forget_batch, batch, max_batches, 0, 0, NULL,
	    forgotten, NULL);
	return rc == 2 ? 0 : rc;
}

int
idem_reclaim(PGconn *db, long long lock_timeout_ms, long *reclaimed)
{
	char		 t[24];
	const char	*vals[1] = { t };
	PGresult	*r;
	int		 rc = -1;

	*reclaimed = 0;
	if (lock_timeout_ms <= 0)
		return -1;	/* would take over every running request */
	snprintf(t, sizeof(t), "%lld", lock_timeout_ms);
	/*
	 * Only records whose lease lapsed (lease_until; a lease written before
	 * leases carried their end is taken as lock_timeout long).  One that
	 * never passed a phase is released (deleted): a retry executes
	 * afresh.  One past a recovery point is unlocked so the next retry
	 * resumes there at once; a stale owner is fenced out either way.
	 */
	r = PQexecParams(db, "WITH gone AS (DELETE FROM idempotency_keys"
	    "  WHERE state = 'in_progress' AND recovery_point = 'started'"
	    "  AND coalesce(lease_until, locked_at + $1::bigint *"
	    "   interval '1 millisecond') < now()"
	    "  RETURNING 1),"
	    " freed AS (UPDATE idempotency_keys SET locked_at = NULL,"
	    "  lease_token = NULL, lease_until = NULL"
	    "  WHERE state = 'in_progress' AND recovery_point <> 'started'"
	    "  AND coalesce(lease_until, locked_at + $1::bigint *"
	    "   interval '1 millisecond') < now()"
	    "  RETURNING 1)"
	    " SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM freed)",
	    1, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) == PGRES_TUPLES_OK) {
		*reclaimed = strtol(PQgetvalue(r, 0, 0), NULL, 10);
		rc = 0;
	} else
		idem_log(IDEM_LOG_ERROR, "reclaim: %s", PQerrorMessage(db));
	PQclear(r);
	return rc;
}

enum idem_recover_rc
idem_recover_result(const PGresult *r, long long *requeued)
{
	const char	*outcome;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		return IDEM_RECOVER_ERROR;
	outcome = PQgetvalue(r, 0, 0);
	if (strcmp(outcome, "not_found") == 0)
		return IDEM_RECOVER_NOT_FOUND;
	if (strcmp(outcome, "disabled") == 0)
		return IDEM_RECOVER_DISABLED;
	if (strcmp(outcome, "requeued") != 0)
		return IDEM_RECOVER_ERROR;
	*requeued = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	return IDEM_RECOVER_REQUEUED;
}

enum idem_recover_rc
idem_webhook_recover(PGconn *db, int64_t endpoint, long long since,
    long long *requeued, char *err, size_t errlen)
{
	char			 e[24], t[24];
	const char		*vals[3] = { e, NULL, t };
	enum idem_recover_rc	 rc;
	PGresult		*r;

	if (db == NULL || requeued == NULL || endpoint <= 0 || since < 0) {
		snprintf(err, errlen, "bad arguments");
		return IDEM_RECOVER_ERROR;
	}
	*requeued = 0;
	snprintf(e, sizeof(e), "%lld", (long long)endpoint);
	snprintf(t, sizeof(t), "%lld", since);
	r = PQexecParams(db, IDEM_RECOVER_SQL, 3, NULL, vals, NULL, NULL, 0);
	if ((rc = idem_recover_result(r, requeued)) == IDEM_RECOVER_ERROR)
		snprintf(err, errlen, "%s", PQresultStatus(r) ==
		    PGRES_TUPLES_OK ? "unexpected answer\n" :
		    PQerrorMessage(db));
	PQclear(r);
	return rc;
}
