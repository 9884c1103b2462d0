/*
 * pgpool.c - a fixed pool of libpq connections shared by all worker
 * threads.  Acquiring waits a bounded time; every connection handed out is
 * healthy and outside any transaction, and a broken one is re-established
 * on the next acquire, so the pool recovers from a database restart.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "private.h"

struct idem_pool {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	char		*conninfo;
	unsigned	 size;
	unsigned	 nbusy;
	char		 setup[200];	/* run on every new connection */
	enum idem_prepared prepared;
	atomic_int	 said_pooler;	/* logged once */
	PGconn		**conns;
	unsigned char	*busy;
	struct idem_stmts *stmts;	/* per connection */
};

int64_t
idem_pg_int8(const PGresult *r, int row, int col)
{
	const unsigned char	*p;
	uint64_t		 v = 0;
	int			 i;

	if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
		return 0;
	p = (const unsigned char *)PQgetvalue(r, row, col);
	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

static void
notice(void *arg, const char *msg)
{
	(void)arg;
	idem_log(IDEM_LOG_DEBUG, "db: %s", msg);
}

PGconn *
idem_db_connect(const char *conninfo, long long timeout_ms)
{
	const char	*kw[] = { "connect_timeout", "application_name",
	    "dbname", NULL };
	const char	*val[4];
	char		 tmo[32];
	long long	 s;

	/* libpq's connect_timeout is whole seconds, at least 2. */
	s = (timeout_ms + 999) / 1000;
	snprintf(tmo, sizeof(tmo), "%lld", s < 2 ? 2 : s);
	val[0] = tmo;
	val[1] = "idem";
	val[2] = conninfo;	/* NULL: libpq's PG* environment */
	val[3] = NULL;
	PGconn		*db;

	/* Later keywords win, so a connect_timeout in conninfo is kept. */
	db = PQconnectdbParams(kw, val, 1);
	/* Server notices are for operators, not for stdout. */
	if (db != NULL)
		PQsetNoticeProcessor(db, notice, NULL);
	return db;
}

struct idem_pool *
idem_pool_new(const char *conninfo, unsigned size, long long timeout_ms,
    enum idem_prepared prepared)
{
	struct idem_pool	*p;
	pthread_condattr_t	 ca;

	if (size == 0 || (p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->size = size;
	p->prepared = prepared;
	p->conns = calloc(size, sizeof(*p->conns));
	p->busy = calloc(size, 1);
	p->stmts = calloc(size, sizeof(*p->stmts));
	if (conninfo != NULL)
		p->conninfo = strdup(conninfo);
	if (p->conns == NULL || p->busy == NULL || p->stmts == NULL ||
	    (conninfo != NULL && p->conninfo == NULL)) {
		free(p->conns);
		free(p->busy);
		free(p->stmts);
		free(p->conninfo);
		free(p);
		return NULL;
	}
	/* No statement, nor a transaction left idle by a stuck or killed
	 * handler, outlives the request timeout.  The backend's pid tells
	 * whether a pooler stands between us and the server (below). */
	snprintf(p->setup, sizeof(p->setup), "SET statement_timeout = %lld; "
	    "SET idle_in_transaction_session_timeout = %lld; "
	    "SELECT pg_backend_pid()", timeout_ms, timeout_ms);
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	return p;
}

/*
 * Notice a connection the server closed while it sat idle in the pool: a
 * terminated backend sends an error, then EOF, and libpq marks the
 * connection bad only when it reads the EOF, so read until nothing is left.
 */
static void
pool_check(PGconn *db)
{
	struct pollfd	pfd;
	int		i;

	for (i = 0; i < 8 && PQstatus(db) == CONNECTION_OK; i++) {
		pfd.fd = PQsocket(db);
		pfd.events = POLLIN;
		if (pfd.fd < 0 || poll(&pfd, 1, 0) <= 0)
			break;
		if (PQconsumeInput(db) == 0)
			break;
		while (PQisBusy(db) == 0) {
			PGresult *r = PQgetResult(db);
			if (r == NULL)
				break;
			PQclear(r);
		}
	}
}

/*
 * A new or re-established session: nothing is prepared on it yet.  With
 * prepared_statements = auto, statements are named only where the pid the
 * server announced at connection start is the pid of the backend that
 * answers: a pooler (pgbouncer) announces a pid of its own, and may run
 * the next transaction in another session, which has not seen ours.
 */
static void
pool_setup(struct idem_pool *p, unsigned i)
{
	PGconn			*db = p->conns[i];
	struct idem_stmts	*s = &p->stmts[i];
	PGresult		*r;
	int			 direct;

	idem_stmts_forget(s);
	s->enabled = p->prepared != IDEM_PREPARED_OFF;
	s->always = p->prepared == IDEM_PREPARED_ON;
	if (db == NULL || PQstatus(db) != CONNECTION_OK)
		return;
	r = PQexec(db, p->setup);
	direct = PQresultStatus(r) == PGRES_TUPLES_OK &&
	    PQntuples(r) == 1 &&
	    atol(PQgetvalue(r, 0, 0)) == (long)PQbackendPID(db);
	PQclear(r);
	if (p->prepared != IDEM_PREPARED_AUTO || direct)
		return;
	s->enabled = 0;
	if (atomic_exchange(&p->said_pooler, 1) == 0)
		idem_log(IDEM_LOG_INFO, "pool: a connection pooler answers "
		    "for the server; statements are sent unnamed "
		    "([database] prepared_statements = auto)");
}

PGconn *
idem_pool_acquire(struct idem_pool *p, long long timeout_ms,
    struct idem_stmts **stmts)
{
	struct timespec	 dl;
	unsigned	 i;
	PGconn		*db;

	idem_deadline(CLOCK_MONOTONIC, timeout_ms, &dl);
	pthread_mutex_lock(&p->mu);
	while (p->nbusy == p->size)
		if (pthread_cond_timedwait(&p->cv, &p->mu, &dl) == ETIMEDOUT &&
		    p->nbusy == p->size) {
			pthread_mutex_unlock(&p->mu);
			idem_log(IDEM_LOG_WARN, "pool: no connection free "
			    "within %lld ms", timeout_ms);
			return NULL;
		}
	/* Prefer a slot that is already connected. */
	for (i = 0; i < p->size; i++)
		if (!p->busy[i] && p->conns[i] != NULL)
			break;
	if (i == p->size)
		for (i = 0; i < p->size; i++)
			if (!p->busy[i])
				break;
	p->busy[i] = 1;
	p->nbusy++;
	pthread_mutex_unlock(&p->mu);

	/* Connecting happens outside the lock: it can take a while. */
	if (p->conns[i] == NULL) {
		p->conns[i] = idem_db_connect(p->conninfo, timeout_ms);
		pool_setup(p, i);
	} else {
		pool_check(p->conns[i]);
		if (PQstatus(p->conns[i]) != CONNECTION_OK) {
			PQreset(p->conns[i]);
			pool_setup(p, i);
		}
	}
	db = p->conns[i];
	if (db != NULL && PQstatus(db) == CONNECTION_OK &&
	    PQtransactionStatus(db) == PQTRANS_IDLE) {
		if (stmts != NULL)
			*stmts = &p->stmts[i];
		return db;
	}
	idem_log(IDEM_LOG_ERROR, "pool: cannot connect: %s",
	    db ? PQerrorMessage(db) : "out of memory");
	pthread_mutex_lock(&p->mu);
	p->busy[i] = 0;
	p->nbusy--;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int
idem_db_broken(PGconn *db)
{
	/* A server that ended the session has usually closed the socket
	 * too, which libpq only notices when it reads. */
	if (db == NULL || PQstatus(db) != CONNECTION_OK)
		return 1;
	if (PQconsumeInput(db) == 0)
		return 1;
	return PQstatus(db) != CONNECTION_OK;
}

void
idem_pool_release(struct idem_pool *p, PGconn *db)
{
	unsigned	 i;
	PGresult	*r;

	if (db == NULL)
		return;
	/* Another thread may be connecting its slot: look under the lock. */
	pthread_mutex_lock(&p->mu);
	for (i = 0; i < p->size; i++)
		if (p->conns[i] == db && p->busy[i])
			break;
	pthread_mutex_unlock(&p->mu);
	if (i == p->size)
		return;
	if (PQstatus(db) == CONNECTION_OK) {
		/* Drain anything a failed handler left unread. */
		while ((r = PQgetResult(db)) != NULL)
			PQclear(r);
		if (PQpipelineStatus(db) != PQ_PIPELINE_OFF &&
		    PQexitPipelineMode(db) == 0) {
			PQreset(db);
			pool_setup(p, i);
		}
		switch (PQtransactionStatus(db)) {
		case PQTRANS_IDLE:
			break;
		case PQTRANS_INTRANS:
		case PQTRANS_INERROR:
			PQclear(PQexec(db, "ROLLBACK"));
			break;
		default:
			PQreset(db);
			pool_setup(p, i);
			break;
		}
	}
	pthread_mutex_lock(&p->mu);
	p->busy[i] = 0;
	p->nbusy--;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void
idem_pool_counts(struct idem_pool *p, unsigned *idle, unsigned *busy)
{
	pthread_mutex_lock(&p->mu);
	*busy = p->nbusy;
	*idle = p->size - p->nbusy;
	pthread_mutex_unlock(&p->mu);
}

void
idem_pool_free(struct idem_pool *p)
{
	unsigned	i;

	if (p == NULL)
		return;
	for (i = 0; i < p->size; i++) {
		if (p->conns[i] != NULL)
			PQfinish(p->conns[i]);
		idem_stmts_forget(&p->stmts[i]);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->conns);
	free(p->busy);
	free(p->stmts);
	free(p->conninfo);
	free(p);
}
